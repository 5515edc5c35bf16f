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
   rule E6 (:mod:`mm2_failover.rules.evidence`): the first copy of the record's content is always safe (a producer retry's
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

Failing over with the source lost, where rules 1-7 prove nothing (no record can be read on the source):

10. the *archive floor* (:meth:`SyncIndex.history_floor`): MM2's own rule - the newest sync at or below ``U``, plus
    one unless at ``U`` - over every archived sync, where MM2's checkpoint uses its sparse store (a real bed: 952
    records re-read by MM2's checkpoints, 617 from the newest archived sync). Not where that sync's history was cut
    short (MM2 restarted and the outage stopped it before it got as far as an earlier history, whose copies are then
    the only ones of the records past it): the newest sync whose history reached as far is taken instead.

The syncs of a partition may contain several histories (MM2 restarted and copied records again, a replica topic
recreated): only *consecutive* syncs of the sorted list form brackets, and a bracket whose downstream span differs
from its upstream span - as any such seam does - is refused by rule 2.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

EXACT_SYNC = "exact_sync"
BRACKET = "gap_free_bracket"
DRAINED_TAIL = "drained_tail"
RULES = (EXACT_SYNC, BRACKET, DRAINED_TAIL)
SYNC_FLOOR = "sync_floor"  # failing back (rule 9); failing over where nothing else answers (evidence E7)
REPLICA_START = "replica_start"  # failing over below every offset sync, never checkpointed: the replica's first record


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
    #: rule 1's sync or rule 2's bracket, voided by a later history that may have copied U again (its sync at the next
    #: sync's upstream offset, its start not archived: :meth:`SyncIndex.reached_again`): where no lookup answers, the
    #: first copy (E7) - not looked up by its content in the later range, as a superseded sync's record is: that
    #: history may have started past U, and a later copy of the content there be a later twin's
    first_copy: Translation | None = None


class SyncIndex:
    """The syncs of one source partition, sorted by upstream offset (duplicates and re-emissions kept once each).

    Built with numpy from the syncs' two columns (:meth:`from_arrays`, what the archive reader hands over: no Python
    object per sync), so that a partition's 100k syncs cost a few MB and a few milliseconds; every lookup is a few
    bisections (``searchsorted``) over arrays built once, and only the syncs an answer names become :class:`Sync`."""

    def __init__(self, syncs: Iterable[Sync | tuple[int, int]] = ()):
        pairs = [(s.upstream, s.downstream) if isinstance(s, Sync) else (int(s[0]), int(s[1])) for s in syncs]
        a = np.array(pairs, dtype=np.int64).reshape(-1, 2)
        self._build(a[:, 0], a[:, 1])

    @classmethod
    def from_arrays(cls, upstream, downstream) -> "SyncIndex":
        """From the upstream and downstream columns (any order, duplicates allowed)."""
        idx = cls.__new__(cls)
        idx._build(np.asarray(upstream, dtype=np.int64), np.asarray(downstream, dtype=np.int64))
        return idx

    def _build(self, up, down) -> None:
        # the unique syncs sorted by (upstream, downstream); then, built once, so that every lookup is a few
        # bisections (a partition's archive holds many syncs, and every group of it looks one up): ``_prefix_top[i]``
        # the index of the sync of syncs[:i] with the highest downstream (the first such; -1: none); the same syncs
        # by (downstream, upstream), and ``_floor_at[j]`` the index of the one of by_d[:j] with the highest upstream
        if len(up):
            pairs = np.unique(np.stack([up, down], axis=1), axis=0)
            up, down = pairs[:, 0].copy(), pairs[:, 1].copy()
        self._ups, self._downs = up, down
        n = len(up)
        self._prefix_top = np.concatenate([[-1], _first_max_index(down)]) if n else np.array([-1])
        order = np.lexsort((up, down))
        self._by_d_downs, self._by_d_ups = down[order], up[order]
        self._floor_at = np.concatenate([[-1], _first_max_index(self._by_d_ups)]) if n else np.array([-1])
        self._floor_cache: dict[int, tuple] = {}  # rule 10's arrays, per count of syncs below the replica's end
        # restarts_above: the pairs (by_d[j - 1], by_d[j]) whose upstream offsets go back; and, per j, the lowest
        # answer offset from which no pair from j on is close enough (d[j - 1] - 2 x the widest gap from j on):
        # increasing in j, so the close pairs of an answer end at a bisection
        if n > 1:
            gap = np.diff(self._by_d_downs)
            widest = np.maximum.accumulate(gap[::-1])[::-1]
            self._close_until = np.concatenate([[np.iinfo(np.int64).min], self._by_d_downs[:-1] - 2 * widest])
            self._back_at = np.nonzero(np.diff(self._by_d_ups) <= 0)[0] + 1
        else:
            self._close_until = np.full(max(n, 1), np.iinfo(np.int64).min)
            self._back_at = np.array([], dtype=np.int64)

    def _sync(self, i) -> Sync:
        return Sync(int(self._ups[i]), int(self._downs[i]))

    @property
    def syncs(self) -> list[Sync]:
        return [self._sync(i) for i in range(len(self._ups))]

    def __len__(self) -> int:
        return len(self._ups)

    def translate(
        self, upstream: int, drained: tuple[int, int] | None = None, replica_start: int | None = None
    ) -> Translation | Unproven:
        """The replica offset of the source record at ``upstream`` (rules 1-3), or why not (rule 4) with the range a
        lookup searches (rule 7). ``drained``: the (source end, replica end) offsets once replication is finished,
        if known; ``replica_start``: the replica's log start (the search's floor below the first sync)."""
        i = int(np.searchsorted(self._ups, upstream, side="right"))  # syncs[:i] have upstream <= U
        first = int(np.searchsorted(self._ups, upstream, side="left"))
        if first < i:
            # the first copy of U MM2 recorded (the lowest downstream: the first in the sorted syncs) ...
            s = self._sync(first)
            if self._downs[self._prefix_top[i]] <= s.downstream:
                exact = Translation(s.downstream, EXACT_SYNC, (s, None))
                reach = self._next_reached_again(i, s.downstream, drained[1]) if drained is not None else None
                if reach is None:
                    return exact
                # a later history reached the next sync's upstream offset again, its start not archived: it may
                # have copied U again - on the drained partition the range up to its sync is searched (rule 7)
                return Unproven((s, reach), first_copy=exact)
            # ... copied again by a later history that started at or before U: look for the later copy (rule 7)
            u = self.search_range(upstream, i, drained, replica_start)
            return Unproven(u.bracket, u.drained_tail, superseded=s)
        lo = self._sync(i - 1) if i else None
        hi = self._sync(i) if i < len(self._ups) else None
        if lo is not None and drained is not None and self.recopied_since(i, lo, drained[1]):
            # an earlier history's bracket or tail: a later one restarted at or before U and copied U again - the
            # arithmetic names the first copy (the group would re-read what the later history repeats), so on a
            # drained partition the later history's range is searched for the copy instead (rule 7)
            return self.search_range(upstream, i, drained, replica_start)
        bracket = (
            Translation(lo.downstream + (upstream - lo.upstream), BRACKET, (lo, hi))
            if lo is not None
            and hi is not None
            and hi.upstream - lo.upstream == hi.downstream - lo.downstream
            and hi.downstream >= lo.downstream
            else None
        )
        reach = (
            self._next_reached_again(i, lo.downstream, drained[1]) if lo is not None and drained is not None else None
        )
        if reach is not None:
            # the same, where the later history's first sync is not archived: its copy of U, if it made one, lies
            # below its sync at or below the bracket's top - the range searched ends there
            return Unproven(
                (self.search_range(upstream, i, drained, replica_start).bracket[0], reach), first_copy=bracket
            )
        if bracket is not None:
            return bracket
        if lo is not None and hi is None and drained is not None:
            source_end, replica_end = drained
            if upstream <= source_end and source_end - lo.upstream == replica_end - lo.downstream:
                return Translation(lo.downstream + (upstream - lo.upstream), DRAINED_TAIL, (lo, None))
        return self.search_range(upstream, i, drained, replica_start)

    def recopied_since(self, i: int, lo: Sync, replica_end: int) -> bool:
        """Whether a later MM2 history restarted at or before the position (one of ``syncs[:i]``, the syncs at or
        below it, has a higher downstream offset than ``lo``, the newest by upstream offset): it copied the position
        again, after ``lo``'s copy. A sync at or past the replica's end is no history of this replica (the replica
        topic was recreated, the archive still holds the old one's syncs): never taken for one."""
        if not i:
            return False
        top = int(self._downs[self._prefix_top[i]])
        return lo.downstream < top < replica_end

    def reached_again(self, hi: Sync, replica_end: int) -> Sync | None:
        """A later MM2 history's sync at or below ``hi``'s upstream offset with a higher downstream offset than
        ``hi``'s (below ``replica_end``: :meth:`recopied_since`), the highest such; None when there is none. Where
        that history started is not always in the archive (the exact drill, pattern twins: MM2 copied a partition
        again from 0, and the archive held only the later history's sync at the bracket's top), so it may have
        copied every position below ``hi`` again: a bracket up to ``hi`` is no longer proof of the copy a group
        reads next. A later history none of whose syncs at or below ``hi`` is archived cannot be seen here."""
        j = int(np.searchsorted(self._ups, hi.upstream, side="right"))
        top = self._sync(self._prefix_top[j])
        return top if hi.downstream < top.downstream < replica_end else None

    def _next_reached_again(self, i: int, downstream: int, replica_end: int) -> Sync | None:
        """:meth:`reached_again` of ``syncs[i]``, the lowest sync above the position, where it is at or past
        ``downstream`` (the copy an answer names: the two then span one history; below it they span none)."""
        if i >= len(self._ups) or self._downs[i] < downstream:
            return None
        return self.reached_again(self._sync(i), replica_end)

    def copied_again_after(self, upstream: int, downstream: int, replica_end: int | None = None) -> bool:
        """Whether a later MM2 history copied the record at ``upstream`` again after ``downstream`` (the copy an
        answer names): a sync at or below ``upstream`` with a higher downstream offset, below ``replica_end`` when it
        is known (:meth:`recopied_since`), or one that may have (:meth:`reached_again` of the next sync above it).
        Where the later copy is not searched - the source lost, or replication not finished - an earlier history's
        exact sync, bracket or tail is then its first copy: safe, not exact."""
        i = int(np.searchsorted(self._ups, upstream, side="right"))
        end = np.iinfo(np.int64).max if replica_end is None else replica_end
        return bool(i) and (
            self.recopied_since(i, Sync(upstream, downstream), end)
            or self._next_reached_again(i, downstream, end) is not None
        )

    def restarts_above(
        self,
        upstream: int,
        downstream: int,
        replica_end: int | None = None,
        drained: tuple[int, int] | None = None,
        reach: int | None = None,
    ) -> list[tuple[Sync, Sync]]:
        """The pairs of syncs ``(p, b)`` written one after the other (in downstream order: the order MM2 wrote them)
        between which an MM2 restart MM2 wrote no sync for may have copied the record at ``upstream`` - whose copy an
        answer places at ``downstream`` or above - again (E9). MM2 keeps one pending sync per partition and replaces
        it before writing it, so a restart's first sync can be missing; the first it writes, ``b``, is then at or past
        where it began, and its copies, the earlier history's tail included, lie in ``(p.downstream, b.downstream]``.
        Only the records can tell whether there was one: the upstream offsets need not go back, nor the replica's
        offsets outnumber the source's (markers and aborted records MM2 does not copy make room for the copies). So
        every pair is taken where it could hold one: ``b`` at or past ``upstream`` and past ``downstream``, and
        either the upstream offsets going back (``b.upstream <= p.upstream``: a restart for sure) or ``p`` close
        enough above ``downstream``: to copy the record again before ``b``, a restart copies again every record the
        earlier history copied from there up to ``p`` (``b`` past ``p``), and fits them between the two syncs, at most
        one marker per copy: ``p.downstream - answer < 2 * (b.downstream - p.downstream)``, for any answer up to
        ``reach`` (default ``downstream``: a lookup may answer anywhere in its bracket). Syncs at or past
        ``replica_end`` are no history of the replica. Replication finished (``drained``: the source's and the
        replica's ends), the last offsets of both stand for a last sync (a restart after MM2's last sync written).
        The bound assumes what lies between the answer and ``p`` are copies the restart copies again: a source
        compacted between the two histories, or a restart that went back below an earlier one's start, can break it
        (docs/architecture.md, known limits)."""
        reach = downstream if reach is None else max(reach, downstream)
        downs, ups = self._by_d_downs, self._by_d_ups
        n = len(downs) if replica_end is None else int(np.searchsorted(downs, replica_end, side="left"))

        def pair(j: int) -> tuple[Sync, Sync]:
            return Sync(int(ups[j - 1]), int(downs[j - 1])), Sync(int(ups[j]), int(downs[j]))

        j0 = max(1, int(np.searchsorted(downs[:n], downstream, side="right")))
        # close enough: from j0 up to the first pair past which no gap is wide enough (a bisection: built once)
        j1 = min(n, j0 + int(np.searchsorted(self._close_until[j0:], reach, side="right")))
        js = set()
        if j0 < j1:
            p_d, b_d, b_u = downs[j0 - 1 : j1 - 1], downs[j0:j1], ups[j0:j1]
            js.update((np.nonzero((b_u >= upstream) & (p_d - reach < 2 * (b_d - p_d)))[0] + j0).tolist())
        back = self._back_at[np.searchsorted(self._back_at, j0) : np.searchsorted(self._back_at, n)]
        js.update(int(j) for j in back if downs[j] > downstream and ups[j] >= upstream)
        out = [pair(j) for j in sorted(js)]
        if drained is not None and n and drained[0] > 0 and drained[1] - 1 > downs[n - 1]:
            p, b = Sync(int(ups[n - 1]), int(downs[n - 1])), Sync(drained[0] - 1, drained[1] - 1)
            if (
                b.downstream > downstream
                and b.upstream >= upstream
                and (b.upstream <= p.upstream or p.downstream - reach < 2 * (b.downstream - p.downstream))
            ):
                out.append((p, b))
        return out

    def history_floor(self, upstream: int, replica_end: int | None = None) -> tuple[int, bool, int] | None:
        """Rule 10, the source lost: ``(replica offset, cut short, archive top)`` to resume a group at ``upstream`` at
        when no rule proves its copy - the newest sync ``(u, d)`` at or below it (the highest ``d``: MM2's own
        translation, over every archived sync rather than MM2's sparse store), ``d`` when ``u == upstream`` else
        ``d + 1``; None without such a sync. Unless that sync's history was cut short: MM2 restarted (a history
        starts where upstream offsets go back) and was stopped - by the outage - before getting as far as an
        earlier history had. The records past its reach then have their only copies in the earlier history, below
        ``d``: the syncs from ``d`` on must reach an upstream offset at least as high as every sync before ``d``
        does, else the newest sync that satisfies it is taken (``cut short`` True), and where none does, None. What
        lies past the last sync of each history is not in the syncs: an earlier history's unsynced tail can still
        be longer than the later one's (MM2's checkpoint skips it as well). Syncs at or past ``replica_end`` (a
        recreated replica topic's predecessor) are no history of this replica and are left out. ``archive top``:
        the highest downstream offset of the syncs taken into account (a checkpoint past it was translated from
        syncs the archive does not hold)."""
        n = (
            len(self._by_d_downs)
            if replica_end is None
            else int(np.searchsorted(self._by_d_downs, replica_end, side="left"))
        )
        if not n:
            return None
        (ok_u, ok_d, ok_top), (all_u, all_d, all_top) = self._floor_index(n)
        i = int(np.searchsorted(ok_u, upstream, side="right"))
        if not i:
            return None
        j = int(ok_top[i - 1])
        u, d = int(ok_u[j]), int(ok_d[j])
        k = int(np.searchsorted(all_u, upstream, side="right"))
        newest = int(all_d[int(all_top[k - 1])])
        return d + (0 if u == upstream else 1), d != newest, int(self._by_d_downs[n - 1])

    def _floor_index(self, n: int):
        """Rule 10's arrays for the first ``n`` syncs in downstream order (built once per replica end): those whose
        history reached as far as every earlier sync, and all of them, each sorted by upstream offset with the
        index of the highest downstream offset of every prefix - a query is two bisections."""
        got = self._floor_cache.get(n)
        if got is None:
            ups, downs = self._by_d_ups[:n], self._by_d_downs[:n]
            before = np.concatenate([[-1], np.maximum.accumulate(ups)[:-1]])
            after = np.maximum.accumulate(ups[::-1])[::-1]

            def by_upstream(mask):
                u, d = ups[mask], downs[mask]
                order = np.lexsort((d, u))
                u, d = u[order], d[order]
                return u, d, _first_max_index(d) if len(d) else np.array([], dtype=np.int32)

            got = self._floor_cache[n] = (by_upstream(after >= before), by_upstream(np.ones(n, dtype=bool)))
        return got

    def search_range(
        self, upstream: int, i: int, drained: tuple[int, int] | None, replica_start: int | None
    ) -> Unproven:
        """Rule 7's range: where some copy of the record at ``upstream`` (the next record the group reads) must be.
        After any sync ``(u, d)`` with ``u <= upstream`` the record is copied - by that sync's history, or, if MM2
        died before reaching it, by the next history, which resumes at or before where the last one stopped - so
        the range starts at the highest such ``d``. It ends at the lowest sync above ``upstream`` copied after that
        start (its history, or an earlier one, copied the record before it); past every sync, at the drained
        replica's end; below the first sync it starts at the replica's log start."""
        top = self._prefix_top[i]
        lo = self._sync(top) if top >= 0 else None
        if lo is None and replica_start is not None:
            lo = Sync(0, replica_start)
        floor = lo.downstream if lo is not None else -1
        hi = self._lowest_above(floor)
        if hi is not None:
            return Unproven((lo, hi))
        if drained is not None and upstream <= drained[0]:
            # a tail that is not gap-free (markers, aborted batches): the drained ends bound the copy's range
            return Unproven((lo, Sync(*drained)), drained_tail=True)
        return Unproven((lo, None))

    def copy_at_least(self, upstream: int, drained: tuple[int, int] | None = None) -> int | None:
        """A proven lower bound on where a group at ``upstream`` should resume, on a drained partition: the highest
        downstream offset of the syncs at or below it. MM2 copies in order and every history restarts at or before
        where the last one stopped, so once replication finished every record from that sync's on has a copy after
        it. None when not drained (MM2 may have died while re-copying: records past its reach then have their only
        copies earlier) or without such a sync. What the report counts re-reads from where it cannot count them
        exactly."""
        if drained is None or upstream >= drained[0]:
            return None
        top = self._prefix_top[int(np.searchsorted(self._ups, upstream, side="right"))]
        return None if top < 0 else int(self._downs[top])

    def _lowest_above(self, floor: int) -> Sync | None:
        """The sync with the lowest downstream offset above ``floor`` (the lowest upstream among equals), or None.
        Every caller's ``floor`` is the highest downstream offset of the syncs at or below its upstream offset U (or
        below all of them): every sync past it is above U, so this is "the lowest sync above U copied after
        ``floor``" - one bisection in the downstream order, however many MM2 histories interleave."""
        j = int(np.searchsorted(self._by_d_downs, floor, side="right"))
        return self._by_d(j) if j < len(self._by_d_downs) else None

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

    def _by_d(self, j) -> Sync:
        return Sync(int(self._by_d_ups[j]), int(self._by_d_downs[j]))

    def _back_proven(self, downstream: int, replica_end: int | None) -> Back | None:
        n = len(self._by_d_downs)
        first = int(np.searchsorted(self._by_d_downs, downstream, side="left"))
        if first < n and self._by_d_downs[first] == downstream:
            # a copy at D (the lowest upstream of them): the record the group reads next is the origin's record at u
            s = self._by_d(first)
            return Back(s.upstream, EXACT_SYNC, (s, None))
        # the bracket of D in the downstream order; syncs of one history are increasing in both offsets
        j = int(np.searchsorted(self._by_d_downs, downstream, side="right"))
        lo = self._by_d(j - 1)
        hi = self._by_d(j) if j < n else None
        if hi is not None and hi.upstream - lo.upstream == hi.downstream - lo.downstream and hi.upstream > lo.upstream:
            return Back(lo.upstream + (downstream - lo.downstream), BRACKET, (lo, hi))
        if hi is None and replica_end is not None and lo.downstream < replica_end and downstream <= replica_end:
            return Back(lo.upstream + (downstream - lo.downstream), DRAINED_TAIL, (lo, None))
        return None

    def floor(self, downstream: int) -> Back | None:
        """Rule 9: the highest upstream offset of the syncs at or below ``downstream`` (None: no such sync)."""
        k = self._floor_at[int(np.searchsorted(self._by_d_downs, downstream, side="right"))]
        if k < 0:
            return None
        f = self._by_d(k)
        return Back(f.upstream, SYNC_FLOOR, (f, None))


def _first_max_index(values):
    """For each i, the index of the first occurrence of max(values[:i + 1])."""
    run = np.maximum.accumulate(values)
    new = np.concatenate([[True], run[1:] > run[:-1]])
    return np.maximum.accumulate(np.where(new, np.arange(len(values), dtype=np.int32), 0))


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
FIRST_COPY = "first_copy"  # rule 7's first of several copies, no later one anchored: safe, may re-read
AT_END = "at_end"
SUPERSEDED_SYNC = "superseded_sync"  # rule 1's first copy where the later copy was not found: safe, re-reads
ARCHIVE_FLOOR = "archive_floor"  # the source lost, nothing proven: rule 10's floor, MM2's own rule over every sync
CHECKPOINT = "checkpoint"
#: the one classification of a plan row's rule (the report's counts, the approval's, readiness's kinds): a rule whose
#: offset is the replica offset of the group's very position - its re-read is a count (0 where it resumes there).
#: An allow-list: every other rule (MM2's checkpoint, a sync floor failing over or back, a superseded sync's first
#: copy, any rule added later) is safe at best and never called exact
HOME = "home_"  # failing back: the row's rule is home_<rule> (stages.failback)
EXACT_RULES = frozenset(
    {EXACT_SYNC, BRACKET, DRAINED_TAIL, RECORD_LOOKUP, AT_END, HOME + EXACT_SYNC, HOME + BRACKET, HOME + DRAINED_TAIL}
)


#: each rule in words, for the people who approve a plan or read its report (the counts stand beside them)
RULE_TEXT = {
    EXACT_SYNC: "exact: MM2 recorded the copy of the group's next record",
    BRACKET: "exact: between two offset syncs MM2 copied one record per offset",
    DRAINED_TAIL: "exact: after the last sync, the finished replication copied one record per offset",
    RECORD_LOOKUP: "exact: the group's next record was found on the replica",
    FIRST_COPY: "safe, may re-read: the first of several copies of the group's next record on the replica (a later "
    "one, MM2's copy after a restart, could not be anchored record for record)",
    AT_END: "exact: nothing left to read - the replica's end",
    SUPERSEDED_SYNC: "safe, re-reads: the first copy of a record MM2 copied again after a restart",
    ARCHIVE_FLOOR: "conservative, re-reads: the source lost, the newest archived offset sync at or below the group's "
    "position in an MM2 history that got as far as every earlier one (MM2's own rule, over every "
    "archived sync)",
    "sync_floor": "safe, re-reads: the newest offset sync at or below the group's position",
    "home_sync_floor": "safe, re-reads: failing back, the newest offset sync at or below the position",
    REPLICA_START: "safe, re-reads: the replica's first record - no offset sync at or below the group's position "
    "(behind retention: MM2 never checkpointed it)",
    HOME + EXACT_SYNC: "exact: failing back, MM2 recorded the copy the group read last",
    HOME + BRACKET: "exact: failing back, between two offset syncs one record per offset",
    HOME + DRAINED_TAIL: "exact: failing back, the replica's tail one record per offset",
    CHECKPOINT: "MM2's checkpoint as it is: conservative (re-reads), not proven by the records",
}


def is_exact(rule: str | None) -> bool:
    """Whether a plan row's ``rule`` places the group exactly (:data:`EXACT_RULES`)."""
    return rule in EXACT_RULES


@dataclass(frozen=True)
class Evidence:
    """What was read to check a translation (None: not read; see :mod:`mm2_failover.rules.evidence`, which builds these
    from complete reads only)."""

    translation: Translation | Unproven
    verified: bool | None = None  # the source's next record is the target's record at the translated offset
    one_to_one: bool | None = None  # the bracket's downstream range holds one record per offset, none twice
    lookup: int | None = None  # where the copy of the record at U was found inside the bracket
    lookup_first_of_many: bool = False  # the lookup fell back to the first of several copies (E6): not exact
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
        return ev.lookup, FIRST_COPY if ev.lookup_first_of_many else RECORD_LOOKUP
    if isinstance(t, Unproven) and t.superseded is not None:  # rule 1's first copy: safe, re-reads since the restart
        return t.superseded.downstream, SUPERSEDED_SYNC
    if isinstance(t, Unproven) and t.first_copy is not None and (t.first_copy.rule == EXACT_SYNC or ev.one_to_one):
        # the first copy of a sync or a bracket a later history may have copied again (a bracket proven one to one on
        # the target, rule 6): safe, may re-read what that history copied before it
        return t.first_copy.downstream, SUPERSEDED_SYNC
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
        topic = key[2 : 2 + n].decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedSync("topic not UTF-8") from None
    partition = struct.unpack(">i", key[2 + n :])[0]
    if len(value) != 16:
        raise MalformedSync(f"value of {len(value)} bytes, not 16")
    up, down = struct.unpack(">qq", value)
    if partition < 0 or up < 0 or down < 0:
        raise MalformedSync("negative partition or offset")
    return topic, partition, Sync(up, down)


def encode_sync(topic: str, partition: int, upstream: int, downstream: int) -> tuple[bytes, bytes]:
    raw = topic.encode()
    return struct.pack(">h", len(raw)) + raw + struct.pack(">i", partition), struct.pack(">qq", upstream, downstream)
