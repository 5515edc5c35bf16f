"""Knowing it is safe to fail over, on real brokers and real MM2: producers still writing, MM2 stopped with
unreplicated records, and the source cluster lost (disaster mode)."""

from __future__ import annotations

import json
import time

import pytest

from mm2_failover.kafka_io import Cluster
from testbed import localenv, scenario
from mm2_failover.config import artifacts_root, run_dir

pytestmark = [pytest.mark.bed, pytest.mark.spark, pytest.mark.airflow]


def test_sensor_waits_while_producers_write_then_succeeds(bed, target, names, capfd):
    g, topic = names["group"], names["topic"]
    prep = scenario.prepare(bed.source_bootstrap, bed.target_bootstrap, group=g, topic=topic, partitions=1,
                            produced=30, consumed_upto={0: 30})
    t0 = time.time()

    def a_poke_saw_writes() -> bool:  # this run's drain.json says "not drained" (the sensor poked while we wrote)
        for f in artifacts_root().glob("mm2_failover/*/drain.json"):
            try:
                if f.stat().st_mtime >= t0 and not json.loads(f.read_text()).get("drained"):
                    return True
            except (OSError, ValueError):
                pass
        return False

    # produce until a poke has seen the source move (the audit task runs first), 60 s at most
    with scenario.producing(bed.source_bootstrap, topic, 30, until=a_poke_saw_writes):
        dr = localenv.run_dag("mm2_failover", {"groups_regex": g, "drain_quiet_seconds": 2, "dry_run": True})
    out = capfd.readouterr().out
    assert "producers still writing" in out  # a poke saw the source end offset move...
    assert dr.state == "success"  # ...and a later one found everything drained
    drained = json.loads((run_dir("mm2_failover", dr.run_id) / "drain.json").read_text())
    assert drained["drained"] and not drained["disaster"]
    row = drained["rows"][0]
    assert row["topic"] == topic and row["replicated"] + 1 == row["source_end"] == row["replica_end"]
    assert prep.replica_topic == row["replica_topic"]


@pytest.fixture(scope="module")
def own_bed(bed, run_root):
    """A bed of its own: these tests stop MM2 and then the source broker."""
    from testbed.bed import Bed

    b = Bed(run_dir=run_root / "bed-disaster")
    with b:
        yield b


@pytest.fixture
def on_own_bed(own_bed, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SOURCE", localenv.kafka_conn(own_bed.source_bootstrap))
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_TARGET", localenv.kafka_conn(own_bed.target_bootstrap))
    return own_bed


def test_mm2_stopped_with_unreplicated_records_times_out_naming_the_partitions(on_own_bed, capfd):
    b = on_own_bed
    scenario.prepare(b.source_bootstrap, b.target_bootstrap, group="lost-app", topic="payments", partitions=2,
                     produced=40, consumed_upto={0: 40, 1: 20})
    b.stop_mm2()
    scenario.produce(b.source_bootstrap, "payments", 2, 15, start=40)  # never replicated
    dr = localenv.run_dag("mm2_failover", {"groups_regex": "lost-app", "drain_quiet_seconds": 1,
                                           "drain_timeout_seconds": 12})
    assert dr.state == "failed"
    states = localenv.task_states("mm2_failover", dr.run_id)
    assert states["verify_producers_drained"] == "failed"
    out = capfd.readouterr().out
    assert "Not drained" in out and "replication behind" in out
    drained = json.loads((run_dir("mm2_failover", dr.run_id) / "drain.json").read_text())
    rows = {r["partition"]: r for r in drained["rows"]}
    assert {p: (r["source_end"], r["replica_end"], r["state"]) for p, r in rows.items()} == {
        0: (55, 40, "replication behind"), 1: (55, 40, "replication behind")}
    assert all(r["replicated"] == 39 for r in rows.values())  # MM2's own progress record


def test_source_lost_disaster_mode_completes_with_warning_and_loss_window(on_own_bed, capfd):
    b = on_own_bed
    target = Cluster({"bootstrap.servers": b.target_bootstrap}, "target")
    b.stop_source()
    dr = localenv.run_dag("mm2_failover", {"groups_regex": "lost-app", "drain_quiet_seconds": 1,
                                           "drain_timeout_seconds": 60})
    assert dr.state == "success"
    out = capfd.readouterr().out
    assert "DISASTER MODE" in out
    art = run_dir("mm2_failover", dr.run_id)
    report = json.loads((art / "report.json").read_text())
    assert any(w.startswith("DISASTER MODE") for w in report["warnings"])
    assert report["rpo"]["seconds_since_newest_replicated_record"] is not None
    assert report["rpo"]["seconds_since_newest_replicated_record"] >= 0
    snap = json.loads((art / "snapshot.json").read_text())
    assert snap["sources"]["primary"] == {"alias": "primary", "reachable": False, "end_offsets": None,
                                          "group_commits": None}
    assert snap["disaster_aliases"] == ["primary"]
    committed = target.committed("lost-app")
    assert set(committed) == {("primary.payments", 0), ("primary.payments", 1)}
    assert all(o <= 40 for o in committed.values())  # never past what was replicated and consumed
