"""The DR drill DAG on the real bed (real MM2 checkpoints, real Spark, dag.test()): a dry run that records the
drill's findings, writes offsets only for groups starting with allow_drill_writes_for_prefix, and shows up in the
reports UI's trend."""

from __future__ import annotations

import json

import pytest

from mm2_failover.adapters.config import run_dir
from testbed import scenario

pytestmark = [pytest.mark.bed, pytest.mark.spark, pytest.mark.airflow]


def test_drill_dry_run_records_findings_and_writes_only_the_prefixed_groups(bed, target, names):
    from fastapi.testclient import TestClient

    from mm2_failover.ui.app import create_app
    from mm2_failover.ui.runs import safe_name
    from testbed import localenv

    drill_group, other_group = f"drill-{names['group']}", names["group"]
    prep_d = scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        group=drill_group,
        topic=names["topic"] + "-d",
        partitions=2,
        produced=50,
        consumed_upto={0: 20, 1: 50},
        batches=2,
        pause_s=0.2,
    )
    prep_o = scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        group=other_group,
        topic=names["topic"] + "-o",
        partitions=2,
        produced=50,
        consumed_upto={0: 30, 1: 10},
        batches=2,
        pause_s=0.2,
    )

    dr = localenv.run_dag(
        "mm2_failover_drill",
        {
            "groups_regex": f"{drill_group}|{other_group}",
            "drain_quiet_seconds": 1,
            "allow_drill_writes_for_prefix": "drill-",
        },
    )
    assert dr.state == "success"
    art = run_dir("mm2_failover_drill", dr.run_id)

    # only the prefixed group was written, to the exact positions MM2's offset syncs prove (one producer: replica
    # offsets equal the source's); the other group was not touched
    assert target.committed(drill_group) == {(prep_d.replica_topic, p): o for p, o in prep_d.consumed_upto.items()}
    assert target.committed(other_group) == {}
    assert set(json.loads((art / "backup.json").read_text())["groups"]) == {drill_group}

    d = json.loads((art / "drill.json").read_text())
    t = d["totals"]
    assert t["groups_covered"] == 2 and t["groups_written"] == 1 and t["partitions"] == 4
    assert t["partitions_without_checkpoints"] == 0 and t["groups_without_checkpoints"] == 0
    assert t["checkpoint_age_max_seconds"] is not None and t["checkpoint_age_max_seconds"] >= 0
    assert t["replication_lag_max_records"] == 0  # produced, consumed and replicated before the drill
    # re-read: none where the plan resumes at the exact position; what MM2's real checkpoints alone would re-read
    by_checkpoint = {
        (g, prep.replica_topic, p): prep.consumed_upto[p] - c.downstream_offset
        for g, prep in ((drill_group, prep_d), (other_group, prep_o))
        for p, c in prep.checkpoints.items()
    }
    assert {(x["group"], x["topic"], x["partition"]): x["reread"] for x in d["reread"]} == {k: 0 for k in by_checkpoint}
    assert {(x["group"], x["topic"], x["partition"]): x["reread_by_checkpoint"] for x in d["reread"]} == by_checkpoint
    assert t["records_reread_estimate"] == 0
    rep = json.loads((art / "report.json").read_text())
    assert rep["outcome"] == "dry_run" and rep["dag_id"] == "mm2_failover_drill"
    assert (art / "drill.md").read_text().startswith("# mm2-failover DR drill")

    # the UI lists it and plots it
    c = TestClient(create_app(art.parents[1]))
    assert dr.run_id in c.get("/").text
    trend = c.get("/drills").text
    assert dr.run_id in trend and "<svg" in trend
    page = c.get(f"/runs/mm2_failover_drill/{safe_name(dr.run_id)}").text
    assert drill_group in page and other_group in page and "Findings" in page
