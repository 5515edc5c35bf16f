"""The command line on the real bed: plan, apply (with verification) and a drill, without Airflow's scheduler."""

from __future__ import annotations

import json
import os

import pytest

from mm2_failover.adapters.runfolder import RunFolder
from testbed import scenario
from testbed.bed import kafka_consumer_groups
from testbed.localenv import run_cli

pytestmark = [pytest.mark.bed, pytest.mark.spark]


def cli(bed, *args):
    return run_cli(*args, bed=bed, quiet_s=None)


def test_cli_plan_apply_and_drill(bed, target, names, run_root):
    g = names["group"]
    prep = scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        group=g,
        topic=names["topic"],
        partitions=2,
        produced=40,
        consumed_upto={0: 40, 1: 10},
    )
    run = run_root / "cli" / g
    r = cli(bed, "plan", "--run-dir", str(run), "--groups-regex", g, "--drain-quiet-seconds", "1")
    assert r.returncode == 0, r.stderr[-3000:]
    assert target.committed(g) == {}  # plan never writes
    assert len((run / "plan.csv").read_text().splitlines()) == 2
    # the CLI takes the DAG's route for the job: the session's warm server when spark_connect_default names one
    spark = json.loads(RunFolder(run).checkpoints_summary.read_text())["spark"]
    want = "spark-connect" if "AIRFLOW_CONN_SPARK_CONNECT_DEFAULT" in os.environ else "spark-submit"
    assert spark["route"] == want, (spark, r.stderr[-3000:])
    # its logging stays on stderr after the route's look at Airflow's connection (Airflow's first import would
    # send it to stdout, where the CLI prints its results)
    assert "latest-checkpoints job route: " in r.stderr and "route" not in r.stdout, (r.stdout, r.stderr[-3000:])
    # the plan per partition, as kafka-consumer-groups prints offsets, and Kafka's own command for the same offsets
    out = r.stdout.splitlines()
    head = out.index(next(line for line in out if line.startswith("GROUP ")))
    assert out[head].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET", "CHECKPOINT", "RE-READ", "RULE"]
    shown = {tuple(line.split()[:4]) for line in out[head + 1 : head + 3]}
    assert shown == {tuple(line.split(",")) for line in (run / "plan.csv").read_text().splitlines()}, r.stdout
    [by_hand] = [line.split() for line in out if "kafka-consumer-groups.sh" in line]
    assert by_hand[-1] == "--execute" and by_hand[by_hand.index("--from-file") + 1] == str(run / "plan.csv")
    k = kafka_consumer_groups(bed.target_bootstrap, *by_hand[by_hand.index("--reset-offsets") : -1], "--dry-run")
    assert k.returncode == 0, k.stderr
    assert {tuple(line.split()) for line in k.stdout.splitlines() if line.startswith(g)} == shown, k.stdout
    # apply the plan of that folder with its own parameters: without --execute a dry run, nothing written
    r = cli(bed, "apply", "--plan", str(run), "--drain-quiet-seconds", "1")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Dry run: nothing was written" in r.stdout and f"apply --plan {run} --execute" in r.stdout, r.stdout
    assert target.committed(g) == {}
    r = cli(bed, "apply", "--plan", str(run), "--execute", "--drain-quiet-seconds", "1")
    assert r.returncode == 0, r.stderr[-3000:]
    # the exact positions the offset syncs prove (replica offsets equal the source's: one producer)
    assert target.committed(g) == {(prep.replica_topic, p): o for p, o in prep.consumed_upto.items()}
    assert json.loads((run / "report.json").read_text())["outcome"] == "succeeded"
    r = cli(bed, "verify", "--run-dir", str(run), "--groups-regex", g, "-o", "json")
    assert r.returncode == 0, r.stderr[-3000:]
    said = json.loads(r.stdout)
    assert said["outcome"] == "succeeded" and {(x["partition"], x["committed_after"]) for x in said["rows"]} == {
        (p, o) for p, o in prep.consumed_upto.items()
    }
    drill_dir = run_root / "cli" / "drills" / g
    r = cli(
        bed,
        "drill",
        "--run-dir",
        str(drill_dir),
        "--groups-regex",
        g,
        "--on-existing-target-offsets",
        "overwrite",
        "--drain-quiet-seconds",
        "1",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads((drill_dir / "drill.json").read_text())
    assert d["totals"]["groups_covered"] == 1
    assert target.committed(g) == {(prep.replica_topic, p): o for p, o in prep.consumed_upto.items()}
