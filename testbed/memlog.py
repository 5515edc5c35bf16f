"""A cluster in memory with Kafka's read semantics, as the evidence stage sees a cluster
(:class:`mm2_failover.rules.evidence.RecordSource`): for the property tests of the whole proof path.

Each partition is a list of entries by offset: a data record (its content), a transaction marker, an aborted record
or a record the log cleaner removed - the last three are offsets without a record for a ``read_committed`` reader.
The log starts at ``start`` (retention, DeleteRecords) and ends after the last entry. A read honours the same reset
setting the Kafka adapter gives librdkafka (:data:`mm2_failover.adapters.kafka.cluster.BOUNDED_READ_CONF`, read at
every call): ``auto.offset.reset=error`` makes a start below the log start an error; anything else reproduces
librdkafka's default, which moves the read to the log end and returns nothing. Ranges over the budget are not read;
``fail`` names ranges whose read fails (a broker error).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mm2_failover.rules import evidence as ev

DATA, MARKER, ABORTED, COMPACTED = "data", "marker", "aborted", "compacted"


@dataclass
class Partition:
    entries: list[tuple[str, object]] = field(default_factory=list)  # (kind, content) by offset
    start: int = 0

    @property
    def end(self) -> int:
        return len(self.entries)

    def append(self, kind: str, content: object = None) -> int:
        self.entries.append((kind, content))
        return len(self.entries) - 1


class MemoryLog:
    """A :class:`~mm2_failover.rules.evidence.RecordSource` over in-memory partitions."""

    def __init__(
        self,
        name: str,
        partitions: dict[tuple[str, int], Partition],
        fail: Callable[[tuple[str, int], int, int], bool] | None = None,
    ):
        self.name = name
        self.partitions = partitions
        self.fail = fail or (lambda tp, lo, hi: False)
        self.reads: list[tuple[tuple[str, int], int, int, str]] = []  # what was asked, for the tests

    def log_bounds(self, tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        return {tp: (self.partitions[tp].start, self.partitions[tp].end) for tp in tps}

    def _segment(self, tp, lo: int, hi: int) -> ev.Segment:
        """The partition's records in ``[lo, hi)``, read once for every range of one call inside it."""
        part = self.partitions[tp]
        return ev.Segment(
            tuple(ev.Rec(o, part.entries[o][1]) for o in range(lo, min(hi, part.end)) if part.entries[o][0] == DATA)
        )

    def read_ranges(self, ranges: ev.Ranges, budget: int) -> dict:
        from mm2_failover.adapters.kafka import cluster

        reset_error = cluster.BOUNDED_READ_CONF.get("auto.offset.reset") == "error"
        out = {}
        for tp, rs in ranges.items():
            part = self.partitions[tp]
            seg = None
            span = (min((lo for lo, _ in rs), default=0), max((hi for _, hi in rs), default=0))
            for lo, hi in rs:
                if hi <= lo:
                    read = ev.Read(lo, hi, ev.COMPLETE)
                elif hi - lo > budget:
                    read = ev.Read(lo, hi, ev.OVER_BUDGET)
                elif lo < part.start:
                    # librdkafka's default reset jumps to the log end: an empty read that "reached the end"
                    read = ev.Read(lo, hi, ev.BELOW_START) if reset_error else ev.Read(lo, hi, ev.COMPLETE)
                elif self.fail(tp, lo, hi):
                    read = ev.Read(lo, hi, ev.FAILED, why="broker error")
                else:  # a view of one read of the partition, as the Kafka adapter's (evidence.Segment)
                    seg = seg or self._segment(tp, max(span[0], part.start), span[1])
                    read = ev.Read.within(seg, lo, hi)
                self.reads.append((tp, lo, hi, read.status))
                out[(tp, lo, hi)] = read
        return out
