"""The safety behaviour through the real DAGs (Airflow dag.test(), real Spark, real brokers and MM2)."""

from __future__ import annotations

import re

import pytest

from mm2_failover.adapters.config import run_dir
from mm2_failover.adapters.runfolder import RunFolder
from mm2_failover.stages.apply import backup_and_apply
from mm2_failover.stages.build_plan import make_plan

pytestmark = [pytest.mark.bed, pytest.mark.airflow, pytest.mark.spark]


def test_dry_run_exports_a_plan_kafka_tools_accept_and_writes_nothing(prepared):
    from testbed import localenv
    from testbed.bed import kafka_consumer_groups

    p = prepared
    g = p.names["group"]
    rt = p.prep[g].replica_topic
    dr = localenv.run_dag("mm2_failover", {"groups_regex": g, "dry_run": True, "drain_quiet_seconds": 1})
    states = localenv.task_states("mm2_failover", dr.run_id)
    assert states["apply_group_offsets"] == "skipped" and states["verify_group_offsets"] == "skipped"
    assert states["compute_latest_checkpoints"] == "success"
    art = RunFolder(run_dir("mm2_failover", dr.run_id))
    assert p.target.committed(g) == {}  # __consumer_offsets untouched
    assert p.target.describe_groups([g])[g].state in ("DEAD", "UNKNOWN")  # never existed on the target
    csv_lines = art.plan_csv.read_text().splitlines()
    assert len(csv_lines) == 3 and all(line.startswith(f"{g},{rt},") for line in csv_lines)
    # Kafka's own tool reads the exported plan back, unchanged
    r = kafka_consumer_groups(
        p.bed.target_bootstrap, "--reset-offsets", "--from-file", str(art.plan_csv), "--group", g, "--dry-run"
    )
    assert r.returncode == 0, r.stderr
    rows = sorted(tuple(line.split()) for line in r.stdout.splitlines() if line.startswith(g))
    assert rows == sorted(tuple(line.split(",")) for line in csv_lines), r.stdout
    assert p.target.committed(g) == {}


def test_gate_waits_for_a_live_target_consumer_then_fails_naming_it(prepared, live_consumer, capfd):
    from testbed import localenv

    p = prepared
    g = p.names["group"]
    lc = live_consumer(p.bed.target_bootstrap, g, p.prep[g].replica_topic, client_id="still-running-on-backup")
    lc.wait_stable(p.target, g)
    dr = localenv.run_dag(
        "mm2_failover", {"groups_regex": g, "drain_quiet_seconds": 1, "groups_empty_timeout_seconds": 10}
    )
    assert dr.state == "failed"
    states = localenv.task_states("mm2_failover", dr.run_id)
    assert states["check_groups_empty"] == "failed"
    assert states["apply_group_offsets"] in ("upstream_failed", "None")
    out = capfd.readouterr().out
    assert "still have live members" in out and "still-running-on-backup" in out and g in out
    assert "Sensor has timed out" in out
    # each poke says how long it waited and has left (issue 53 item 1: not one line repeated for the whole wait)
    pokes = re.findall(r"1 of 1 group\(s\) still have live members; waited (\d+) s, (\d+) s left", out)
    assert pokes and len(set(pokes)) == len(pokes), out[-3000:]
    lc.stop()
    assert p.target.committed(g) == {}


def test_rollback_dag_restores_the_backup(prepared):
    from testbed import localenv

    p = prepared
    g = p.names["group"]
    rt = p.prep[g].replica_topic
    p.snapshot_and_checkpoints()
    ctx = p.ctx()
    backup_and_apply(ctx, make_plan(ctx))
    assert len(p.target.committed(g)) == 3
    dr = localenv.run_dag("mm2_failover_rollback", {"backup_path": str(p.art.backup)})
    assert dr.state == "success"
    assert p.target.committed(g) == {}  # the group had no commits on the target before
    assert localenv.task_states("mm2_failover_rollback", dr.run_id) == {
        "check_groups_empty": "success",
        "rollback_group_offsets": "success",
        "verify_rollback": "success",
    }
    assert rt
