"""The evidence stage of exact translation (pure): which records must be read to prove where a group resumes, read
through a :class:`RecordSource` with Kafka's semantics, and what the reads prove.

:mod:`mm2_failover.rules.translate` places a group's position on the replica from MM2's offset syncs (rules 1-4) and says
what would prove it (rules 5-7); this module reads that evidence and hands :func:`mm2_failover.rules.translate.decide`
only what was read. A precise answer that can lose a record is worse than MM2's imprecise checkpoint, so:

E1. **What was not read is not evidence.** A read answers for the whole range it was asked for (``complete``), or
    says why not: below the log start (Kafka's out-of-range: the reader never jumps silently to the log end), over
    the read budget, or failed. An incomplete read proves nothing, and nothing is derived from it - not even
    "there is nothing there".
E2. **A position below the source's log start** has no next record to read: the records ``[U, log start)`` are gone
    from the source (they may still be on the replica). Only target-side proofs answer for it - an exact sync, a
    bracket or drained tail proven one to one on the target (E4), the later copy of a superseded sync's record
    (E7), the first copy of a sync or bracket a later history may have copied again (E7) -, else MM2's checkpoint;
    the gap is reported.
E3. **The next record** (the first record at or after ``U`` the group would read on the source, ``read_committed``)
    is read from ``U`` for at most ``scan`` offsets, per position (never from the lowest position of the partition:
    one group far behind must not change what the others read). None found and the read reached the source's end:
    nothing is left to read; none found short of the end: unknown.
E4. **One to one on the target** (translate rule 6, the source lost or below its log start): the span ``[d1, d2]``
    holds ``d2 - d1 + 1`` records - contiguous: no transaction marker, no aborted offset a ``read_committed`` reader
    skips - and no record twice. Counting duplicates alone is not enough: a source marker before ``U`` and a target
    marker after its copy (MM2 with exactly-once support) cancel out in the arithmetic.
E5. **Verified** (translate rule 5): the target's record at the translated offset is the next record, and is its
    only copy in the span read: an earlier copy of the same content (a producer retry's twin) means the arithmetic
    may point at a twin, and so does a later one (the arithmetic one too early, on the copy of an earlier twin:
    markers placed differently on the two sides cancel out) - the lookup (E6) decides instead.
E6. **The lookup** (translate rule 7): the candidates are the copies of the next record (same content) in the search
    range. The first is always safe: every copy of a later source record in the range follows a copy of this one
    (MM2 copies in order, and restarts at or before where it stopped), so a twin found first is an earlier record -
    a re-read, never a loss. A later candidate is taken only when the target from it up to the range's upper anchor
    (its sync, or the drained ends) holds the source's records from the next record up to the anchor's, record for
    record: then a group starting there reads exactly what it would have read on the source. The last such wins.
    Replication not known to be finished, the range ends at the earlier history's sync: a copy found there that a
    later history copied again, or may have, is the first copy (``first_copy``, :func:`first_copy_only`).
E7. **A superseded sync** (translate rule 1, copied again by a later MM2 history): the first copy still answers when
    nothing better is proven - the first copy of a record is safe: every history that copied anything after it
    copied it first -, but under its own rule (``superseded_sync``) and with the re-reads it causes counted from
    below (``position_at_least``: the highest downstream offset of the syncs at or below ``U``, where the group's next
    record really is at or after - also said of every position left to MM2's checkpoint) when replication finished;
    on a drained partition (the source up, ``U`` below its log start) the later copy is looked up by the content of
    the first one (the sync proves it is the record at ``U``), the first candidate only (E6: no source record to
    anchor a later one). With the source lost neither is proven: MM2 may have died while re-copying, before the later
    history re-reached where the earlier one had got, and records past that then have their only copies before the
    later copy of ``U`` - MM2's own checkpoint skips them as well (the property test holds lost sources to that bar:
    never lose a record MM2's checkpoint keeps). The same holds for an earlier history's exact sync, gap-free bracket
    or tail where the later copy is not searched (the source lost, or replication not known to be finished), also
    where the later history may have copied the record again (its sync at the next sync's upstream offset, its start
    not archived: ``reached_again``): the answer is that history's first copy, ``superseded_sync``, never called exact
    (:func:`first_copy_only`; the truth harness found a bracket said "re-read 0"). On a drained partition with
    ``U`` below the source's log start, such a sync or bracket (``Unproven.first_copy``) answers the same where no
    lookup can be made: the first copy, ``superseded_sync`` - a bracket only where proven one to one on the target
    (E4: a bracket whose upper sync is a later history's spans a restart, its arithmetic off; taken unproven, it
    lost a record at the property's seed 547451) -, never a later copy looked up by content (that history may have
    started past ``U``: the content there can be a later twin's).
E8. **The source lost, nothing proven**: translate rule 10, the archive floor - MM2's own rule over every archived
    sync, in a history that got as far as every earlier one (:meth:`~mm2_failover.rules.translate.SyncIndex.history_floor`).
    Where MM2's checkpoint is at least as far, the floor's history was not cut short and the checkpoint lies within
    the archived syncs, the checkpoint answers (:func:`resume_at`); syncs at or past the replica's end are no
    history of it.
E9. **A restart no sync shows where it began.** MM2 keeps one pending sync per partition and replaces it before
    writing it, so a restart's first sync can be missing: its copies of records at or before the group's next one
    then lie past the earlier history's range, and an exact answer there would re-read them, said 0. Only the
    records tell whether a restart lies between two syncs written one after the other, so every such pair above an
    exact answer that could hold one is read (:meth:`~mm2_failover.rules.translate.SyncIndex.restarts_above`: upstream
    offsets going back, or the pair close enough above any answer the bracket allows; replication finished, the ends
    stand for a last sync), from the lowest answer up to the pair's upper sync; an answer E9 moves up to a restart's
    copy has the pairs close to it read in turn (:data:`E9_ROUNDS`). No copy of the next record between the two past the
    answer: it stands; a copy whose run up to the upper sync is the source's, record for record, answers (E6's
    anchor); copies none of which is so proven where the answer's own run is (twins): it stands; else, or a range
    not read whole, the answer is its first copy (``first_copy``: :func:`later_copy`). With no next record (the
    source lost, or the position below its log start) the answer's record's content is looked for, and a copy found
    makes it the first copy. A restart with no sync written since and no drained ends is seen by nothing; a source
    compacted between two histories, or a restart below an earlier one's start, can break the pairs' bound: the
    known limits (docs/architecture.md).

E10. **One proof per question** (:func:`question`): what is read and decided for a position depends on the position
    and its partition only (its source, replica, sync index, drained ends and replica start), never on whose it is:
    groups at the same position of the same partition (caught-up groups at a drained end, most of all) are proven
    once, and each gets that outcome.

Failing back (:func:`prove_back`) reads the other way: a bracket or the tail of rules 8-9 counts only where the
replica's span was read whole and is one to one (E4), and for the tail where the replica's last record is the
origin's record the arithmetic names; else the sync floor.

Content equality is the pipeline's one definition of "the same record": key, value, timestamp and headers, as MM2
copies them (:func:`content_of`). The Kafka-backed :class:`RecordSource`
(``adapters.kafka.cluster.Cluster.read_ranges``) keeps a 128-bit digest of them per record, so that the span of a
200k-record bracket costs a few MB.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import struct
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from mm2_failover.rules import translate as tr
from mm2_failover.rules.values import TP

COMPLETE = "complete"
BELOW_START = "below_log_start"
OVER_BUDGET = "over_budget"
FAILED = "failed"

DEFAULT_BUDGET = 200_000  # records one range may span to be read at all (E1: a larger one is not evidence)
DEFAULT_SCAN = 1_000  # offsets read after a position for its next record (E3)
E9_ROUNDS = 8  # E9: how many times an answer moved up to a restart's copy has the pairs above it read in turn


# ------------------------------------------------------------------------------------------ records and reads


def content_of(key: bytes | None, value: bytes | None, timestamp_ms: int, headers: Iterable = ()) -> bytes:
    """The one definition of "the same record" (as MM2 copies it: key, value, timestamp, headers; not the offset), as
    a 128-bit digest. Length-prefixed, so that no two different records encode alike."""
    h = hashlib.blake2b(digest_size=16)

    def put(b: bytes | None) -> None:
        h.update(b"\xff\xff\xff\xff" if b is None else struct.pack(">I", len(b)) + b)

    put(key)
    put(value)
    h.update(struct.pack(">q", int(timestamp_ms)))
    for hk, hv in headers or ():
        put(hk.encode() if isinstance(hk, str) else hk)
        put(hv.encode() if isinstance(hv, str) else hv)
    return h.digest()


@dataclass(frozen=True)
class Record:
    """A record as the pipeline reads it (with headers)."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple = ()

    @property
    def content(self) -> bytes:
        return content_of(self.key, self.value, self.timestamp_ms, self.headers)

    def same_content(self, other: "Record | None") -> bool:
        """The same record as MM2 copies it (see :func:`content_of`)."""
        return other is not None and self.content == other.content


class Rec(NamedTuple):
    """What the evidence stage keeps of a record: its offset and its content (anything hashable that is equal exactly
    for the same record)."""

    offset: int
    content: Hashable


class Segment:
    """The records of one read of a partition, indexed once (their offsets, and where each content is) for every
    range asked inside it: at 10k groups at positions of their own, each range with its own copies and indexes held
    11.3 GB in ``build_plan`` (the RTO bench, ``--records 10000``)."""

    def __init__(self, records: tuple[Rec, ...]):
        self.records = records
        self.offsets = [r.offset for r in records]

    @functools.cached_property
    def by_content(self) -> dict[Hashable, list[int]]:
        out: dict[Hashable, list[int]] = defaultdict(list)
        for r in self.records:
            out[r.content].append(r.offset)
        return out

    def bounds(self, lo: int, hi: int) -> tuple[int, int]:
        """The indexes of the records at offsets ``lo..hi`` (both included)."""
        return bisect.bisect_left(self.offsets, lo), bisect.bisect_right(self.offsets, hi)

    def view(self, lo: int, hi: int) -> "RecordView":
        """The records of ``[lo, hi)``, without a copy."""
        return RecordView(self, *self.bounds(lo, hi - 1))


class RecordView(Sequence):
    """Records ``i..j-1`` of a :class:`Segment`: a read's records, shared with the other reads of the segment."""

    __slots__ = ("segment", "i", "j")

    def __init__(self, segment: Segment, i: int, j: int):
        self.segment, self.i, self.j = segment, i, max(i, j)

    def __len__(self) -> int:
        return self.j - self.i

    def __getitem__(self, k):
        if isinstance(k, slice):
            return tuple(self)[k]
        n = len(self)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError(k)
        return self.segment.records[self.i + k]

    def __iter__(self):
        recs = self.segment.records
        return (recs[k] for k in range(self.i, self.j))

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"RecordView({tuple(self)!r})"


@dataclass(frozen=True)
class Read:
    """What a bounded read of ``[lo, hi)`` returned: every record in it (``complete``), or why not. ``segment``: the
    read of the partition it lies in (its records a view of it), whose indexes it shares."""

    lo: int
    hi: int
    status: str
    records: Sequence[Rec] = ()
    why: str = ""
    segment: Segment | None = field(default=None, compare=False, repr=False)

    @classmethod
    def within(cls, segment: Segment, lo: int, hi: int) -> "Read":
        """The complete read of ``[lo, hi)`` out of ``segment`` (a read of the partition covering it)."""
        return cls(lo, hi, COMPLETE, segment.view(lo, hi), segment=segment)

    @property
    def complete(self) -> bool:
        return self.status == COMPLETE

    @functools.cached_property
    def _own(self) -> Segment:
        """This read's own segment when it has none (its records indexed once)."""
        return Segment(tuple(self.records))

    @property
    def _segment(self) -> Segment:
        return self.segment if self.segment is not None else self._own

    def _clamped(self, lo: int, hi: int) -> tuple[int, int]:
        """``lo..hi`` (both included) within this read's ``[lo, hi)``."""
        return max(lo, self.lo), min(hi, self.hi - 1)

    def span(self, lo: int, hi: int) -> list[Rec]:
        """The records at offsets ``lo..hi`` (both included)."""
        seg = self._segment
        i, j = seg.bounds(*self._clamped(lo, hi))
        return list(seg.records[i:j])

    def copies(self, lo: int, hi: int, content: Hashable) -> list[int]:
        """The offsets in ``lo..hi`` holding a record of this content (indexed once per segment: many groups look up
        their next record in the same bracket)."""
        lo, hi = self._clamped(lo, hi)
        offs = self._segment.by_content.get(content, [])
        return offs[bisect.bisect_left(offs, lo) : bisect.bisect_right(offs, hi)]

    def at(self, offset: int) -> Rec | None:
        if not self.lo <= offset < self.hi:
            return None
        seg = self._segment
        i = bisect.bisect_left(seg.offsets, offset)
        return seg.records[i] if i < len(seg.records) and seg.records[i].offset == offset else None


Ranges = dict[TP, set[tuple[int, int]]]
Reads = Mapping[tuple[TP, int, int], Read]


class RecordSource(Protocol):
    """One cluster, as the evidence stage reads it (Kafka's semantics: ``read_committed``; transaction markers,
    aborted and compacted records are offsets without a record; a start below the log start is an error, never a
    jump; ranges over ``budget`` records are not read)."""

    name: str

    def log_bounds(self, tps: Iterable[TP]) -> dict[TP, tuple[int, int]]:
        """(log start, log end) of each partition."""
        ...

    def read_ranges(self, ranges: Ranges, budget: int) -> Reads:
        """Every asked range ``[lo, hi)`` of each partition, as a :class:`Read` keyed ``(tp, lo, hi)``."""
        ...


def want_range(ranges: Ranges, tp: TP, lo: int, hi: int) -> tuple[TP, int, int]:
    ranges.setdefault(tp, set()).add((lo, hi))
    return tp, lo, hi


# ------------------------------------------------------------------------------------------ the rules


def is_evidence(read: Read | None) -> bool:
    """E1: only a complete read is evidence."""
    return read is not None and read.complete


def below_log_start(position: int, log_start: int) -> bool:
    """E2: the group's position is no longer on the source."""
    return position < log_start


@dataclass(frozen=True)
class Next:
    """E3: what the source says about the record the group reads next."""

    known: bool  # the read answered (complete)
    record: Rec | None = None  # the first record at or after U (None: none read)
    nothing_after: bool = False  # no record at or after U up to the source's end (only when known)
    why: str = ""


def next_record(read: Read | None, position: int, log_end: int) -> Next:
    """E3: the next record from the read of ``[U, min(end, U + scan))``; nothing after U only when that read reached
    the source's end."""
    if not is_evidence(read):
        how = "not asked" if read is None else read.status + (f": {read.why}" if read.why else "")
        return Next(False, why=f"the source's next record was not read whole: {how}, after offset {position}")
    first = next((r for r in read.records if r.offset >= position), None)
    if first is not None:
        return Next(True, first)
    if read.hi >= log_end:
        return Next(True, None, nothing_after=True)
    return Next(False, why=f"no next record within the scan: none in {read.hi - position} offsets after {position}")


def one_to_one(read: Read | None, lo: int, hi: int) -> bool:
    """E4: the target's ``[lo, hi]`` was read whole, holds ``hi - lo + 1`` records (no gap) and no record twice."""
    if not is_evidence(read) or read.lo > lo or read.hi <= hi:
        return False
    span = read.span(lo, hi)
    return len(span) == hi - lo + 1 and len({r.content for r in span}) == len(span)


def candidates(read: Read, lo: int, hi: int, content: Hashable) -> list[int]:
    """The offsets in ``[lo, hi]`` holding a copy of ``content``."""
    return read.copies(lo, hi, content)


def first_copy_verified(read: Read | None, lo: int, at: int, content: Hashable) -> bool:
    """E5: the record at ``at`` is the first copy of ``content`` in ``[lo, at]`` (read whole)."""
    if not is_evidence(read) or read.lo > lo or read.hi <= at:
        return False
    return candidates(read, lo, at, content) == [at]


def verified_copy(read: Read | None, lo: int, top: int, at: int, content: Hashable) -> bool:
    """E5 whole: the record at ``at`` is the first copy of ``content`` in ``[lo, at]`` and its only copy in
    ``[lo, top]`` (another one, before or after, leaves the choice to the lookup, E6)."""
    return first_copy_verified(read, lo, at, content) and candidates(read, lo, top, content) == [at]


def anchored(target: Read | None, start: int, anchor_d: int, source: Read | None, position: int, anchor_u: int) -> bool:
    """E6's proof for a later candidate: the target's records ``[start, anchor_d]`` are the source's records
    ``[position, anchor_u]``, record for record (both read whole)."""
    if (
        not (is_evidence(target) and is_evidence(source))
        or target.hi <= anchor_d
        or source.hi <= anchor_u
        or source.lo > position
    ):
        return False
    got = [r.content for r in target.span(start, anchor_d)]
    want = [r.content for r in source.span(position, anchor_u)]
    return got == want


def choose_copy(cands: list[int], proven_later: list[int]) -> int | None:
    """E6: the last candidate proven by its anchored run, else the first (a re-read, never a loss)."""
    if not cands:
        return None
    return max(proven_later) if proven_later else cands[0]


def fell_back(cands: list[int], chosen: int | None, proven: list[int]) -> bool:
    """E6's outcome says when it is not exact: the first of several candidates taken unproven (no candidate's run
    anchored record for record) - safe, but where a later one is MM2's copy after a restart the group re-reads what
    lies between (issue 50 item 3: reported "re-read 0, exact" while the group re-read 43 records on a real bed)."""
    return chosen is not None and len(cands) > 1 and chosen not in proven


# ------------------------------------------------------------------------------------------ failing over


@dataclass(frozen=True)
class Want:
    """One group's position on one source partition, to be placed on its replica."""

    key: Hashable
    alias: str  # whose source (``sources[alias]``; None there: lost)
    source_tp: TP
    replica_tp: TP
    position: int  # U: the next source offset the group reads (its commit)
    index: tr.SyncIndex
    drained: tuple[int, int] | None = None  # (source end, replica end) once replication finished
    replica_start: int | None = None


@dataclass(frozen=True)
class Outcome:
    """What the evidence proves for one :class:`Want`."""

    answer: tuple[int, str] | None  # (replica offset, rule), or None: keep MM2's checkpoint
    evidence: tr.Evidence
    translated: int  # the source offset translated (the next record's, or U)
    source_log_start: int | None = None  # set when U is below it (E2): [U, it) is gone from the source
    position_at_least: int | None = None  # where the answer is not exact: the group's position is at or after this
    why: str = ""  # why nothing better than the answer (or the checkpoint) was proven
    replica_start: int | None = None  # the drained replica's log start: the floor below every offset sync
    cut_short: bool = False  # E8: the newest sync's MM2 history was cut short; an earlier history's floor answers
    archive_top: int | None = None  # E8: the highest downstream offset of the archived syncs the floor looked at


def resume_at(o: Outcome, checkpointed: bool, checkpoint_at: int | None = None) -> tuple[int, str] | None:
    """What the plan takes from an outcome as the group's proven offset (:class:`mm2_failover.rules.plan.Proven`): the
    answer; else, for a position MM2 wrote no checkpoint for, the sync floor of a drained partition (every record
    after the floor has a copy after it: loses nothing, re-reads what lies between); else None - MM2's checkpoint
    answers, checked by the plan against the group's source commit (plan rule 1b, which takes
    ``position_at_least`` where the checkpoint is ahead of the commit); below every sync, the replica's log start
    (:func:`replica_floor`). An archive floor (E8) not above MM2's checkpoint (``checkpoint_at``) gives way to it,
    unless the floor's history was cut short (the checkpoint is then in the history that was), or the checkpoint is
    past every archived sync (MM2 translated it from syncs the archive never saw - of a history that may have been
    cut short: not known, so the floor stands)."""
    if o.answer is not None:
        if (
            o.answer[1] == tr.ARCHIVE_FLOOR
            and checkpoint_at is not None
            and checkpoint_at >= o.answer[0]
            and not o.cut_short
            and (o.archive_top is None or checkpoint_at <= o.archive_top + 1)
        ):
            return None
        return o.answer
    if checkpointed:
        return None
    if o.position_at_least is not None:
        return o.position_at_least, tr.SYNC_FLOOR
    floor = replica_floor(o)
    return None if floor is None else (floor, tr.REPLICA_START)


def replica_floor(o: Outcome) -> int | None:
    """A drained position below every offset sync (MM2 never checkpoints it: no sync to translate from - a group
    behind the source's retention, typically) and not proven: the replica's log start. Nothing left anywhere is
    before it, so it loses nothing; left without a commit, the group's consumer would fall to ``auto.offset.reset``
    (``latest``, Kafka's default, skips every replicated record). Issue 50 item 6."""
    return o.replica_start


@dataclass
class _Case:
    want: Want
    next: Next = field(default_factory=lambda: Next(False))
    source_start: int | None = None
    translation: tr.Translation | tr.Unproven | None = None
    target_read: tuple | None = None  # key into the target reads
    lost: bool = False  # the source of the position is lost (E8)
    replica_end: int | None = None  # the replica partition's end offset, as read for the evidence (E8)
    first_copy_read: tuple | None = None  # E7: the superseded sync's record on the target
    anchor_reads: dict = field(default_factory=dict)  # later candidate -> (target read, source read, anchor's d)
    restart_reads: list = field(default_factory=list)  # E9: (p, b, target read of [lowest answer, b.d]) per pair
    moved_to: int | None = None  # E9 moved the answer here (a restart's copy): the pairs above it are read next
    restart_anchors: dict = field(default_factory=dict)  # E9: b -> the source's read [next record, b.upstream]
    answer_read: tuple | None = None  # E9, no next record read: the record whose content the answer copies


def prove(
    wants: Iterable[Want],
    sources: Mapping[str, RecordSource | None],
    target: RecordSource,
    budget: int = DEFAULT_BUDGET,
    scan: int = DEFAULT_SCAN,
) -> dict[Hashable, Outcome]:
    """Read what proves (or refutes) each position's translation and decide (E1-E10, translate rules 1-7, 10)."""
    first: dict[tuple, _Case] = {}
    asked: list[tuple[Hashable, _Case]] = []  # E10: each want's key and the case proving its question, in order
    for w in wants:
        q = question(w)
        if q not in first:
            first[q] = _Case(w, lost=sources.get(w.alias) is None)
        asked.append((w.key, first[q]))
    if not asked:
        return {}
    by_case = _prove_cases(list(first.values()), sources, target, budget, scan)
    return {k: by_case[id(c)] for k, c in asked}


def question(w: Want) -> tuple:
    """E10: everything a want's outcome depends on (its key is only whose it is)."""
    return (w.alias, w.source_tp, w.replica_tp, w.position, id(w.index), w.drained, w.replica_start)


def _prove_cases(
    cases: list[_Case], sources: Mapping[str, RecordSource | None], target: RecordSource, budget: int, scan: int
) -> dict[int, Outcome]:
    """The outcome of each case (key: ``id`` of the case)."""
    _read_next_records(cases, sources, budget, scan)
    for c in cases:
        w = c.want
        v = c.next.record.offset if c.next.record is not None else w.position
        # translate the next record the group reads: past markers, aborted and compacted records it is the same
        # position, and the record whose copy the rules place (and the lookup looks for)
        c.translation = w.index.translate(v, w.drained, w.replica_start)
    t_bounds = target.log_bounds({c.want.replica_tp for c in cases})
    for c in cases:
        c.replica_end = t_bounds.get(c.want.replica_tp, (None, None))[1]
    ranges: Ranges = {}
    for c in cases:
        _plan_target_reads(c, ranges, t_bounds)
    t_reads = target.read_ranges(ranges, budget) if ranges else {}
    # E6: later candidates need the source's records up to the range's anchor
    s_ranges: dict[str, Ranges] = defaultdict(dict)
    for c in cases:
        _plan_anchor_reads(c, t_reads, s_ranges, sources)
    s_reads = {a: sources[a].read_ranges(r, budget) for a, r in s_ranges.items() if r}
    out = {id(c): _decide(c, t_reads, s_reads.get(c.want.alias, {})) for c in cases}
    for _round in range(E9_ROUNDS):  # E9 moved an answer up to a restart's copy: the pairs above it, in turn
        ranges, again = {}, []
        for c in cases:
            moved, c.moved_to = c.moved_to, None
            if moved is not None and _plan_restart_reads(c, ranges, t_bounds, moved):
                again.append(c)
        if not again:
            break
        t_reads = {**t_reads, **target.read_ranges(ranges, budget)}
        s_ranges = defaultdict(dict)
        for c in again:
            _plan_anchor_reads(c, t_reads, s_ranges, sources)
        for a, r in s_ranges.items():
            if r:
                s_reads[a] = {**s_reads.get(a, {}), **sources[a].read_ranges(r, budget)}
        for c in again:
            out[id(c)] = _decide(c, t_reads, s_reads.get(c.want.alias, {}))
    return out


def _read_next_records(cases: list[_Case], sources: Mapping[str, RecordSource | None], budget: int, scan: int) -> None:
    by_alias: dict[str, list[_Case]] = defaultdict(list)
    for c in cases:
        if sources.get(c.want.alias) is not None:
            by_alias[c.want.alias].append(c)
        else:
            c.next = Next(False, why="the source is lost: target-side proofs only")
    for alias, cs in by_alias.items():
        src = sources[alias]
        bounds = src.log_bounds({c.want.source_tp for c in cs})
        ranges: Ranges = {}
        keys = {}
        for c in cs:
            start, end = bounds[c.want.source_tp]
            u = c.want.position
            if below_log_start(u, start):
                c.source_start = start
                c.next = Next(
                    False,
                    why=f"below the source's log start: the group's position {u}, the log start "
                    f"{start} ({start - u} record offset(s) it had not read are gone from the "
                    "source)",
                )
            elif u >= end:
                c.next = Next(True, None, nothing_after=True)
            else:
                keys[id(c)] = want_range(ranges, c.want.source_tp, u, min(end, u + scan))
        reads = src.read_ranges(ranges, budget) if ranges else {}
        for c in cs:
            if id(c) in keys:
                c.next = next_record(reads.get(keys[id(c)]), c.want.position, bounds[c.want.source_tp][1])


def _anchor(t: tr.Translation | tr.Unproven, w: Want) -> tuple[int, int] | None:
    """(source offset, replica offset) of the record a translation's evidence range ends on: its upper sync, or the
    drained partition's last offsets (source end - 1, replica end - 1); None when the range has no upper end."""
    hi = t.bracket[1]
    if isinstance(t, tr.Unproven) and t.drained_tail:
        return hi.upstream - 1, hi.downstream - 1
    if hi is not None:
        return hi.upstream, hi.downstream
    if isinstance(t, tr.Translation) and w.drained is not None:
        return w.drained[0] - 1, w.drained[1] - 1
    return None


def _top(t: tr.Translation | tr.Unproven, w: Want) -> int | None:
    """The highest replica offset of the evidence range (see :func:`_anchor`)."""
    a = _anchor(t, w)
    return None if a is None else a[1]


def _plan_target_reads(c: _Case, ranges: Ranges, bounds: dict[TP, tuple[int, int]]) -> None:
    """The target's records a case's evidence needs: the translation's span (to verify it, or to prove it one to one)
    or the search range (to look the copy up), from its lower sync to its upper end; below the replica's log start
    nothing can be read whole (E1)."""
    t, w = c.translation, c.want
    start, end = bounds.get(w.replica_tp, (0, 0))

    def read(lo: int, hi_incl: int) -> tuple | None:
        return None if lo < start else want_range(ranges, w.replica_tp, lo, min(hi_incl + 1, end))

    if not c.next.nothing_after and t.bracket[0] is not None:
        # E9: each pair of syncs above the position a restart MM2 wrote no sync for may lie between, for any answer
        # up to the bracket's top
        top_ = _top(t, w)
        reach = max(
            x
            for x in (t.bracket[0].downstream, top_, t.downstream if isinstance(t, tr.Translation) else None)
            if x is not None
        )
        _plan_restart_reads(c, ranges, bounds, reach)
        if c.restart_reads and c.next.record is None:  # no source record: the content of the answer's copy
            if isinstance(t, tr.Translation):
                c.answer_read = read(t.downstream, t.downstream)
            elif t.superseded is not None:  # (E7's lookup answers by the first copy's content)
                c.answer_read = read(t.superseded.downstream, t.superseded.downstream)
    if c.next.nothing_after or (isinstance(t, tr.Translation) and t.rule == tr.EXACT_SYNC):
        return
    lo, top = t.bracket[0], _top(t, w)
    if lo is None or top is None:
        return
    if isinstance(t, tr.Translation):
        c.target_read = read(lo.downstream, max(top, t.downstream))
    elif c.next.record is not None:
        c.target_read = read(lo.downstream, top)
    elif t.superseded is not None and t.bracket[1] is not None and w.drained is not None:
        # E7: replication finished (drained) and the range's upper end proves that the later history copied past U:
        # only then is the record at U copied inside the range - and every record after U after it. With the source
        # lost, MM2 may have died while re-copying, before the later history re-reached where the earlier one got:
        # records past that have their only copies before the later copy of U
        c.target_read = read(lo.downstream, top)
        c.first_copy_read = read(t.superseded.downstream, t.superseded.downstream)
    elif t.first_copy is not None and t.first_copy.rule == tr.BRACKET:
        # E7: a bracket a later history may have voided, no next record to look its copy up by: the bracket's span,
        # to prove its first copy one to one (E4)
        b_lo, b_hi = t.first_copy.bracket
        c.target_read = read(b_lo.downstream, b_hi.downstream)


def _plan_restart_reads(c: _Case, ranges: Ranges, bounds: dict[TP, tuple[int, int]], reach: int) -> bool:
    """E9's reads of a case: each pair of syncs a restart MM2 wrote no sync for may lie between, for an answer up to
    ``reach``, read from the lowest answer (to anchor the answer itself) up to the pair's upper sync; below the
    replica's log start nothing is read (E1). Whether a pair was added."""
    t, w = c.translation, c.want
    start, end = bounds.get(w.replica_tp, (0, 0))
    v, lo = (c.next.record.offset if c.next.record is not None else w.position), t.bracket[0].downstream
    planned = {(p, b) for p, b, _k in c.restart_reads}
    added = False
    for p, b in w.index.restarts_above(v, lo, end, w.drained, reach):
        if (p, b) not in planned:
            key = None if lo < start else want_range(ranges, w.replica_tp, lo, min(b.downstream + 1, end))
            c.restart_reads.append((p, b, key))
            added = True
    return added


def _plan_anchor_reads(
    c: _Case, t_reads: Reads, s_ranges: dict[str, Ranges], sources: Mapping[str, RecordSource | None]
) -> None:
    t, w, nxt = c.translation, c.want, c.next.record
    if nxt is None or sources.get(w.alias) is None:
        return
    for p, b, key in c.restart_reads:  # E9: a copy of the next record between the two syncs, to anchor at the upper
        read = t_reads.get(key) if key is not None else None  # (and the answer with it)
        if is_evidence(read) and candidates(read, p.downstream + 1, b.downstream, nxt.content):
            c.restart_anchors[b] = want_range(s_ranges[w.alias], w.source_tp, nxt.offset, b.upstream + 1)
    if c.target_read is None:
        return
    read = t_reads.get(c.target_read)
    if not is_evidence(read):
        return
    lo = t.bracket[0].downstream
    top = _top(t, w)
    cands = candidates(read, lo, top, nxt.content)
    anchor = _anchor(t, w)
    if len(cands) < 2 or anchor is None:
        return
    anchor_u, anchor_d = anchor
    s_key = want_range(s_ranges[w.alias], w.source_tp, nxt.offset, anchor_u + 1)
    for cand in cands:  # the first too: anchored, it is exact (else a fallback, said so: fell_back)
        c.anchor_reads[cand] = (c.target_read, s_key, anchor_d)


def _decide(c: _Case, t_reads: Reads, s_reads: Reads) -> Outcome:
    t, w, nxt = c.translation, c.want, c.next
    read = t_reads.get(c.target_read) if c.target_read is not None else None
    translated = nxt.record.offset if nxt.record is not None else w.position
    replica_end = w.drained[1] if w.drained is not None else None
    if nxt.known and nxt.nothing_after:  # E3: read to the source's end, nothing left: any start loses nothing
        ev = tr.Evidence(t, nothing_after=True, replica_end=replica_end)
    elif isinstance(t, tr.Translation) and t.rule == tr.EXACT_SYNC:
        ev = tr.Evidence(t)
    elif isinstance(t, tr.Translation):
        lo, top = t.bracket[0].downstream, _top(t, w)
        if nxt.record is not None:  # E5, else E6 in the span read
            ok = verified_copy(read, lo, top, t.downstream, nxt.record.content)
            found, first = (None, False) if ok else _lookup(c, read, s_reads)
            ev = tr.Evidence(t, verified=ok, lookup=found, lookup_first_of_many=first)
        else:  # the source lost, or U below its log start (E2): the target alone (E4)
            ev = tr.Evidence(t, one_to_one=top is not None and one_to_one(read, lo, top))
    elif nxt.record is not None:
        found, first = _lookup(c, read, s_reads)
        ev = tr.Evidence(t, lookup=found, lookup_first_of_many=first)
    else:  # E7: the later copy of a superseded sync's record, by the first copy's content
        first_read = t_reads.get(c.first_copy_read) if c.first_copy_read is not None else None
        rec = first_read.at(t.superseded.downstream) if t.superseded is not None and is_evidence(first_read) else None
        found, first = None, False
        if rec is not None and is_evidence(read):
            cands = candidates(read, t.bracket[0].downstream, _top(t, w), rec.content)
            found = choose_copy(cands, [])
            first = fell_back(cands, found, [])
        fc = t.first_copy.bracket if t.first_copy is not None and t.first_copy.rule == tr.BRACKET else None
        ev = tr.Evidence(
            t,
            lookup=found,
            lookup_first_of_many=first,
            one_to_one=None if fc is None else one_to_one(read, fc[0].downstream, fc[1].downstream),
        )
    answer = tr.decide(ev)
    # a lookup on a drained partition searched the later history's range already (translate rule 7)
    if (
        answer is not None
        and (answer[1] != tr.RECORD_LOOKUP or w.drained is None)
        and first_copy_only(w.index, answer, translated, replica_end if replica_end is not None else c.replica_end)
    ):
        # E7: an earlier history's copy, the later one not searched (a lookup's: E6's first copy)
        answer = (answer[0], tr.FIRST_COPY if answer[1] == tr.RECORD_LOOKUP else tr.SUPERSEDED_SYNC)
    if answer is not None and tr.is_exact(answer[1]) and c.restart_reads:
        answer = later_copy(c, answer, t_reads, s_reads)
    cut_short, archive_top = False, None
    if answer is None and c.lost:  # E8: the source lost, nothing proven - rule 10 over every archived sync
        floor_ = w.index.history_floor(translated, c.replica_end)
        if floor_ is not None:
            answer, cut_short, archive_top = (floor_[0], tr.ARCHIVE_FLOOR), floor_[1], floor_[2]
    floor = w.index.copy_at_least(translated, w.drained)  # None: not drained, or no sync at or below
    # where the answer is not exact, its re-reads are counted from below
    at_least = floor if answer is None or answer[1] in (tr.SUPERSEDED_SYNC, tr.FIRST_COPY) else None
    below_every_sync = floor is None and w.drained is not None and translated < w.drained[0]
    why = nxt.why
    if c.target_read is not None and not is_evidence(read):
        why = (
            (why + "; " if why else "") + f"the evidence range on the target was not read whole ({read.status}"
            f"{': ' + read.why if read.why else ''})"
            if read is not None
            else why
        )
    return Outcome(
        answer,
        ev,
        translated,
        c.source_start,
        at_least,
        why,
        w.replica_start if below_every_sync else None,
        cut_short,
        archive_top,
    )


def first_copy_only(index: tr.SyncIndex, answer: tuple[int, str], translated: int, replica_end: int | None) -> bool:
    """E7: whether an answer of an exact sync, a gap-free bracket, a drained tail or a lookup is an earlier MM2
    history's first copy of the record at ``translated``, which a later history copied again or may have
    (:meth:`~mm2_failover.rules.translate.SyncIndex.copied_again_after`), where that later copy was not searched (the
    source lost, or replication not known to be finished: the lookup's range ended at the earlier history's sync):
    then it is ``superseded_sync`` (a lookup's, E6's ``first_copy``), never exact."""
    return answer[1] in (tr.EXACT_SYNC, tr.BRACKET, tr.DRAINED_TAIL, tr.RECORD_LOOKUP) and index.copied_again_after(
        translated, answer[0], replica_end
    )


def later_copy(c: _Case, answer: tuple[int, str], t_reads: Reads, s_reads: Reads) -> tuple[int, str]:
    """E9: an exact answer stays exact only where no MM2 restart MM2 wrote no sync for copied the next record again
    past it. Per pair of syncs that could hold one (:meth:`~mm2_failover.rules.translate.SyncIndex.restarts_above`), in the
    order MM2 wrote them: no copy of the next record between the two past the answer - the answer stands -; a copy
    whose run up to the upper sync is the source's records up to the sync's, record for record (E6's anchor) - the
    last such answers -; copies none of which is so proven, where the answer's own run is (the copies are twins) -
    the answer stands -; else, or where the pair's range was not read whole, the answer is the first copy
    (``first_copy``): safe, never called exact. With no next record (the source lost, or the position below its log
    start) the answer's record's content is looked for and nothing can be anchored: a copy found makes it the first
    copy."""
    nxt, unproven = c.next.record, False
    if nxt is not None:
        content = nxt.content
    else:
        own = t_reads.get(c.answer_read) if c.answer_read is not None else None
        rec = own.at(own.lo) if is_evidence(own) else None
        content = rec.content if rec is not None else None
    for p, b, key in sorted(c.restart_reads, key=lambda r: (r[1].downstream, r[0].downstream)):
        if b.downstream <= answer[0] or (
            b.upstream > p.upstream and p.downstream - answer[0] >= 2 * (b.downstream - p.downstream)
        ):
            continue  # (restarts_above: no restart between the two can hold a copy of the record past the answer)
        read = t_reads.get(key) if key is not None else None
        if not is_evidence(read) or content is None:
            unproven = True
            continue
        cands = [x for x in candidates(read, p.downstream + 1, b.downstream, content) if x > answer[0]]
        if not cands:
            continue
        s_read = s_reads.get(c.restart_anchors.get(b)) if nxt is not None else None
        proven = [
            x
            for x in cands + [answer[0]]
            if nxt is not None and anchored(read, x, b.downstream, s_read, nxt.offset, b.upstream)
        ]
        if proven and max(proven) != answer[0]:
            answer, unproven = (max(proven), tr.RECORD_LOOKUP), False
            c.moved_to = answer[0]
        elif not proven:  # (the answer's own run anchored: the copies past it are twins)
            unproven = True
    return (answer[0], tr.FIRST_COPY) if unproven else answer


def _lookup(c: _Case, read: Read | None, s_reads: Reads) -> tuple[int | None, bool]:
    """E6 over the case's search range: the copy to resume at, or None (not read, or no copy), and whether it is the
    first of several taken for want of an anchored later one (:func:`fell_back`)."""
    t, w, nxt = c.translation, c.want, c.next.record
    if not is_evidence(read) or t.bracket[0] is None:
        return None, False
    top = _top(t, w)
    if top is None:
        return None, False
    cands = candidates(read, t.bracket[0].downstream, top, nxt.content)
    later = [
        cand
        for cand, (_tk, s_key, anchor_d) in c.anchor_reads.items()
        if anchored(read, cand, anchor_d, s_reads.get(s_key), nxt.offset, s_key[2] - 1)
    ]
    found = choose_copy(cands, later)
    return found, fell_back(cands, found, later)


# ------------------------------------------------------------------------------------------ failing back


@dataclass(frozen=True)
class BackWant:
    """A group's position ``D`` on the replica (``<home>.<topic>``, read on the run's source cluster), to be placed
    on its origin partition (the run's target) by rules 8-9."""

    key: Hashable
    replica_tp: TP  # on the replica side (the run's source)
    origin_tp: TP  # on the origin side (the run's target)
    position: int
    index: tr.SyncIndex
    replica_end: int | None  # the replica's end offset, when the replica side can be read


def prove_back(
    wants: Iterable[BackWant], replica: RecordSource | None, origin: RecordSource, budget: int = DEFAULT_BUDGET
) -> dict[Hashable, tr.Back | None]:
    """Rules 8-9 on what was read: an exact sync always; a bracket or the tail only where the replica's span was read
    whole and is one to one (E4), and the tail only where the replica's last record is the origin's record the
    arithmetic names; else the sync floor (None: no sync at or below D)."""
    wants = list(wants)
    r_ranges: Ranges = {}
    o_ranges: Ranges = {}
    plans = {}
    r_bounds = replica.log_bounds({w.replica_tp for w in wants}) if replica is not None and wants else {}
    for w in wants:
        b = w.index.back(w.position, w.replica_end)
        plans[w.key] = (b, None, None)
        if b is None or not b.needs_evidence or replica is None:
            continue
        lo, hi = b.evidence_range(w.replica_end or 0)
        if lo < r_bounds.get(w.replica_tp, (0, 0))[0]:
            continue  # E2: not on the replica any more: not evidence
        rk = want_range(r_ranges, w.replica_tp, lo, hi + 1)
        ok = None
        if b.rule == tr.DRAINED_TAIL:
            o = b.tail_origin(w.replica_end)
            ok = want_range(o_ranges, w.origin_tp, o, o + 1)
        plans[w.key] = (b, rk, ok)
    r_reads = replica.read_ranges(r_ranges, budget) if r_ranges else {}
    o_reads = origin.read_ranges(o_ranges, budget) if o_ranges else {}
    out = {}
    for w in wants:
        b, rk, ok = plans[w.key]
        if (
            b is not None
            and b.needs_evidence
            and not back_proven(b, w, r_reads.get(rk) if rk else None, o_reads.get(ok) if ok else None)
        ):
            b = w.index.floor(w.position)
        out[w.key] = b
    return out


def back_proven(b: tr.Back, w: BackWant, replica_read: Read | None, origin_read: Read | None) -> bool:
    """Rule 8's evidence (E4, and the tail's last copy)."""
    lo, hi = b.evidence_range(w.replica_end or 0)
    if not one_to_one(replica_read, lo, hi):
        return False
    if b.rule == tr.DRAINED_TAIL:
        last = replica_read.at(hi)
        at = origin_read.at(b.tail_origin(w.replica_end)) if is_evidence(origin_read) else None
        return last is not None and at is not None and last.content == at.content
    return True
