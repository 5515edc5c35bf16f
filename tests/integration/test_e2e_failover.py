"""End to end on real software: real Kafka brokers, real MirrorMaker 2 checkpoints, real Spark (local),
real Airflow (dag.test()). The group must resume on the target without losing a record."""

from __future__ import annotations

import json

import pytest

from mm2_failover import scenario
from mm2_failover.config import run_dir

pytestmark = [pytest.mark.bed, pytest.mark.spark, pytest.mark.airflow]


def test_failover_dag_moves_group_to_checkpointed_offsets_without_loss(bed, target, names):
    import pyarrow.parquet as pq

    from mm2_failover import localenv

    prep = scenario.prepare(bed.source_bootstrap, bed.target_bootstrap, group=names["group"], topic=names["topic"],
                            partitions=3, produced=120, consumed_upto={0: 30, 1: 75, 2: 120})
    dr = localenv.run_dag("mm2_failover", {"groups_regex": names["group"], "drain_quiet_seconds": 2})
    assert dr.state == "success"
    art = run_dir("mm2_failover", dr.run_id)

    # the group's commits on the target are exactly the latest checkpoints' downstream offsets
    latest = {k.partition: v for k, v in scenario.read_checkpoints(target, bed.checkpoints_topic).items()
              if k.group == names["group"]}
    committed = target.committed(names["group"])
    assert committed == {(prep.replica_topic, p): cp.downstream_offset for p, cp in latest.items()}
    assert len(committed) == 3

    # the Spark job's Parquet output holds the same latest checkpoints, named by replica topic
    rows = pq.read_table(str(art / "latest_checkpoints.parquet")).to_pylist()
    assert sorted((r["group"], r["topic"], r["partition"], r["upstream_offset"], r["downstream_offset"]) for r in rows) == \
        sorted((names["group"], prep.replica_topic, p, cp.upstream_offset, cp.downstream_offset) for p, cp in latest.items())
    assert {r["source_alias"] for r in rows} == {"primary"}

    # a consumer of the group on the target starts at the committed offset, never after the consumed position
    first = scenario.first_records_on_target(bed.target_bootstrap, names["group"], prep.replica_topic, 3)
    outcomes = scenario.compare(prep, committed, first)
    print("\n" + scenario.render_outcomes(outcomes))
    for o in outcomes:
        assert o.first_on_target == o.target_committed  # resumes exactly where we committed (or at the end)
        assert o.lost == 0, f"partition {o.partition} would skip {o.lost} record(s)"
        assert o.target_committed <= o.source_committed
    # MM2 translates exactly at the log end (group consumed everything): nothing re-read there
    assert outcomes[2].re_read == 0

    report = json.loads((art / "report.json").read_text())
    assert report["outcome"] == "succeeded"
    assert report["totals"]["committed"] == 3 and report["totals"]["mismatches"] == 0
    assert (art / "report.md").read_text().startswith("# mm2-failover report")
    assert (art / "plan.csv").read_text().splitlines() == [
        f"{names['group']},{prep.replica_topic},{p},{latest[p].downstream_offset}" for p in range(3)]
