"""Failing back (issue 19) on the real bed: fail over in a disaster, consume and produce on the backup, recover the
primary, run MM2's backup->primary flow, and move the group home with the same CLI (source_alias=backup, the
clusters swapped, home_alias=primary). Every record is consumed at least once across the three phases; the
duplicates are counted.

What MM2 (Kafka 4.3.1) really does here, measured on this bed: the backup->primary flow writes checkpoints for
``orders`` produced on backup (as ``backup.orders``) but **none** for the history the group consumed on backup as
``primary.orders``: MirrorCheckpointTask only checkpoints partitions it has offset syncs for, and that topic is never
copied back (a cycle), so it has none. Those positions go home through the *primary->backup* flow's archived offset
syncs, read backwards (translate rules 8-9)."""

from __future__ import annotations

import json

import pytest

from mm2_failover.kafka_io import Cluster
from testbed import scenario
from tests.integration.test_worst_day import cli

pytestmark = [pytest.mark.bed]

PARTS = 2
PRODUCED = 200  # per partition, on primary before the outage (MM2 copies them)
RPO = 15  # per partition, written on primary after MM2 stopped: never copied to backup
LOCAL = 40  # per partition, written on backup's own ``orders`` during the outage


def indices(cluster: Cluster, topic: str, partition: int, start: int, end: int) -> list[int]:
    """Payload indices of the records at offsets [start, end) (what a consumer resuming at ``start`` reads)."""
    if end <= start:
        return []
    return [scenario.index_of(v) for _t, _p, _o, _k, v, _ts in
            cluster.read({(topic, partition): end}, start={(topic, partition): start})]


def test_fail_over_consume_on_backup_then_fail_back_loses_nothing_and_counts_the_re_reads(bed, run_root, tmp_path):
    from testbed.bed import Bed

    env = {"MM2_FAILOVER_ARCHIVE": str(tmp_path / "archive"), "MM2_FAILOVER_ARTIFACTS": str(tmp_path / "artifacts")}
    g = "orders-app"
    with Bed(run_dir=run_root / "bed-failback") as b:
        primary = Cluster({"bootstrap.servers": b.source_bootstrap}, "primary")
        backup = Cluster({"bootstrap.servers": b.target_bootstrap}, "backup")
        forward = ("--source-bootstrap", b.source_bootstrap, "--target-bootstrap", b.target_bootstrap)
        back = ("--source-bootstrap", b.target_bootstrap, "--target-bootstrap", b.source_bootstrap)
        # phase 1 on primary: produced in bursts (MM2's offset syncs then lie far apart), consumed in part
        scenario.prepare(b.source_bootstrap, b.target_bootstrap, group=g, topic="orders", partitions=PARTS,
                         produced=PRODUCED, consumed_upto={0: 70, 1: 120}, batches=4, pause_s=0.3)
        read = {("orders", p): indices(primary, "orders", p, 0, u) for p, u in {0: 70, 1: 120}.items()}
        # MM2 stops (the data centre is failing), records it never copies are written, then the primary is lost
        b.stop_mm2()
        r = cli(*forward, "archive", env=env)  # the archive DAG's last run before the outage
        assert r.returncode == 0, r.stderr[-3000:]
        scenario.produce(b.source_bootstrap, "orders", PARTS, RPO, start=PRODUCED)
        b.stop_source()

        # the failover, in disaster mode
        r = cli(*forward, "apply", "--groups-regex", g, "--source-reachable", "no",
                "--run-dir", str(tmp_path / "failover"), env=env)
        assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
        moved = backup.committed(g)
        assert set(moved) == {("primary.orders", p) for p in range(PARTS)}

        # phase 2 on backup: the group reads on, and new records are produced and consumed on backup's own topic
        upto = {0: 150, 1: PRODUCED}
        scenario.consume_and_commit(b.target_bootstrap, g, "primary.orders", upto)
        for p, u in upto.items():
            read[("orders", p)] += indices(backup, "primary.orders", p, moved[("primary.orders", p)], u)
        backup.create_topic("orders", PARTS)
        scenario.produce(b.target_bootstrap, "orders", PARTS, LOCAL)
        local_upto = {0: 25, 1: 10}
        scenario.consume_and_commit(b.target_bootstrap, g, "orders", local_upto)
        read.update({("backup.orders", p): indices(backup, "orders", p, 0, u) for p, u in local_upto.items()})

        # the primary is back; MM2's backup->primary flow starts and copies backup's orders
        b.restart_source()
        b.start_reverse_mm2()
        scenario.wait_replicated(backup, primary, "orders", "backup.orders")
        scenario.wait_checkpointed(primary, "backup.checkpoints.internal", g, "backup.orders", PARTS)
        cps = scenario.read_checkpoints(primary, "backup.checkpoints.internal")
        assert {k.topic for k in cps if k.group == g} == {"backup.orders"}  # none for primary.orders: measured

        # the failback: the same CLI, the clusters swapped; the group's old commits on primary are replaced
        run = tmp_path / "failback"
        r = cli(*back, "apply", "--source-alias", "backup", "--home-alias", "primary", "--groups-regex", g,
                "--on-existing-target-offsets", "overwrite", "--run-dir", str(run), env=env)
        assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
        home = primary.committed(g)
        assert set(home) == {("orders", p) for p in range(PARTS)} | {("backup.orders", p) for p in range(PARTS)}
        plan = {(row["topic"], row["partition"]): row for row in json.loads((run / "plan.json").read_text())["rows"]}
        assert all(plan[("orders", p)]["rule"].startswith("home_") for p in range(PARTS)), plan

        # phase 3 on primary: the group reads to the end of both topics
        ends = primary.offsets(list(home))
        before = {tp: set(v) for tp, v in read.items()}
        again = {}  # records the failback makes the group read a second time
        for (t, p), o in home.items():
            got = indices(primary, t, p, o, ends[(t, p)])
            again[(t, p)] = len([i for i in got if i in before.get((t, p), set())])
            read.setdefault((t, p), []).extend(got)
        report = json.loads((run / "report.json").read_text())

    expected = {("orders", p): PRODUCED + RPO for p in range(PARTS)} | {("backup.orders", p): LOCAL
                                                                       for p in range(PARTS)}
    dup = {}
    for tp, n in expected.items():
        assert set(read[tp]) == set(range(n)), (tp, sorted(set(range(n)) - set(read[tp])))  # nothing lost
        dup[tp] = len(read[tp]) - n
    print("duplicates over the three phases:", dup, "re-read by the failback:", again,
          "rules:", {k: v["rule"] for k, v in plan.items()})
    assert report["outcome"] == "succeeded", report.get("outcome")
    for p in range(PARTS):  # the records MM2 never copied before the outage, per partition, in the report
        assert any(f"orders[{p}] holds {RPO} record(s) (offsets {PRODUCED}-{PRODUCED + RPO - 1}) that MM2 never copied"
                   in w for w in report["warnings"]), report["warnings"]
    # where the offset syncs prove the position, going home re-reads nothing
    for p in range(PARTS):
        if plan[("orders", p)]["rule"] != "home_sync_floor":
            assert again[("orders", p)] == 0, (p, plan[("orders", p)], again)
