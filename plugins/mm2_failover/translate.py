"""Exact translation of a group's source position to the target, from MM2's offset syncs (pure).

MirrorMaker 2 records, now and then, that the source record at offset ``u`` of a partition was written to the
replica at offset ``d``: an *offset sync* ``(u, d)`` (topic ``mm2-offset-syncs.<target>.internal``; key = source
topic STRING + partition INT32, value = upstream INT64 + downstream INT64). MM2's own checkpoints translate a group's
source commit ``U`` with the newest sync at or below it (plus one), from a sparse store: conservative, often
hundreds of records early. The syncs prove more:

1. **Exact sync** - a sync at ``u == U``: the record at ``U`` is at ``d``. Unless a later MM2 history copied it again
   (a sync at or below ``U`` with a higher downstream offset: MM2 restarted at or before ``U``): a group starting at
   the first copy would read the records between the restart point and ``U`` twice, so rule 7 looks for the later
   copy instead, and the first copy answers only where that lookup cannot be made (:attr:`Unproven.superseded`),
   under its own rule, ``superseded_sync`` - safe, not exact.
2. **Gap-free bracket** - two consecutive syncs ``(u1, d1) <= U < (u2, d2)`` with ``u2 - u1 == d2 - d1``: MM2 copied
   every source offset between them one to one (no transaction marker, aborted batch, compaction gap or duplicate
   changed the count), so the record at ``U`` is at ``d1 + (U - u1)``.
3. **Drained tail** - past the last sync ``(u, d)``, when replication is finished and the source's and the replica's
   end offsets ``(S, R)`` are known: ``S - u == R - d`` proves the same for the tail, and ``U <= S`` is at
   ``d + (U - u)``.
4. Otherwise the syncs prove nothing about ``U``: the caller keeps MM2's checkpoint (or, where the source can be
   read, looks up the copy of the record at ``U`` inside the bracket's downstream range).

Never past the consumed position: each rule gives the replica offset of the record at ``U`` itself (the next record
the group reads), so a consumer starting there reads it again and loses nothing. A bracket that is not gap-free is
never interpolated. Arithmetic alone is not proof, though: a transaction marker before ``U`` and a record MM2 copied
twice after it (an MM2 restart) cancel out. So a translation is trusted (:func:`decide`) only

5. when the source confirms it - the first record at or after ``U`` on the source and the record at the translated
   offset on the target are the same record (key, value, timestamp, headers) -, or, with the source lost,
6. when no record was copied twice in the bracket's downstream range (its ends included);
7. where no rule applies and the source can be read, the copy of the record at ``U`` is looked up inside the
   bracket's downstream range (transactions and compaction leave gaps elsewhere in it); past the last sync of a
   drained partition, the range ends at the replica's end offset, and a group with no record left at or after
   ``U`` on the source (its position is past the last record, behind only markers) resumes at that end. Where MM2
   restarted and copied records again, the range runs from the latest copy below ``U`` to the first sync above it
   copied later (:meth:`SyncIndex.search_range`). Which copy in it the group resumes at is the evidence stage's
   rule E6 (:mod:`mm2_failover.evidence`): the first copy of the record's content is always safe (a producer retry's
   twin found first is an earlier record: a re-read); a later one only where the target from it holds the source's
   records up to the range's upper sync, record for record.

An exact sync needs none of these: MM2 itself recorded that copy.

Failing back, the same syncs are read the other way (:meth:`SyncIndex.back`): a group that consumed the replica up
to ``D`` (the next record it reads there) resumes on the origin partition at

8. the same proofs mirrored - a sync at ``d == D`` gives ``u``; a gap-free bracket ``(u1, d1) <= D < (u2, d2)``
   gives ``u1 + (D - d1)`` when no record was copied twice in ``[d1, d2]`` (rule 6); past the last sync ``(u, d)``,
   up to the replica's end ``R``, ``u + (D - d)`` when no record was copied twice in ``[d, R)`` and the replica's
   last record is the origin's record at ``u + (R - 1 - d)`` (the origin's end has moved on since - records MM2
   never copied before the outage -, so its end offset proves nothing: the last copy does);
9. otherwise the *sync floor*: the highest ``u`` of the syncs with ``d <= D``. MM2 copies in order, and a history
   that restarts starts at or before where the last one stopped, so every origin record below ``u`` was copied
   below ``d <= D`` - the group read it. It re-reads what lies between; with no such sync, nothing is proven and the
   caller resumes at the origin's log start (loses nothing, re-reads everything).

The syncs of a partition may contain several histories (MM2 restarted and copied records again, a replica topic
recreated): only *consecutive* syncs of the sorted list form brackets, and a bracket whose downstream span differs
from its upstream span - as any such seam does - is refused by rule 2.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable
from dataclasses import dataclass

EXACT_SYNC = "exact_sync"
BRACKET = "gap_free_bracket"
DRAINED_TAIL = "drained_tail"
RULES = (EXACT_SYNC, BRACKET, DRAINED_TAIL)
SYNC_FLOOR = "sync_floor"  # failing back only (rule 9)


@dataclass(frozen=True, order=True)
class Sync:
    upstream: int
    downstream: int


@dataclass(frozen=True)
class Translation:
    downstream: int
    rule: str  # one of RULES
    bracket: tuple[Sync, Sync | None]  # the syncs that prove it (the second is None for exact syncs / the tail)


@dataclass(frozen=True)
class Unproven:
    """No rule applies; ``bracket`` is the narrowest pair of syncs around ``U`` (either may be None), the range a
    lookup of the record at ``U`` would search."""

    bracket: tuple[Sync | None, Sync | None]
    drained_tail: bool = False  # the second "sync" is the drained partition's (source end, replica end)
    superseded: Sync | None = None  # rule 1's sync at U, copied again later: the answer when no lookup is made


class SyncIndex:
    """The syncs of one source partition, sorted by upstream offset (duplicates and re-emissions kept once each)."""

    def __init__(self, syncs: Iterable[Sync | tuple[int, int]]):
        self.syncs: list[Sync] = sorted({s if isinstance(s, Sync) else Sync(*s) for s in syncs})
        # built once, so that every lookup is a few bisections (a partition's archive holds many syncs, and every
        # group of it looks one up): ``_prefix_top[i]`` the sync of syncs[:i] with the highest downstream (the first
        # such); ``_run_end[i]`` where the run of non-decreasing downstream offsets holding syncs[i] ends (a run: one
        # MM2 history; a new one starts at every restart's seam); the same syncs by downstream offset, and
        # ``_floor_at[j]`` the one of by_d[:j] with the highest upstream
        n = len(self.syncs)
        self._ups = [s.upstream for s in self.syncs]
        self._downs = [s.downstream for s in self.syncs]
        self._prefix_top: list[Sync | None] = [None] * (n + 1)
        for i, x in enumerate(self.syncs):
            top = self._prefix_top[i]
            self._prefix_top[i + 1] = x if top is None or x.downstream > top.downstream else top
        self._run_end = [n] * n
        for i in range(n - 2, -1, -1):
            self._run_end[i] = self._run_end[i + 1] if self._downs[i] <= self._downs[i + 1] else i + 1
        self._by_d = sorted(self.syncs, key=lambda x: (x.downstream, x.upstream))
        self._by_d_downs = [x.downstream for x in self._by_d]
        self._floor_at: list[Sync | None] = [None] * (n + 1)
        for j, x in enumerate(self._by_d):
            f = self._floor_at[j]
            self._floor_at[j + 1] = x if f is None or x.upstream > f.upstream else f

    def __len__(self) -> int:
        return len(self.syncs)

    def translate(self, upstream: int, drained: tuple[int, int] | None = None,
                  replica_start: int | None = None) -> Translation | Unproven:
        """The replica offset of the source record at ``upstream`` (rules 1-3), or why not (rule 4) with the range a
        lookup searches (rule 7). ``drained``: the (source end, replica end) offsets once replication is finished,
        if known; ``replica_start``: the replica's log start (the search's floor below the first sync)."""
        i = bisect.bisect_right(self._ups, upstream)  # syncs[:i] have upstream <= U
        first = bisect.bisect_left(self._ups, upstream)
        if first < i:
            # the first copy of U MM2 recorded (the lowest downstream: the first in the sorted syncs) ...
            s = self.syncs[first]
            if self._prefix_top[i].downstream <= s.downstream:
                return Translation(s.downstream, EXACT_SYNC, (s, None))
            # ... copied again by a later history that started at or before U: look for the last copy (rule 7)
            u = self.search_range(upstream, i, drained, replica_start)
            return Unproven(u.bracket, u.drained_tail, superseded=s)
        lo = self.syncs[i - 1] if i else None
        hi = self.syncs[i] if i < len(self.syncs) else None
        if lo is not None and hi is not None and hi.upstream - lo.upstream == hi.downstream - lo.downstream \
                and hi.downstream >= lo.downstream:
            return Translation(lo.downstream + (upstream - lo.upstream), BRACKET, (lo, hi))
        if lo is not None and hi is None and drained is not None:
            source_end, replica_end = drained
            if upstream <= source_end and source_end - lo.upstream == replica_end - lo.downstream:
                return Translation(lo.downstream + (upstream - lo.upstream), DRAINED_TAIL, (lo, None))
        return self.search_range(upstream, i, drained, replica_start)

    def search_range(self, upstream: int, i: int, drained: tuple[int, int] | None,
                     replica_start: int | None) -> Unproven:
        """Rule 7's range: where some copy of the record at ``upstream`` (the next record the group reads) must be.
        After any sync ``(u, d)`` with ``u <= upstream`` the record is copied - by that sync's history, or, if MM2
        died before reaching it, by the next history, which resumes at or before where the last one stopped - so
        the range starts at the highest such ``d``. It ends at the lowest sync above ``upstream`` copied after that
        start (its history, or an earlier one, copied the record before it); past every sync, at the drained
        replica's end; below the first sync it starts at the replica's log start."""
        lo = self._prefix_top[i]
        if lo is None and replica_start is not None:
            lo = Sync(0, replica_start)
        floor = lo.downstream if lo is not None else -1
        hi = self._lowest_above(i, floor)
        if hi is not None:
            return Unproven((lo, hi))
        if drained is not None and upstream <= drained[0]:
            # a tail that is not gap-free (markers, aborted batches): the drained ends bound the copy's range
            return Unproven((lo, Sync(*drained)), drained_tail=True)
        return Unproven((lo, None))

    def copy_at_least(self, upstream: int, drained: tuple[int, int] | None = None) -> int | None:
        """A proven lower bound on where a group at ``upstream`` should resume (the latest copy of its next record):
        the highest downstream offset of the syncs at or below it - MM2 copies the record after that sync, in its
        history or a later one - provided some history got past ``upstream`` (a sync above it copied later, or the
        partition drained); None otherwise. What the report counts re-reads from where it cannot count them exactly."""
        i = bisect.bisect_right(self._ups, upstream)
        lo = self._prefix_top[i]
        if lo is None:
            return None
        passed = self._lowest_above(i, lo.downstream) is not None or (drained is not None and upstream < drained[0])
        return lo.downstream if passed else None

    def _lowest_above(self, i: int, floor: int) -> Sync | None:
        """The sync of syncs[i:] with the lowest downstream offset above ``floor`` (the first such), or None: one
        bisection per run of non-decreasing downstream offsets from ``i`` on (one per MM2 history)."""
        best = None
        while i < len(self.syncs):
            end = self._run_end[i]
            j = bisect.bisect_right(self._downs, floor, lo=i, hi=end)
            if j < end and (best is None or self._downs[j] < best.downstream):
                best = self.syncs[j]
            i = end
        return best

    def back(self, downstream: int, replica_end: int | None = None) -> Back | None:
        """Failing back (rules 8-9): the origin offset at which a group that consumed this replica up to
        ``downstream`` resumes - exact where a sync, a gap-free bracket or the tail up to ``replica_end`` proves it
        (the caller checks the evidence :attr:`Back.needs_evidence` names), else the sync floor; None when no sync
        lies at or below ``downstream``."""
        floor = self.floor(downstream)
        if floor is None:
            return None
        proven = self._back_proven(downstream, replica_end)
        # after an MM2 restart the group may have read a record's first copy beyond D's: the floor can be higher
        return proven if proven is not None and proven.upstream >= floor.upstream else floor

    def _back_proven(self, downstream: int, replica_end: int | None) -> Back | None:
        by_d = self._by_d
        first = bisect.bisect_left(self._by_d_downs, downstream)
        if first < len(by_d) and by_d[first].downstream == downstream:
            # a copy at D (the lowest upstream of them): the record the group reads next is the origin's record at u
            s = by_d[first]
            return Back(s.upstream, EXACT_SYNC, (s, None))
        # the bracket of D in the downstream order; syncs of one history are increasing in both offsets
        j = bisect.bisect_right(self._by_d_downs, downstream)
        lo = by_d[j - 1]
        hi = by_d[j] if j < len(by_d) else None
        if hi is not None and hi.upstream - lo.upstream == hi.downstream - lo.downstream and hi.upstream > lo.upstream:
            return Back(lo.upstream + (downstream - lo.downstream), BRACKET, (lo, hi))
        if hi is None and replica_end is not None and lo.downstream < replica_end and downstream <= replica_end:
            return Back(lo.upstream + (downstream - lo.downstream), DRAINED_TAIL, (lo, None))
        return None

    def floor(self, downstream: int) -> Back | None:
        """Rule 9: the highest upstream offset of the syncs at or below ``downstream`` (None: no such sync)."""
        f = self._floor_at[bisect.bisect_right(self._by_d_downs, downstream)]
        return None if f is None else Back(f.upstream, SYNC_FLOOR, (f, None))


@dataclass(frozen=True)
class Back:
    """Where a group resumes on the origin when failing back (rules 8-9)."""

    upstream: int
    rule: str  # EXACT_SYNC, BRACKET, DRAINED_TAIL (each trusted only on its evidence) or SYNC_FLOOR (always safe)
    bracket: tuple[Sync, Sync | None]

    @property
    def needs_evidence(self) -> bool:
        return self.rule in (BRACKET, DRAINED_TAIL)

    def evidence_range(self, replica_end: int) -> tuple[int, int]:
        """The replica offsets ``[lo, hi]`` in which no record may be copied twice (rule 8); for the tail, the record
        at ``hi`` must also be the origin's record at :meth:`tail_origin`."""
        lo, hi = self.bracket
        return lo.downstream, hi.downstream if hi is not None else replica_end - 1

    def tail_origin(self, replica_end: int) -> int:
        lo = self.bracket[0]
        return lo.upstream + (replica_end - 1 - lo.downstream)


RECORD_LOOKUP = "record_lookup"
AT_END = "at_end"
SUPERSEDED_SYNC = "superseded_sync"  # rule 1's first copy where the later copy was not found: safe, re-reads
CHECKPOINT = "checkpoint"


@dataclass(frozen=True)
class Evidence:
    """What was read to check a translation (None: not read; see :mod:`mm2_failover.evidence`, which builds these
    from complete reads only)."""

    translation: Translation | Unproven
    verified: bool | None = None  # the source's next record is the target's record at the translated offset
    one_to_one: bool | None = None  # the bracket's downstream range holds one record per offset, none twice
    lookup: int | None = None  # where the copy of the record at U was found inside the bracket
    nothing_after: bool = False  # the source holds no record at or after U (read up to its end)
    replica_end: int | None = None  # the drained replica's end offset (where nothing left to read resumes)


def decide(ev: Evidence) -> tuple[int, str] | None:
    """Rules 5-7: the offset to resume at and the rule that proves it, or None (keep MM2's checkpoint)."""
    t = ev.translation
    if ev.nothing_after and ev.replica_end is not None:
        return ev.replica_end, AT_END  # nothing left to read on the source: past every copy on the drained replica
    if isinstance(t, Translation):
        if t.rule == EXACT_SYNC or ev.verified or (ev.verified is None and ev.one_to_one):
            return t.downstream, t.rule
    if ev.lookup is not None:
        return ev.lookup, RECORD_LOOKUP
    if isinstance(t, Unproven) and t.superseded is not None:  # rule 1's first copy: safe, re-reads since the restart
        return t.superseded.downstream, SUPERSEDED_SYNC
    return None


# ------------------------------------------------------------------------------------------ the wire format


class MalformedSync(ValueError):
    pass


def decode_sync(key: bytes | None, value: bytes | None) -> tuple[str, int, Sync]:
    """An offset-sync record (``org.apache.kafka.connect.mirror.OffsetSync``): key = topic STRING + partition INT32,
    value = upstream INT64 + downstream INT64, big-endian. Raises MalformedSync."""
    if key is None or value is None:
        raise MalformedSync("null key or value")
    if len(key) < 2:
        raise MalformedSync("key truncated")
    n = struct.unpack(">h", key[:2])[0]
    if n < 0 or len(key) != 2 + n + 4:
        raise MalformedSync("key truncated or with trailing bytes")
    try:
        topic = key[2:2 + n].decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedSync("topic not UTF-8") from None
    partition = struct.unpack(">i", key[2 + n:])[0]
    if len(value) != 16:
        raise MalformedSync(f"value of {len(value)} bytes, not 16")
    up, down = struct.unpack(">qq", value)
    if partition < 0 or up < 0 or down < 0:
        raise MalformedSync("negative partition or offset")
    return topic, partition, Sync(up, down)


def encode_sync(topic: str, partition: int, upstream: int, downstream: int) -> tuple[bytes, bytes]:
    raw = topic.encode()
    return struct.pack(">h", len(raw)) + raw + struct.pack(">i", partition), struct.pack(">qq", upstream, downstream)
