"""The Kafka adapter's bounded reads on a real broker (issue 50): ``Cluster.read_ranges``, what the evidence stage
(E1-E7) reads, with Kafka's own semantics rather than the in-memory cluster's (testbed/memlog.py) - transaction
markers and aborted records are offsets without a record (``read_committed``), an open transaction stops a read at
the last stable offset (never "complete" short of the range), a start below the log start is said (never a jump to
the end), overlapping ranges are read once and each answered whole, a range over the budget is not read, and a
compacted partition's cleaned offsets are offsets without records too."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from mm2_failover.rules import evidence as ev

pytestmark = [pytest.mark.bed]


def _txn_producer(bed, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": bed.source_bootstrap, "transactional.id": tid, "log_level": 3})
    p.init_transactions(30)
    return p


def _txn(p: Producer, topic: str, values: list[str], commit: bool) -> None:
    p.begin_transaction()
    for v in values:
        p.produce(topic, key=b"k", value=v.encode(), timestamp=1_700_000_000_000)
    p.flush(30)  # before an abort too: the aborted records reach the log
    (p.commit_transaction if commit else p.abort_transaction)(30)


def _end_reaches(source, tp, end: int, timeout: float = 30.0) -> int:
    """The partition's end offset once it is ``end`` or more: the coordinator writes a transaction's markers after
    commit/abort returns."""
    import time

    deadline = time.monotonic() + timeout
    while (now := source.offsets([tp])[tp]) < end and time.monotonic() < deadline:
        time.sleep(0.2)
    return now


def _values(read: ev.Read, contents: dict) -> list[tuple[int, str]]:
    return [(r.offset, contents[r.content]) for r in read.records]


def test_markers_and_aborted_records_are_offsets_without_records_and_an_open_transaction_is_not_read_whole(
    bed, source, names
):
    topic = names["topic"]
    source.create_topic(topic, 1)
    tp = (topic, 0)
    p = _txn_producer(bed, f"{topic}-tx")
    _txn(p, topic, ["a", "b", "c"], commit=True)  # 0-2, marker 3
    _txn(p, topic, ["x", "y"], commit=False)  # aborted 4-5, marker 6
    _txn(p, topic, ["d", "e"], commit=True)  # 7-8, marker 9
    contents = {ev.content_of(b"k", v.encode(), 1_700_000_000_000): v for v in "abcdexy"}
    assert _end_reaches(source, tp, 10) == 10
    got = source.read_ranges({tp: {(0, 10), (2, 8), (12, 14)}}, budget=100)
    whole = got[(tp, 0, 10)]
    assert whole.complete and _values(whole, contents) == [(0, "a"), (1, "b"), (2, "c"), (7, "d"), (8, "e")]
    part = got[(tp, 2, 8)]  # overlapping: read once, answered for its own range
    assert part.complete and _values(part, contents) == [(2, "c"), (7, "d")]
    assert not got[(tp, 12, 14)].complete  # past the log end: the partition's readable end falls short

    # an open transaction: the log end moves on, the last stable offset does not - never "complete" to the end
    p.begin_transaction()
    p.produce(topic, key=b"k", value=b"open", timestamp=1_700_000_000_000)
    p.flush(30)
    end = _end_reaches(source, tp, 11)
    assert end == 11
    open_read = source.read_ranges({tp: {(0, end)}}, budget=100, timeout=20)[(tp, 0, end)]
    assert open_read.status == ev.FAILED and "open transaction" in open_read.why, open_read
    p.commit_transaction(30)
    _end_reaches(source, tp, end + 1)  # the commit marker: the last stable offset moves past the record
    done = source.read_ranges({tp: {(0, end)}}, budget=100)[(tp, 0, end)]
    assert done.complete and [r.offset for r in done.records] == [0, 1, 2, 7, 8, 10]


def test_a_read_below_the_log_start_says_so_and_a_range_over_the_budget_is_not_read(source, names):
    topic = names["topic"]
    source.create_topic(topic, 1)
    tp = (topic, 0)
    p = Producer({"bootstrap.servers": source.conf["bootstrap.servers"], "log_level": 3})
    for i in range(10):
        p.produce(topic, value=f"r{i}".encode())
    p.flush(30)
    source.delete_records({tp: 4})
    got = source.read_ranges({tp: {(2, 6), (0, 10)}}, budget=5)
    assert got[(tp, 2, 6)].status == ev.BELOW_START  # never jumps to the log end, never silently from 4
    assert got[(tp, 0, 10)].status == ev.OVER_BUDGET and not got[(tp, 0, 10)].records
    above = source.read_ranges({tp: {(5, 9)}}, budget=5)[(tp, 5, 9)]
    assert above.complete and [r.offset for r in above.records] == [5, 6, 7, 8]


def test_a_compacted_partitions_cleaned_offsets_are_offsets_without_records(bed, source, names):
    """Compaction is the other source of offsets without records: a read over the cleaned range is complete and
    gives each record that is left at its own offset (what the evidence stage counts on: never a record shifted
    down into a cleaned offset, never a read that stops short at the gap). The shared bed's log cleaner is woken
    every 200 ms for this test (a dynamic broker setting, restored after) instead of its 15 s default."""
    import time

    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    topic = names["topic"]
    source.create_topic(
        topic,
        1,
        {
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
        },
    )
    tp = (topic, 0)

    def backoff(op: AlterConfigOpType) -> None:  # the bed's one broker (node.id 1)
        entry = ConfigEntry("log.cleaner.backoff.ms", "200", incremental_operation=op)
        for f in source.admin.incremental_alter_configs(
            [ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[entry])]
        ).values():
            f.result(30)

    p = Producer({"bootstrap.servers": bed.source_bootstrap, "log_level": 3})
    for k, v in [("k1", "a"), ("k2", "b"), ("k1", "c"), ("k3", "d"), ("k2", "e")]:  # a at 0 and b at 1 superseded
        p.produce(topic, key=k.encode(), value=v.encode(), timestamp=1_700_000_000_000)
    p.flush(30)
    # a record timestamped past segment.ms (the broker rolls on the records' timestamps) rolls the segment: 0-4 can
    # be cleaned
    p.produce(topic, key=b"k9", value=b"z", timestamp=1_700_000_001_000)
    p.flush(30)
    contents = {
        ev.content_of(k.encode(), v.encode(), 1_700_000_000_000): v
        for k, v in [("k1", "a"), ("k2", "b"), ("k1", "c"), ("k3", "d"), ("k2", "e")]
    }
    contents[ev.content_of(b"k9", b"z", 1_700_000_001_000)] = "z"
    backoff(AlterConfigOpType.SET)
    try:
        deadline = time.monotonic() + 60
        while True:
            got = source.read_ranges({tp: {(0, 6), (1, 4)}}, budget=100)
            if [r.offset for r in got[(tp, 0, 6)].records][:1] != [0] or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        backoff(AlterConfigOpType.DELETE)
    whole, part = got[(tp, 0, 6)], got[(tp, 1, 4)]
    assert whole.complete and _values(whole, contents) == [(2, "c"), (3, "d"), (4, "e"), (5, "z")], whole
    assert part.complete and _values(part, contents) == [(2, "c"), (3, "d")], part  # 1 cleaned: nothing there
