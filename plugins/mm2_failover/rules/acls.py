"""The least-privilege Kafka ACLs of the pipeline's principal: one table, the one place that says what it needs.

Used by the error messages (the Kafka adapter, ``adapters/kafka/``, names the permission a refused call lacks, with
:func:`phrase`), by the secured bed of the tests (:func:`bindings` grants exactly these, and the test removes one at a
time), and by the reference page's table (docs/reference.md; a unit test keeps the two equal).

Kafka's rules this relies on: Read, Write, Delete and Alter on a resource imply Describe on it; AlterConfigs implies
DescribeConfigs. Metadata and ListGroups never fail for lack of a permission: they leave out the topics and groups
the principal cannot Describe - so a missing Describe looks like a missing topic or group (the messages say so).

Per source alias ``<a>`` (MM2's default replication policy shown; the identity policy names replicas like their
source topics), and ``<groups>`` the groups the run may move (a literal name each, or one prefixed pattern):

1. source: Read on each source topic - the drain check's end offsets, and exact translation compares the records
   around a group's position with their replicas;
2. source: Describe on each group - is it live, and its committed offsets (drain, exact translation, report);
3. source: Read on ``mm2-offset-syncs.<target>.internal`` - exact translation and the sync archive read MM2's syncs;
4. target: Read on ``<a>.checkpoints.internal`` - the Spark job (Kafka's Java consumer) and the end-offset capture;
5. target: DescribeConfigs on ``<a>.checkpoints.internal`` - the pre-flight audit of its retention;
6. target: Read on ``mm2-offsets.<a>.internal`` - MM2's own progress, for the drain check;
7. target: Read on each replica topic ``<a>.<topic>`` - committing offsets needs Read on the topic (and the exact
   translation reads replica records to check them);
8. target: Read on each group - committing its offsets (Read implies the Describe of the live check and backup);
9. target: Delete on each group - the rollback deletes a group before re-committing its prior offsets.

Nothing on the Cluster resource, no Write anywhere, no topic creation: the pipeline writes only consumer group
offsets. MM2 itself needs its own, wider ACLs (it creates and writes topics); they are not the pipeline's.

With the writer lock as a lease in the target (``MM2_FAILOVER_LOCK=kafka``: several hosts, :mod:`mm2_failover.
kafka_lock`) - and only then - the principal also needs, on the lease's topic ``<lock topic>``
(``MM2_FAILOVER_LOCK_TOPIC``, default ``mm2-failover.locks``; :data:`LEASE_NEEDS`):

10. target: Write - the lease's claim, renew and release records (an idempotent producer: Write is all Kafka asks);
11. target: Read - every writer replays the records to the same answer;
12. target: DescribeConfigs - the topic must stamp the broker's time (``LogAppendTime``), checked before any claim;
13. target: Create - the topic is created on first use (or an operator creates it with the settings in docs/reference.md, and
    this one is not needed);
14. target: Write on the TransactionalId prefix ``<lock topic>.`` - a lease's holder commits offsets through a
    transactional producer whose id is the lock topic, a dot and the target's cluster id
    (:mod:`mm2_failover.adapters.fenced`): the next holder takes the id over, which fences the previous one's writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from mm2_failover.rules.words import listed

RESOURCES = ("Topic", "Group", "Cluster", "TransactionalId")
OPERATIONS = ("Read", "Describe", "DescribeConfigs", "Delete", "Write", "Create")


@dataclass(frozen=True)
class Need:
    """One permission of the pipeline's principal: on ``cluster`` (source/target), ``operation`` on ``resource``
    ``name`` (a template: ``<a>`` the source alias, ``<target>`` the target alias, ``<topic>`` each source topic,
    ``<group>`` each group)."""

    rule: int
    cluster: str
    resource: str
    name: str
    operation: str
    why: str


NEEDS = (
    Need(
        1,
        "source",
        "Topic",
        "<topic>",
        "Read",
        "end offsets (drain check); exact translation compares records with their replicas",
    ),
    Need(
        2,
        "source",
        "Group",
        "<group>",
        "Describe",
        "live check and committed offsets on the source; the sync "
        "archive's reading of every group's commits (plan rule 1a)",
    ),
    Need(
        3,
        "source",
        "Topic",
        "mm2-offset-syncs.<target>.internal",
        "Read",
        "MM2's offset syncs: exact translation, the sync archive",
    ),
    Need(4, "target", "Topic", "<a>.checkpoints.internal", "Read", "MM2's checkpoints: the Spark job, end offsets"),
    Need(5, "target", "Topic", "<a>.checkpoints.internal", "DescribeConfigs", "pre-flight audit of its retention"),
    Need(6, "target", "Topic", "mm2-offsets.<a>.internal", "Read", "MM2's replication progress (drain check)"),
    Need(7, "target", "Topic", "<a>.<topic>", "Read", "committing offsets on the replica topics; checking records"),
    Need(8, "target", "Group", "<group>", "Read", "committing the groups' offsets (and describing them)"),
    Need(9, "target", "Group", "<group>", "Delete", "rollback: delete a group before re-committing its prior offsets"),
)


LOCK_TOPIC = "<lock topic>"
LEASE_NEEDS = (
    Need(
        10,
        "target",
        "Topic",
        LOCK_TOPIC,
        "Write",
        "the writer lock's lease ([mm2_failover] lock = kafka only): its claim, renew and release records",
    ),
    Need(11, "target", "Topic", LOCK_TOPIC, "Read", "the lease: every writer replays its records"),
    Need(12, "target", "Topic", LOCK_TOPIC, "DescribeConfigs", "the lease: its topic must stamp the broker's time"),
    Need(13, "target", "Topic", LOCK_TOPIC, "Create", "the lease: its topic created on first use (or by an operator)"),
    Need(
        14,
        "target",
        "TransactionalId",
        LOCK_TOPIC + ".",
        "Write",
        "the lease's holder commits through its transactional id (prefixed): the next holder fences it",
    ),
)


def phrase(operation: str, resource: str, names) -> str:
    """``Read on Group 'orders-app'``: what a refused call needed, for the error message."""
    if operation not in OPERATIONS or resource not in RESOURCES:
        raise ValueError(f"unknown permission {operation} on {resource}")
    names = [names] if isinstance(names, str) else sorted(set(names))
    shown = listed((repr(n) for n in names), limit=5)
    return f"{operation} on {resource} {shown}"


@dataclass(frozen=True)
class Binding:
    """One concrete ACL to grant: ``operation`` on ``resource`` ``name`` (literal, or every name starting with it
    when ``prefixed``) on ``cluster``."""

    cluster: str
    resource: str
    name: str
    operation: str
    prefixed: bool = False
    rule: int = 0

    def __str__(self) -> str:
        pattern = "prefixed" if self.prefixed else "literal"
        return f"{self.cluster}: {self.operation} on {self.resource} {self.name!r} ({pattern})"


def bindings(
    policy,
    target_alias: str,
    topics: list[str],
    groups: list[str],
    group_prefix: str | None = None,
    lock_topic: str | None = None,
    mm2_offsets_topic: str = "",
) -> list[Binding]:
    """The ACLs of :data:`NEEDS` for concrete names: ``policy`` the flow's :class:`~mm2_failover.rules.naming.
    ReplicationPolicy` (it names the replica and MM2 topics), ``topics`` the source topics, ``groups`` the groups
    (or every group starting with ``group_prefix``); with ``lock_topic`` (the lease as the writer lock), those of
    :data:`LEASE_NEEDS` on it too; ``mm2_offsets_topic``: the run parameter of that name (where MM2 keeps its
    progress when not in ``mm2-offsets.<alias>.internal``)."""
    names = {
        "<topic>": [(t, False) for t in topics],
        "<group>": [(group_prefix, True)] if group_prefix else [(g, False) for g in groups],
        "mm2-offset-syncs.<target>.internal": [(policy.offset_syncs_topic(target_alias), False)],
        "<a>.checkpoints.internal": [(policy.checkpoints_topic, False)],
        "mm2-offsets.<a>.internal": [(mm2_offsets_topic or policy.mm2_offsets_topic, False)],
        "<a>.<topic>": [(policy.replica_topic(t), False) for t in topics],
        LOCK_TOPIC: [(lock_topic, False)] if lock_topic else [],
        LOCK_TOPIC + ".": [(lock_topic + ".", True)] if lock_topic else [],
    }
    return [
        Binding(n.cluster, n.resource, name, n.operation, prefixed, n.rule)
        for n in (*NEEDS, *(LEASE_NEEDS if lock_topic else ()))
        for name, prefixed in names[n.name]
    ]
