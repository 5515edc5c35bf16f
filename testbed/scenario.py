"""The failover scenario on the local bed, shared by ``make demo`` and the end-to-end tests.

Produce numbered records to a source topic, let a real consumer group consume and commit part of them on
the source, stop it, and wait until MirrorMaker 2 has replicated the records and checkpointed the group.
Afterwards :func:`first_records_on_target` consumes from the target in the same group, so the caller can
compare what the group would read next on each side (re-read, lost).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass

from mm2_failover.adapters.kafka.cluster import CONSUME_WAIT_S, Cluster
from mm2_failover.adapters.kafka.kafka_errors import KafkaUnavailable
from mm2_failover.adapters.runfolder import CHECKPOINTS_SUMMARY, RunFolder
from mm2_failover.rules import checkpoints as cpf
from mm2_failover.rules.naming import checkpoints_topic
from mm2_failover.rules.values import TP

log = logging.getLogger(__name__)


def payload(topic: str, partition: int, index: int) -> bytes:
    return f"{topic}|{partition}|{index:08d}".encode()


def index_of(value: bytes) -> int:
    return int(value.decode().rsplit("|", 1)[1])


def produce(
    bootstrap: str,
    topic: str,
    partitions: int,
    per_partition: int,
    start: int = 0,
    batches: int = 1,
    pause_s: float = 0.0,
    conf: dict | None = None,
) -> None:
    """Produce ``per_partition`` numbered records to every partition, in ``batches`` bursts."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", **(conf or {})})
    per_batch = max(1, per_partition // batches)
    i = start
    end = start + per_partition
    while i < end:
        upto = min(end, i + per_batch)
        for idx in range(i, upto):
            for part in range(partitions):
                p.produce(topic, value=payload(topic, part, idx), partition=part)
            p.poll(0)
        p.flush(30)
        i = upto
        if pause_s and i < end:
            time.sleep(pause_s)
    if p.flush(30):
        raise RuntimeError(f"could not deliver all records to {topic} at {bootstrap}")


def consume_and_commit(
    bootstrap: str, group: str, topic: str, upto: dict[int, int], timeout: float = 60.0
) -> dict[int, int]:
    """Run a real subscribed consumer in ``group`` until it has consumed records ``[0, upto[p])`` of every
    partition, commit exactly those positions, and leave the group. Returns the payload index of the last
    record consumed per partition."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 3,
        }
    )
    last: dict[int, int] = {}
    pos: dict[int, int] = {p: 0 for p in upto}
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while any(pos[p] < upto[p] for p in upto):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{group} consumed {pos}, wanted {upto}")
            for m in c.consume(500, CONSUME_WAIT_S):  # (cluster.py: consume returns at n messages or the wait)
                if m.error():
                    continue
                p = m.partition()
                if m.offset() < upto.get(p, 0):
                    last[p] = index_of(m.value())
                    pos[p] = max(pos[p], m.offset() + 1)
            done = [TopicPartition(topic, p) for p in upto if pos[p] >= upto[p]]
            if done:
                c.pause(done)
        c.commit(offsets=[TopicPartition(topic, p, upto[p]) for p in upto], asynchronous=False)
    finally:
        c.close()
    return last


def read_checkpoints(
    target: Cluster, checkpoints_topic: str, times: dict | None = None
) -> dict[cpf.CheckpointKey, cpf.Checkpoint]:
    """Latest checkpoint per key, read with the Python decoder (small topics: tests, the demo's waits).
    Records that are not checkpoints are skipped here (the pipeline's Spark job quarantines them). ``times``, when
    given, gets each latest checkpoint's record timestamp (ms), as the Spark job keeps it."""
    parts = target.partitions([checkpoints_topic])
    latest: dict[cpf.CheckpointKey, cpf.Checkpoint] = {}
    for _t, _p, _o, key, value, ts in target.read(target.offsets(parts)):
        try:
            rec = cpf.decode(key, value)
        except cpf.MalformedCheckpoint:
            continue
        if isinstance(rec, cpf.Checkpoint):
            latest[rec.key] = rec
            if times is not None:
                times[rec.key] = ts
        else:
            latest.pop(rec, None)
    return latest


@dataclass
class Prepared:
    group: str
    topic: str
    replica_topic: str
    partitions: int
    produced: int
    consumed_upto: dict[int, int]  # the group's committed offset per source partition
    last_consumed: dict[int, int]  # payload index of the last record consumed per partition
    checkpoints: dict[int, cpf.Checkpoint]


@contextlib.contextmanager
def producing(bootstrap: str, topic: str, start: int, until=lambda: False, most_s: float = 60.0, every_s: float = 0.3):
    """Inside the ``with`` block, a producer writes one numbered record to partition 0 of ``topic`` every
    ``every_s`` seconds (from index ``start``), until the block ends, ``until()`` is true or ``most_s`` passed."""
    stop = threading.Event()

    def run():
        i, deadline = start, time.monotonic() + most_s
        while time.monotonic() < deadline and not stop.is_set() and not until():
            produce(bootstrap, topic, 1, 1, start=i)
            i += 1
            time.sleep(every_s)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


def wait_for(cond, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def wait_replicated(source: Cluster, target: Cluster, topic: str, replica: str, timeout: float = 60.0) -> dict[TP, int]:
    def caught_up():
        try:
            src = source.offsets(source.partitions([topic]))
            dst = target.offsets(target.partitions([replica]))
        except (LookupError, KafkaUnavailable):  # not created yet, or just created (no leader yet)
            return None
        return src if all(dst.get((replica, p)) == o for (_, p), o in src.items()) else None

    return wait_for(caught_up, timeout, f"{replica} on the target to catch up with {topic}")


def wait_checkpointed(
    target: Cluster,
    checkpoints_topic: str,
    group: str,
    replica: str,
    partitions: int,
    timeout: float = 60.0,
    settle_s: float = 3.0,
) -> dict[int, cpf.Checkpoint]:
    """Wait until MM2 has written a checkpoint of ``group`` for every replica partition, and then until
    no new checkpoint for the group has arrived for ``settle_s`` (MM2 does not re-emit unchanged ones)."""
    return wait_checkpointed_groups(target, checkpoints_topic, {group: (replica, partitions)}, timeout, settle_s)[group]


def wait_checkpointed_groups(
    target: Cluster,
    checkpoints_topic: str,
    wanted: dict[str, tuple[str, int]],
    timeout: float = 60.0,
    settle_s: float = 3.0,
) -> dict[str, dict[int, cpf.Checkpoint]]:
    """``wait_checkpointed`` for several groups at once (group -> (replica topic, partitions)): one read of the
    checkpoints topic per poll and one settle window for all of them, not one per group."""

    def mine():
        cps = read_checkpoints(target, checkpoints_topic)
        out: dict[str, dict[int, cpf.Checkpoint]] = {g: {} for g in wanted}
        for k, v in cps.items():
            if k.group in wanted and k.topic == wanted[k.group][0]:
                out[k.group][k.partition] = v
        return out

    wait_for(
        lambda: all(len(m) == wanted[g][1] for g, m in mine().items()),
        timeout,
        f"checkpoints of {sorted(wanted)} for all partitions of {sorted({r for r, _ in wanted.values()})}",
    )
    last = mine()
    stable_since = time.monotonic()
    while time.monotonic() - stable_since < settle_s:
        time.sleep(0.5)
        now = mine()
        if now != last:
            last, stable_since = now, time.monotonic()
    return last


def prepare(
    source_bootstrap: str,
    target_bootstrap: str,
    source_alias: str = "primary",
    group: str = "orders-app",
    topic: str = "orders",
    partitions: int = 3,
    produced: int = 100,
    consumed_upto: dict[int, int] | None = None,
    batches: int = 5,
    pause_s: float = 0.3,
    replica: str | None = None,
    separator: str = ".",
) -> Prepared:
    """Create ``topic``, produce, consume part of it in ``group``, and wait for MM2 (replica + checkpoints).
    ``replica``: the replica topic's name when MM2 does not use the default policy."""
    source = Cluster({"bootstrap.servers": source_bootstrap}, "source")
    target = Cluster({"bootstrap.servers": target_bootstrap}, "target")
    replica = replica or f"{source_alias}{separator}{topic}"
    consumed_upto = consumed_upto or {p: min(produced, 40 + 7 * p) for p in range(partitions)}
    source.create_topic(topic, partitions)
    produce(source_bootstrap, topic, partitions, produced, batches=batches, pause_s=pause_s)
    last = consume_and_commit(source_bootstrap, group, topic, consumed_upto)
    wait_replicated(source, target, topic, replica)
    cps = wait_checkpointed(target, checkpoints_topic(source_alias, separator), group, replica, partitions)
    log.info(
        "scenario ready: %s consumed %s of %d records per partition; checkpoints %s",
        group,
        consumed_upto,
        produced,
        {p: (c.upstream_offset, c.downstream_offset) for p, c in sorted(cps.items())},
    )
    return Prepared(group, topic, replica, partitions, produced, consumed_upto, last, cps)


def first_records_on_target(
    target_bootstrap: str, group: str, replica: str, partitions: int, timeout: float = 60.0
) -> dict[int, int | None]:
    """Join ``group`` on the target and return the payload index of the first record received per partition
    (where the group resumes); None for a partition whose commit is already at the log end (nothing left to
    read). Does not commit."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": target_bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 3,
        }
    )
    first: dict[int, int | None] = {}
    try:
        committed = {
            tp.partition: tp.offset for tp in c.committed([TopicPartition(replica, p) for p in range(partitions)], 15)
        }
        for p in range(partitions):
            _low, high = c.get_watermark_offsets(TopicPartition(replica, p), 15)
            if committed.get(p, -1) >= high:
                first[p] = None
        c.subscribe([replica])
        deadline = time.monotonic() + timeout
        while len(first) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{group} on the target got first records only for {sorted(first)}")
            for m in c.consume(100, CONSUME_WAIT_S):
                if not m.error() and m.partition() not in first:
                    first[m.partition()] = index_of(m.value())
    finally:
        c.close()
    return first


@dataclass(frozen=True)
class Outcome:
    """Where the group resumes on the target, compared with where it stopped on the source."""

    group: str
    partition: int
    source_committed: int  # the group's committed offset on the source (next record it would read)
    target_committed: int | None  # the group's committed offset on the target after failover
    checkpoint_downstream: int | None
    first_on_target: int | None  # payload index of the first record the group receives on the target (None: at the end)
    re_read: int  # records consumed on the source that the group receives again
    lost: int  # records never consumed on the source that the group skips on the target

    def as_dict(self) -> dict:
        return self.__dict__.copy()


def compare(prep: Prepared, target_committed: dict[TP, int], first: dict[int, int | None]) -> list[Outcome]:
    out = []
    for p in range(prep.partitions):
        nxt = prep.consumed_upto[p]  # payload index == source offset: one producer, no transactions
        f = first.get(p)
        cp = prep.checkpoints.get(p)
        if f is None and target_committed.get((prep.replica_topic, p)) is not None:
            f = target_committed[(prep.replica_topic, p)]  # at the log end: resumes with the next record produced
        out.append(
            Outcome(
                prep.group,
                p,
                nxt,
                target_committed.get((prep.replica_topic, p)),
                cp.downstream_offset if cp else None,
                f,
                max(0, nxt - f) if f is not None else 0,
                max(0, f - nxt) if f is not None else 0,
            )
        )
    return out


def render_outcomes(rows: list[Outcome]) -> str:
    """The outcome per partition, with what MM2's checkpoint alone would have given (its downstream offset, and the
    records the group would then have read again)."""
    head = (
        f"{'group':<14} {'partition':>9} {'source committed':>16} {'target committed':>16} {'re-read':>8} "
        f"{'lost':>5} {'MM2 checkpoint':>14} {'its re-read':>11}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        cp = r.checkpoint_downstream
        cp_reread = "" if cp is None else str(max(0, r.source_committed - cp))
        lines.append(
            f"{r.group:<14} {r.partition:>9} {r.source_committed:>16} {str(r.target_committed):>16} "
            f"{r.re_read:>8} {r.lost:>5} {str(cp):>14} {cp_reread:>11}"
        )
    return "\n".join(lines)


def write_latest(art: RunFolder, checkpoints, alias: str = "primary", times: dict | None = None) -> None:
    """The latest checkpoints (read from the real checkpoint topic with the Python decoder) in the Parquet form the
    Spark job writes. Step-level tests use this to skip a ~20 s Spark start; the end-to-end tests run Spark.
    ``times``: each checkpoint's record timestamp in ms by key (:func:`read_checkpoints`), written as the job's
    ``checkpoint_timestamp`` column (absent: the column is not written, as by an older job)."""
    from datetime import datetime, timezone

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {
            "source_alias": alias,
            "group": c.group,
            "topic": c.topic,
            "partition": c.partition,
            "upstream_offset": c.upstream_offset,
            "downstream_offset": c.downstream_offset,
            "metadata": c.metadata,
        }
        for c in checkpoints
    ]
    schema = [
        ("source_alias", pa.string()),
        ("group", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("upstream_offset", pa.int64()),
        ("downstream_offset", pa.int64()),
        ("metadata", pa.string()),
    ]
    if times is not None:
        schema.append(("checkpoint_timestamp", pa.timestamp("us", tz="UTC")))
        for r, c in zip(rows, checkpoints):
            ms = times.get(c.key)
            r["checkpoint_timestamp"] = None if ms is None else datetime.fromtimestamp(ms / 1000, timezone.utc)
    art.checkpoints.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema(schema)), str(art.checkpoints / "part-0.parquet"))
    # and the job's summary, written last (without it the answers count as a killed job's, never read)
    art.save(
        CHECKPOINTS_SUMMARY,
        {
            "output": str(art.checkpoints),
            "records_read": len(rows),
            "checkpoints": len(rows),
            "groups": len({(r["source_alias"], r["group"]) for r in rows}),
            "tombstones": 0,
            "quarantined": 0,
            "quarantined_by_reason": {},
            "regressions": 0,
        },
    )
