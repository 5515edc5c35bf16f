"""Failing back (issue 19) on the real bed: the drill of :mod:`testbed.failback` (fail over in a disaster with the
CLI, consume and produce on the backup, recover the primary, run MM2's backup->primary flow, move the group home
with the ``mm2_failover`` DAG: source_alias=backup, the connections swapped, home_alias=primary). Every record is
consumed at least once across the three phases; the duplicates are counted. (``make demo-failback`` runs both
moves through the DAG.)

What MM2 (Kafka 4.3.1) really does here, measured on this bed: the backup->primary flow writes checkpoints for
``orders`` produced on backup (as ``backup.orders``) but **none** for the history the group consumed on backup as
``primary.orders``: MirrorCheckpointTask only checkpoints partitions it has offset syncs for, and that topic is never
copied back (a cycle), so it has none. Those positions go home through the *primary->backup* flow's archived offset
syncs, read backwards (translate rules 8-9)."""

from __future__ import annotations

import pytest

from testbed import failback as fb
from testbed.localenv import run_cli as cli

pytestmark = [pytest.mark.bed]


def test_fail_over_consume_on_backup_then_fail_back_loses_nothing_and_counts_the_re_reads(
    bed, run_root, tmp_path, monkeypatch
):
    from mm2_failover.adapters.config import run_dir
    from testbed import localenv
    from testbed.bed import Bed

    env = {"MM2_FAILOVER_ARCHIVE": str(tmp_path / "archive"), "MM2_FAILOVER_ARTIFACTS": str(tmp_path / "artifacts")}
    monkeypatch.setenv("MM2_FAILOVER_ARCHIVE", env["MM2_FAILOVER_ARCHIVE"])  # the DAG's, in this process

    def on(b, *args):
        r = cli("--source-bootstrap", b.source_bootstrap, "--target-bootstrap", b.target_bootstrap, *args, env=env)
        assert r.returncode == 0, (args, r.stdout[-3000:], r.stderr[-3000:])

    def fail_over(b):
        on(
            b,
            "apply",
            "--execute",
            "--groups-regex",
            fb.GROUP,
            "--source-reachable",
            "no",
            "--run-dir",
            str(tmp_path / "over"),
        )
        return tmp_path / "over"

    def fail_back(b):  # the DAG, its connections swapped
        monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SOURCE", localenv.kafka_conn(b.target_bootstrap))
        monkeypatch.setenv("AIRFLOW_CONN_KAFKA_TARGET", localenv.kafka_conn(b.source_bootstrap))
        dr = localenv.run_dag(
            "mm2_failover",
            {
                "source_alias": "backup",
                "home_alias": "primary",
                "groups_regex": fb.GROUP,
                "on_existing_target_offsets": "overwrite",
                "drain_quiet_seconds": 1,
            },
        )
        assert dr.state == "success", localenv.task_states("mm2_failover", dr.run_id)
        return run_dir("mm2_failover", dr.run_id)

    with Bed(run_dir=run_root / "bed-failback") as b:
        out = fb.drill(b, lambda b: on(b, "archive"), fail_over, fail_back)
    print(out.table())
    assert out.reverse_checkpoint_topics == {"backup.orders"}  # none for primary.orders: measured
    assert set(out.home) == {(t, p) for t in ("orders", "backup.orders") for p in range(fb.PARTS)}
    assert all(out.rules[("orders", p)].startswith("home_") for p in range(fb.PARTS)), out.rules
    assert set(out.lost.values()) == {0}, out.table()  # every record read at least once over the three phases
    report = out.report
    assert report["outcome"] == "succeeded", report.get("outcome")
    for p in range(fb.PARTS):  # the records MM2 never copied before the outage, per partition, in the report
        assert any(
            f"orders[{p}] holds {fb.RPO} record(s) (offsets {fb.PRODUCED}-{fb.PRODUCED + fb.RPO - 1}) that "
            "MM2 never copied" in w
            for w in report["warnings"]
        ), report["warnings"]
        if out.rules[("orders", p)] != "home_sync_floor":  # where the offset syncs prove it, nothing read twice
            assert out.again[("orders", p)] == 0, out.table()
