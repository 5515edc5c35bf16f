"""The failback drill (issue 19), on the bed: fail over in a disaster, consume and produce on the backup, recover the
primary, run MM2's ``backup->primary`` flow, fail back; then score every record across the three phases.

1. On primary: ``orders`` (``PARTS`` partitions) gets ``PRODUCED`` records per partition in bursts (MM2's offset
   syncs then lie far apart) and the group consumes part; MM2 copies them and checkpoints.
2. MM2 stops (the data centre is failing), the offset syncs are archived (the archive DAG's last run), ``RPO``
   more records per partition are written that MM2 never copies, and the primary is lost.
3. ``fail_over(bed)`` moves the group to backup in disaster mode.
4. On backup: the group reads on (one partition to the end), backup's own ``orders`` gets ``LOCAL`` records per
   partition, which the group partly consumes.
5. The primary recovers; MM2's ``backup->primary`` flow starts and copies backup's ``orders``.
6. ``fail_back(bed)`` moves the group home (source alias backup, the clusters swapped, home alias primary).
7. The group reads both topics on primary to the end.

Each phase's records are read back by offset from the group's committed positions (payload indices, see
:func:`testbed.scenario.payload`), so a loss or a duplicate is seen record by record. Used by
``tests/integration/test_failback.py`` (the CLI) and ``make demo-failback`` (the DAG)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mm2_failover.adapters.kafka.cluster import Cluster
from mm2_failover.adapters.runfolder import RunFolder
from testbed import scenario

PARTS = 2
PRODUCED = 200  # per partition, on primary before the outage (MM2 copies them)
RPO = 15  # per partition, written on primary after MM2 stopped: never copied to backup
LOCAL = 40  # per partition, written on backup's own ``orders`` during the outage
GROUP = "orders-app"
ON_PRIMARY = {0: 70, 1: 120}  # phase 1
ON_BACKUP = {0: 150, 1: PRODUCED}  # phase 2, on primary.orders (partition 1 to the end)
LOCAL_READ = {0: 25, 1: 10}  # phase 2, on backup's own orders


@dataclass
class Outcome:
    failover: Path  # the runs' folders
    failback: Path
    home: dict  # the group's commits on primary after the failback
    reverse_checkpoint_topics: set[str]  # what MM2's backup->primary flow checkpointed for the group
    lost: dict = field(default_factory=dict)  # (topic on primary, partition) -> records never read
    duplicates: dict = field(default_factory=dict)  # ... -> records read more than once over the three phases
    again: dict = field(default_factory=dict)  # ... -> records the failback made the group read a second time
    rules: dict = field(default_factory=dict)  # ... -> the plan's rule for the failback's offset

    @property
    def report(self) -> dict:
        return RunFolder(self.failback).load_report().as_dict()

    def table(self) -> str:
        lines = [
            f"{'topic on primary':<18} {'part':>4} {'rule':<24} {'lost':>5} {'read twice':>10} {'by the failback':>15}"
        ]
        for tp in sorted(self.lost):
            lines.append(
                f"{tp[0]:<18} {tp[1]:>4} {self.rules.get(tp, ''):<24} {self.lost[tp]:>5} "
                f"{self.duplicates[tp]:>10} {self.again[tp]:>15}"
            )
        return "\n".join(lines)


def indices(cluster: Cluster, topic: str, partition: int, start: int, end: int) -> list[int]:
    """Payload indices of the records at offsets [start, end) (what a consumer resuming at ``start`` reads)."""
    if end <= start:
        return []
    return [
        scenario.index_of(v)
        for _t, _p, _o, _k, v, _ts in cluster.read({(topic, partition): end}, start={(topic, partition): start})
    ]


def drill(
    bed, archive: Callable[[object], None], fail_over: Callable[[object], Path], fail_back: Callable[[object], Path]
) -> Outcome:
    primary = Cluster({"bootstrap.servers": bed.source_bootstrap}, "primary")
    backup = Cluster({"bootstrap.servers": bed.target_bootstrap}, "backup")
    scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        group=GROUP,
        topic="orders",
        partitions=PARTS,
        produced=PRODUCED,
        consumed_upto=ON_PRIMARY,
        batches=4,
        pause_s=0.3,
    )
    read = {("orders", p): indices(primary, "orders", p, 0, u) for p, u in ON_PRIMARY.items()}
    bed.stop_mm2()
    archive(bed)
    scenario.produce(bed.source_bootstrap, "orders", PARTS, RPO, start=PRODUCED)
    bed.stop_source()

    failover = fail_over(bed)
    moved = backup.committed(GROUP)
    scenario.consume_and_commit(bed.target_bootstrap, GROUP, "primary.orders", ON_BACKUP)
    for p, u in ON_BACKUP.items():
        read[("orders", p)] += indices(backup, "primary.orders", p, moved[("primary.orders", p)], u)
    backup.create_topic("orders", PARTS)
    scenario.produce(bed.target_bootstrap, "orders", PARTS, LOCAL)
    scenario.consume_and_commit(bed.target_bootstrap, GROUP, "orders", LOCAL_READ)
    read.update({("backup.orders", p): indices(backup, "orders", p, 0, u) for p, u in LOCAL_READ.items()})

    bed.restart_source()
    bed.start_reverse_mm2()
    scenario.wait_replicated(backup, primary, "orders", "backup.orders")
    scenario.wait_checkpointed(primary, "backup.checkpoints.internal", GROUP, "backup.orders", PARTS)
    cps = scenario.read_checkpoints(primary, "backup.checkpoints.internal")

    failback = fail_back(bed)
    home = primary.committed(GROUP)
    rows = RunFolder(failback).load_plan().plan.rows
    out = Outcome(
        failover,
        failback,
        home,
        {k.topic for k in cps if k.group == GROUP},
        rules={(r.topic, r.partition): r.rule for r in rows},
    )
    ends = primary.offsets(list(home))
    before = {tp: set(v) for tp, v in read.items()}
    for (t, p), o in home.items():
        got = indices(primary, t, p, o, ends[(t, p)])
        out.again[(t, p)] = len([i for i in got if i in before.get((t, p), set())])
        read.setdefault((t, p), []).extend(got)
    expected = {("orders", p): PRODUCED + RPO for p in range(PARTS)} | {
        ("backup.orders", p): LOCAL for p in range(PARTS)
    }
    for tp, n in expected.items():
        got = read.get(tp, [])
        out.lost[tp] = len(set(range(n)) - set(got))
        out.duplicates[tp] = len(got) - len(set(got))
        out.again.setdefault(tp, 0)
    return out
