"""Generated worlds for the proof path's property tests (``tests/unit/test_evidence.py``, ``test_truth.py``,
``test_drain.py``): one source partition, MM2 copying it to its replica with the ways real MM2 and Kafka behave,
the offset syncs an archive holds, groups on the partition - and the truth of every position, to compare every
committed offset and every figure with (:func:`violations`, :func:`plan_violations`). Read through the in-memory
cluster of :mod:`testbed.memlog`, with Kafka's semantics.

A world: one source partition (data records, transaction markers, aborted records; producer-retry twins - the same
record written twice with others between -; compaction), MM2 copying it (restarts that copy again; exactly-once
support with transactions, commit markers and aborted copies on the target; a source consumer reading uncommitted),
sparse offset syncs (an archive that may end before the newest ones), retention on both sides (group positions
below the source's log start), the source reachable (drained, or replication not known to be finished) or lost (MM2
stopped anywhere), several groups far apart on the partition, small read budgets and scans, and reads that fail. Four
seeds in twenty draw a shape that past holes needed and the uniform draw makes once in thousands of worlds or never
(:func:`shape_of`)."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from dataclasses import dataclass, field

from mm2_failover.rules import evidence as ev
from mm2_failover.rules import translate as tr
from mm2_failover.rules.translate import SyncIndex
from testbed.memlog import ABORTED, COMPACTED, DATA, MARKER, MemoryLog, Partition

SRC, REP = ("orders", 0), ("primary.orders", 0)

# ------------------------------------------------------------------------------------------ the world


@dataclass
class World:
    source: Partition
    target: Partition
    copy_of: dict[int, int]  # target offset -> source offset (visible copies)
    syncs: list[tuple[int, int]]
    reachable: bool
    drained: tuple[int, int] | None
    positions: list[int]
    budget: int
    scan: int
    fail_rate: float
    facts: dict = field(default_factory=dict)
    mm2_syncs: list[tuple[int, int]] = field(default_factory=list)  # every sync MM2 wrote (the archive may end sooner)

    def limit(self, u: int) -> int:
        """The highest replica offset a group at source position ``u`` may resume at without losing a record: what
        the group would still read on the source - each data record at or after ``u`` the source holds (or lost to
        retention unread) that has a copy on the replica - must still be readable from there, content for content
        (a consumer sees contents: a content twin's copy delivers the same record)."""
        visible = {d: s for d, s in self.copy_of.items() if d >= self.target.start}
        need = Counter(
            self.source.entries[s][1] for s in set(visible.values()) if s >= u and self.source.entries[s][0] == DATA
        )
        if not need:
            return self.target.end
        have: Counter = Counter()
        for d in range(self.target.end - 1, self.target.start - 1, -1):
            if d in visible:
                have[self.target.entries[d][1]] += 1
                if all(have[c] >= n for c, n in need.items()):
                    return d
        raise AssertionError("a needed record has no copy")


def _skips_more(self, u: int, answer: int, baseline: int) -> bool:
    """Whether resuming at ``answer`` loses a record (content) that resuming at ``baseline`` keeps."""
    visible = {d: s for d, s in self.copy_of.items() if d >= self.target.start}
    need = Counter(
        self.source.entries[s][1] for s in set(visible.values()) if s >= u and self.source.entries[s][0] == DATA
    )

    def kept(frm: int) -> Counter:
        return Counter(self.target.entries[d][1] for d in visible if d >= frm)

    at_answer, at_baseline = kept(answer), kept(baseline)
    return any(min(n, at_answer[c]) < min(n, at_baseline[c]) for c, n in need.items())


World.skips_more = _skips_more


def _lost_behind_a_sync(self, u: int, answer: int) -> list[int]:
    """The source records a group at ``u`` resuming at ``answer`` never reads (no copy of their content at or after
    it) that an MM2 history before ``answer`` copied up to one of its syncs: at or below the highest upstream offset
    of the syncs below ``answer``. What only an earlier history's unsynced tail holds is not in the syncs."""
    visible = {d: s for d, s in self.copy_of.items() if d >= self.target.start}
    have = {self.target.entries[d][1] for d in visible if d >= answer}
    reach = max((s for s, d in self.syncs if d < answer), default=-1)
    return sorted(
        {
            s
            for d, s in visible.items()
            if u <= s <= reach and self.source.entries[s][0] == DATA and self.target.entries[d][1] not in have
        }
    )


World.lost_behind_a_sync = _lost_behind_a_sync


def _reads_in_order(self, u: int, answer: int) -> bool:
    """Whether a group at source position ``u`` resuming at replica offset ``answer`` reads what it would still read
    on the source in the source's order (E6's "record for record"): the contents of the replica's records from
    ``answer`` on hold, as a subsequence, those of the data records at or after ``u`` with a copy on the replica (the
    records :meth:`World.limit` counts), in source order. Copies MM2 made twice may come between them; the source's
    records in another order may not."""
    visible = {d: s for d, s in self.copy_of.items() if d >= self.target.start}
    copied = set(visible.values())
    read = iter(self.target.entries[d][1] for d in sorted(visible) if d >= answer)
    return all(
        any(c == want for c in read)
        for s, (k, want) in enumerate(self.source.entries)
        if s >= u and k == DATA and s in copied
    )


World.reads_in_order = _reads_in_order


#: Shapes that past holes needed and that the uniform draw makes once in thousands of worlds or never (docs/architecture.md, "Every
#: mutation below re-introduces a hole"). Each is a world real MM2 and Kafka make: the draw only puts its restarts, its
#: syncs and its groups where they expose the most, and reads its evidence whole. One seed in twenty draws each
#: (:func:`shape_of`, from a stream of its own: every other seed's world is the uniform draw's, unchanged).
#: MM2 (at least once) restarted 4 to 20 records back, with a larger offset.lag.max: the earlier history's syncs are
#: dense, the later one's sparse; groups in the range copied twice; drained, or the source lost while MM2 copied the
#: range again (the later history cut short); no twins, compaction, uncommitted reads, replica retention or stale
#: archive
RECOPIED = "recopied"
#: a transactional producer's marker after every few records and MM2 with exactly-once support committing as many
#: copies (its markers elsewhere: brackets that balance with the arithmetic off by one); producer retries; sparse
#: syncs; groups at a retried record's first write or just before it; drained
RETRIES = "retries"
#: records retried twice (written again right after, and again after one or two others); MM2 (at least once)
#: restarted right after copying a third write, resuming a record or a few back; sparse syncs; groups at the first
#: write; drained
PERMUTED = "permuted"
#: MM2 (at least once, dense syncs) restarted 4 to 20 records back once, and wrote no sync of the restarted history
#: below one of the earlier history's sync's upstream offset (MM2 keeps one pending sync per partition and replaces it
#: with newer ones before it writes it: the exact drill's archives); groups at the earlier history's last sync below
#: it, between the two, and at or past it (in two restarts of five the first sync written lies past where the earlier
#: history stopped, or none is written: with no drained ends either, nothing shows it - the known limit in docs/architecture.md - and no
#: group is placed there); the source up,
#: replication finished (drained) or not known to be (no drained ends: readiness, or a partition the drain check did
#: not cover); no twins, compaction, uncommitted reads, replica retention or stale archive
UNSYNCED = "unsynced"


def shape_of(seed: int) -> str | None:
    r = random.Random(seed ^ 0x5A9E).random()
    return RECOPIED if r < 0.05 else RETRIES if r < 0.1 else PERMUTED if r < 0.15 else UNSYNCED if r < 0.2 else None


def world(seed: int) -> World:
    rnd = random.Random(seed)
    shape = shape_of(seed)
    n = rnd.randint(4, 90)
    kinds = rnd.choices([DATA, MARKER, ABORTED], [0.84, 0.08, 0.08], k=n)
    if shape == RETRIES:  # a transactional producer's commit marker after every src_txn records, from any phase
        src_txn = rnd.randint(2, 5)
        phase = rnd.randrange(src_txn + 1)
        kinds = [MARKER if (i + phase) % (src_txn + 1) == src_txn else DATA for i in range(n)]
    twin_rate = (
        rnd.choice([0, 0, 0.2]) if shape is None else {RECOPIED: 0, RETRIES: 0.4, PERMUTED: 0.1, UNSYNCED: 0}[shape]
    )
    contents: list[object] = []
    for s in range(n):
        earlier = [contents[i] for i in range(max(0, s - 3), s) if kinds[i] == DATA]
        contents.append(rnd.choice(earlier) if earlier and rnd.random() < twin_rate else ("r", s))
    if shape == PERMUTED:  # records retried twice: written again right after, and again after one or two others
        for s in range(n - 3):
            if kinds[s] == DATA and rnd.random() < 0.1:
                for t in (s + 1, s + 3 + rnd.randint(0, 1)):
                    if t < n:
                        kinds[t], contents[t] = DATA, contents[s]
    compact_rate = rnd.choice([0, 0, 0.1]) if shape is None else 0
    compacted = {s for s in range(n) if kinds[s] == DATA and rnd.random() < compact_rate}
    compacted_first = {s for s in compacted if rnd.random() < 0.5}  # removed before MM2 got there
    eos = rnd.random() < 0.3 if shape is None else shape == RETRIES
    uncommitted = not eos and rnd.random() < 0.5 if shape is None else False
    copied = {DATA} | ({ABORTED} if uncommitted else set())
    reachable = rnd.random() < 0.6 if shape in (None, RECOPIED) else True
    known_drained = shape != UNSYNCED or rnd.random() < 0.5
    # a lost source dies at any moment of MM2's copying (a number of steps), also right after a restart: the later
    # history then has not re-reached where the earlier one got to
    steps_left = 10**9 if reachable or shape == RECOPIED or rnd.random() < 0.3 else rnd.randint(0, 2 * n)
    stop_at = n
    target = Partition()
    copy_of: dict[int, int] = {}
    syncs: list[tuple[int, int]] = []
    lag_max = (
        rnd.choice([0, 2, 5, 100])
        if shape is None
        else rnd.choice({RECOPIED: [0, 2], RETRIES: [5, 100], PERMUTED: [100], UNSYNCED: [0, 2, 6, 12]}[shape])
    )
    restarts = rnd.randint(0, 2) if shape is None else rnd.randint(1, 3) if shape == UNSYNCED else rnd.randint(1, 2)
    floor_ = 0  # UNSYNCED: MM2's committed progress never goes back, so no restart starts below an earlier one's start
    recopied_ranges: list[tuple[int, int]] = []  # (restart, where the history before it stopped)
    unsynced_below = None  # UNSYNCED: the restarted history writes no sync below this upstream offset
    hidden: list[tuple[int, int]] = []  # UNSYNCED: (restart, the earlier history's last sync below unsynced_below)
    s, fresh, last_sync_d = 0, True, -(10**9)
    txn: list[tuple[int, int]] = []  # EOS: (source, target) of the open transaction's copies
    txn_size = rnd.randint(1, 5) if shape != RETRIES else src_txn  # RETRIES: MM2 commits as many copies
    committed_to = 0

    def sync(s_: int, d_: int) -> None:
        nonlocal fresh, last_sync_d
        if unsynced_below is not None and s_ < unsynced_below:
            return  # replaced while pending: written at last as the first at or past unsynced_below (fresh)
        if fresh or (d_ - last_sync_d > lag_max and rnd.random() < 0.8):
            syncs.append((s_, d_))
            last_sync_d, fresh = d_, False

    def restart_now() -> bool:
        if shape == PERMUTED:  # right after copying a record's third write (a record retried twice)
            third = kinds[s - 1] in copied and contents[: s - 1].count(contents[s - 1]) >= 2
            return rnd.random() < (0.6 if third else 0.01)
        return rnd.random() < (0.06 if shape is None else 0.1)

    while s < stop_at and steps_left > 0:
        steps_left -= 1
        if kinds[s] in copied and s not in compacted_first:
            d = target.append(DATA, contents[s])
            copy_of[d] = s
            if eos:
                txn.append((s, d))
            else:
                sync(s, d)
        s += 1
        if eos and (len(txn) >= txn_size or s == stop_at):
            target.append(MARKER)  # commit: MM2 emits the syncs of committed copies only
            for s_, d_ in txn:
                sync(s_, d_)
            txn, committed_to = [], s
        if restarts and restart_now() and s > 2:
            restarts -= 1
            fresh = True
            stopped = s
            if eos:  # the open transaction is aborted; MM2 resumes after the last committed one
                for _s, d_ in txn:
                    target.entries[d_] = (ABORTED, None)
                    del copy_of[d_]
                if txn:
                    target.append(MARKER)
                txn, s = [], committed_to
            elif shape == PERMUTED:  # from its last committed progress: a record or a few before
                s -= rnd.choice([1, 1, 1, 2, 3])
            elif shape in (RECOPIED, UNSYNCED):  # far enough back for the earlier history's syncs to bracket them
                s = rnd.randint(max(floor_, s - 20), max(floor_, s - 4))
                floor_ = s if shape == UNSYNCED else 0
                ups = sorted({u_ for u_, _d in syncs if s < u_ < stopped}) if shape == UNSYNCED else []
                if shape == UNSYNCED and rnd.random() < 0.4:  # the first sync written past where the earlier
                    unsynced_below = stopped + rnd.randint(0, 6)  # history stopped: no upstream offset goes back
                    hidden.append((s, ups[-1] if ups else s, len(syncs), unsynced_below))
                elif len(ups) >= 2:  # the first sync written at one of the earlier history's, not the first above s
                    k = rnd.randrange(1, len(ups))
                    unsynced_below = ups[k]
                    hidden.append((s, ups[k - 1], len(syncs), unsynced_below))
                lag_max = 100  # restarted with a larger offset.lag.max: the later history's syncs are sparse
                if not reachable:  # the source lost while MM2 copied the range again: the later history cut short
                    steps_left = rnd.randint(0, stopped - s)
            else:
                s = rnd.randint(max(0, s - 20), s - 1)
            recopied_ranges.append((s, stopped))
    for _s, d_ in txn:  # MM2 stopped with a transaction open: aborted (by its timeout) before the failover
        target.entries[d_] = (ABORTED, None)
        del copy_of[d_]
    source = Partition([(k, contents[i]) for i, k in enumerate(kinds)])
    for s_ in compacted:
        source.entries[s_] = (COMPACTED, None)
    if rnd.random() < (0.5 if shape == UNSYNCED else 0.3):
        source.start = rnd.randint(0, n)  # retention moved the source's log start
    if rnd.random() < 0.15 and shape not in (RECOPIED, UNSYNCED):
        target.start = rnd.randint(0, max(0, target.end // 3))
    archived, every_sync = len(syncs), list(syncs)
    if syncs and rnd.random() < 0.2 and shape not in (RECOPIED, UNSYNCED):
        syncs = syncs[: rnd.randint(1, len(syncs))]  # the archive ends before the newest syncs
    drained = (n, target.end) if reachable and known_drained else None
    positions = {rnd.randint(0, n) for _ in range(rnd.randint(1, 6))}
    if shape == RECOPIED:  # groups inside the re-copied ranges
        positions |= {rnd.randint(lo, hi) for lo, hi in recopied_ranges for _ in range(3)}
    elif shape == UNSYNCED:  # groups where no sync shows the restart (E9), at its last sync and past
        for restart, last, first, below in hidden:
            top = min(below, n)
            positions |= {rnd.randint(restart, last), last, rnd.randint(last, top), rnd.randint(top, n)}
            if (
                first >= len(every_sync) and drained is None
            ):  # the known limit (docs/architecture.md): no sync of the restart
                positions = {
                    p
                    for p in positions  # and no drained ends - nothing shows it: no group there
                    if not restart <= next((i for i in range(p, n) if kinds[i] == DATA), n)
                }
    elif shape is not None:  # groups at a retried record's first write, or just before it
        retried = [i for i in range(n) if contents[i + 1 :].count(contents[i]) >= (2 if shape == PERMUTED else 1)]
        positions |= (
            {max(0, rnd.choice(retried) - rnd.randint(0, shape == RETRIES)) for _ in range(3)} if retried else set()
        )
    reads = (
        (rnd.choice([2, 5, 20, 10**6]), rnd.choice([1, 3, 10, 1000]), rnd.choice([0, 0, 0.2]))
        if shape is None
        else (10**6, 1000, 0)
    )  # a shape's evidence is read whole: what the rules make of it is the point
    w = World(source, target, copy_of, syncs, reachable, drained, sorted(positions), *reads)
    w.facts = {
        "twins": twin_rate > 0,
        "compacted": bool(compacted),
        "eos": eos,
        "uncommitted": uncommitted,
        "recopied": len(set(copy_of.values())) < len(copy_of),
        "truncated": s < n,
        "stale_archive": len(syncs) < archived,
        "shape": shape,
    }
    w.mm2_syncs = every_sync
    return w


def outcomes(w: World, seed: int, groups: int | None = None, one_proof_per_want: bool = False) -> dict:
    """Each position's outcome (key: the position), or with ``groups``: each position asked by that many groups
    at once (key: (group, position)). ``one_proof_per_want``: without evidence rule E10 (each want its own case,
    as before it), the reference E10 is checked against."""
    fail_rnd = random.Random(seed ^ 0x5EED)
    fails: dict = {}

    def fail(tp, lo, hi):
        return fails.setdefault((tp, lo, hi), fail_rnd.random() < w.fail_rate)

    src = MemoryLog("source", {SRC: w.source}, fail)
    tgt = MemoryLog("target", {REP: w.target}, fail)
    index = SyncIndex(w.syncs)
    keys = [u for u in w.positions] if groups is None else [(g, u) for u in w.positions for g in range(groups)]
    wants = [ev.Want(k, "a", SRC, REP, k if groups is None else k[1], index, w.drained, w.target.start) for k in keys]
    sources = {"a": src if w.reachable else None}
    if one_proof_per_want:
        cases = [ev._Case(x, lost=sources.get(x.alias) is None) for x in wants]
        by_case = ev._prove_cases(cases, sources, tgt, w.budget, w.scan)
        return {c.want.key: by_case[id(c)] for c in cases}
    return ev.prove(wants, sources, tgt, w.budget, w.scan)


def mm2_checkpoint(w: World, u: int) -> int | None:
    """MM2's own translation (its OffsetSyncStore): the newest sync at or below ``u`` - the highest downstream offset
    among them -, plus one unless it is at ``u``; None: no such sync (MM2 writes no checkpoint). From every sync MM2
    wrote, the ones an archive that ends sooner lacks included (MM2's sparse store is not modelled: in these worlds
    its checkpoint is as far on as the syncs allow)."""
    below = [(d, s) for s, d in (w.mm2_syncs or w.syncs) if s <= u]
    if not below:
        return None
    d, s = max(below)
    return d if s == u else d + 1


def violations(seed: int) -> list:
    """Every answer that would lose a record; with the source reachable, every answer from which the group would read
    the source's records out of their order (:meth:`World.reads_in_order`: E6's "record for record"); in clean
    worlds, every position not answered exactly. With the source lost, the bar is MM2's own checkpoint: never lose a
    record it would not lose (MM2 may have died while re-copying after a restart; records whose only copies precede
    the restart are then skipped by any translation from the syncs, its checkpoints included - see docs/architecture.md, "What
    counts as evidence")."""
    w = world(seed)
    got = outcomes(w, seed)
    bad = []
    clean = (
        w.drained is not None
        and not any(w.facts[k] for k in ("twins", "compacted", "recopied", "uncommitted"))
        and w.budget > 10**5
        and w.scan > 100
        and not w.fail_rate
        and w.source.start == 0
        and w.target.start == 0
        and len(w.syncs) > 0
    )
    # every record a consumer reads on the replica is a copy of one source record, and the archive holds every sync
    # MM2 wrote: an answer called exact (translate.EXACT_RULES: the report's "re-read 0") must be the true limit
    plain = (
        w.reachable
        and not any(w.facts[k] for k in ("twins", "compacted", "eos", "uncommitted", "stale_archive"))
        and w.target.start == 0
    )
    for u, o in got.items():
        limit = w.limit(u)
        if not w.reachable and o.answer is not None and o.answer[0] > limit:
            # what MM2's checkpoint would skip anyway is not counted against the answer: only the records it keeps
            cp = mm2_checkpoint(w, u)
            if cp is not None and cp > limit and not w.skips_more(u, o.answer[0], cp):
                limit = o.answer[0]
        if o.answer is not None and o.answer[1] == tr.ARCHIVE_FLOOR and w.lost_behind_a_sync(u, o.answer[0]):
            # issue 50 item 7: rule 10 keeps every record an earlier MM2 history copied up to its last sync - what
            # MM2's checkpoint skips when the outage cut the restarted history short
            bad.append(("LOST BEHIND A SYNC", u, o.answer, w.lost_behind_a_sync(u, o.answer[0])))
        elif o.answer is not None and o.answer[0] > limit:
            bad.append(("LOST", u, o.answer, limit))
        elif w.reachable and o.answer is not None and not w.reads_in_order(u, o.answer[0]):
            bad.append(("OUT OF ORDER", u, o.answer, limit))  # E6: "record for record", not the same records
        elif o.position_at_least is not None and o.position_at_least > limit:
            bad.append(("AT LEAST TOO HIGH", u, o.position_at_least, limit))  # re-reads counted from below
        elif o.answer is None and any(s == o.translated for s, _d in w.syncs):
            # MM2 recorded the copy of the group's next record: an answer says so (exact_sync, or the first copy of a
            # record a later history copied again or may have, E7), never MM2's checkpoint "not proven by the records"
            bad.append(("SYNC LEFT TO THE CHECKPOINT", u, o.translated))
        elif clean and u >= min(s for s, _d in w.syncs) and (o.answer is None or o.answer[0] != limit):
            bad.append(("NOT EXACT", u, o.answer, limit))
        elif plain and o.answer is not None and tr.is_exact(o.answer[1]) and o.answer[0] != limit:
            bad.append(("EXACT BUT RE-READS", u, o.answer, limit))  # issue 50 item 3: the label is a claim
    return bad


# ------------------------------------------------------------------------------------------ through the plan

GROUP = "g"


def checkpoint_position(w: World, u: int, rnd: random.Random) -> int:
    """Where the group was when MM2 last checkpointed it: where it is (``u``), behind (MM2 checkpoints every
    emit.checkpoints.interval.seconds), or - the source reachable - ahead: the group was reset backwards on the source
    after MM2's newest checkpoint (with the source lost, nobody knows of a rewind: the checkpoint is the position)."""
    if not w.reachable:
        return u
    return rnd.choice([u, rnd.randint(0, u), rnd.randint(u, len(w.source.entries))])


def plan_for(w: World, u: int, c: int | None, o: ev.Outcome, archived: int | None = None):
    """The whole run for one group on the world's partition, as the stages run it: the evidence's outcome ``o`` for
    the position the run translates (the source commit ``u``; with the source lost, MM2's checkpoint's ``c``), MM2's
    checkpoint of position ``c`` (:func:`mm2_checkpoint`; none where MM2 has no sync at or below it), the mapping the
    translation stage applies (:func:`evidence.resume_at`) and the plan's rules (:func:`plan.build_plan`: clamp,
    rule 1b) over the replica's bounds. ``archived``: with the source lost, the archive's reading of the group's
    commit where plan rule 1a takes it (then the position translated). None: the plan refuses."""
    from mm2_failover.rules import plan as pm
    from mm2_failover.rules.checkpoints import Checkpoint

    down = None if c is None else mm2_checkpoint(w, c)
    cps = [] if down is None else [Checkpoint(GROUP, REP[0], 0, c, down, "", source_alias="a")]
    resume = ev.resume_at(o, checkpointed=bool(cps), checkpoint_at=down)
    key = (GROUP, REP[0], 0)
    try:
        return pm.build_plan(
            cps,
            {REP: pm.PartitionBounds(w.target.start, w.target.end)},
            {},
            {REP[0]: 1},
            source_commits={GROUP: {("a", REP[0], 0): u}}
            if w.reachable
            else None
            if archived is None
            else {GROUP: {("a", REP[0], 0): archived}},
            exact={key: pm.Proven(resume[0], resume[1], u if w.reachable else c if archived is None else archived)}
            if resume
            else None,
            positions_at_least={key: o.position_at_least} if o.position_at_least is not None else None,
            replica_floors={key: o.replica_start}
            if o.answer is None and o.position_at_least is None and o.replica_start is not None
            else None,
        )
    except pm.PlanError:
        return None


def planned(w: World, u: int, c: int | None, o: ev.Outcome, archived: int | None = None) -> int | None:
    """The offset :func:`plan_for`'s plan commits for the group (None: it writes nothing, or refuses)."""
    plan = plan_for(w, u, c, o, archived)
    return None if plan is None else next((r.planned_offset for r in plan.rows if r.writes), None)


@dataclass
class Reading:
    """The source lost, what was known of one group's position (:func:`lost_with_a_reading`): MM2's newest checkpoint
    (its upstream offset, None: none), the archive's reading of the commit where plan rule 1a takes it, the evidence's
    outcome for the position the run translated, and whether the reading or MM2 looked at the group after its last
    move (then the group's position was known to one of them)."""

    checkpoint: int | None
    taken: int | None
    outcome: ev.Outcome | None
    seen_last: bool


def lost_with_a_reading(w: World, u: int, seed: int, rnd: random.Random) -> Reading:
    """The source lost: the group's commit moved ``x0 -> x1 -> u`` (forward, or reset backwards - an incident's
    replay), MM2 checkpointed ``x0`` and then looked at the group now and then between its moves, writing a
    checkpoint only as MM2 does (a rewind below its last checkpoint, or a translation that moved on:
    :func:`mm2_checkpoint`; its time taken before it reads), and the scheduled archive read the commit once between
    two moves, on a clock apart from MM2's by less than rule 1a's margin."""
    from mm2_failover.rules import plan as pm

    m = pm.CLOCK_MARGIN_S
    n = len(w.source.entries)
    steps = [rnd.randint(0, n), rnd.randint(0, n), u]
    gaps = [rnd.choice([m / 4, m, 3 * m]) for _ in steps]  # from each move to the next (the last: to the outage)
    times = [1000.0, 1000.0 + gaps[0], 1000.0 + gaps[0] + gaps[1]]
    moved_last = min(i for i in range(3) if all(x == u for x in steps[i:]))
    last = None  # MM2's newest checkpoint: (upstream, its time)
    mm2_looked_last = False
    for i, (x, t) in enumerate(zip(steps, times)):
        if i and rnd.random() < 0.5:
            continue  # MM2 did not look before the group moved again (or the outage came first)
        down = mm2_checkpoint(w, x)
        mm2_looked_last |= i >= moved_last and down is not None  # where MM2 cannot translate it writes nothing
        if down is not None and (last is None or x < last[0] or down > mm2_checkpoint(w, last[0])):
            last = (x, t + rnd.uniform(0, 0.9) * gaps[i])
    r = rnd.randrange(3)  # the archive read the commit after that move, before the next
    t_a = times[r] + rnd.uniform(0, 0.9) * gaps[r] + rnd.uniform(-0.49, 0.49) * m
    key = ("a", REP[0], 0)
    cps = {} if last is None else {("a", GROUP, REP[0], 0): last}
    taken = pm.archived_positions_taken({GROUP: {key: pm.Commit(steps[r])}}, {"a": (t_a, t_a)}, cps)
    taken = taken.get(GROUP, {}).get(key)
    p = taken.offset if taken is not None else None if last is None else last[0]
    o = None if p is None else outcomes(dataclasses.replace(w, positions=[p]), seed)[p]
    return Reading(
        None if last is None else last[0],
        None if taken is None else taken.offset,
        o,
        r >= moved_last or mm2_looked_last,
    )


def reading_violations(w: World, u: int, seed: int, rnd: random.Random) -> list:
    """:func:`lost_with_a_reading`'s plan against the truth, at the lost-source bar of :func:`violations`: where the
    reading or MM2 looked at the group after its last move, it never skips a record the group has not read; where
    neither did, it never skips one MM2's checkpoint alone keeps (a move nobody saw is nobody's to keep)."""
    got = lost_with_a_reading(w, u, seed, rnd)
    if got.outcome is None:
        return []
    at = planned(w, u, got.checkpoint, got.outcome, got.taken)
    limit = w.limit(u)
    cp = mm2_checkpoint(w, u)  # what MM2's checkpoint of u itself skips anyway (a history cut short by the outage)
    if at is None or at <= limit or (cp is not None and cp > limit and not w.skips_more(u, at, cp)):
        return []
    if not got.seen_last:
        if got.checkpoint is None:
            return []
        c = got.checkpoint
        at_c = planned(w, u, c, outcomes(dataclasses.replace(w, positions=[c]), seed)[c])
        if at_c is not None and not w.skips_more(u, at, at_c):
            return []
    return [("LOST", u, ("checkpoint", got.checkpoint, "reading", got.taken), at, limit)]


def plan_violations(seed: int) -> list:
    """Every offset the plan commits that loses a record: the bar of :func:`violations` (with the source lost, MM2's
    own checkpoint's), over groups MM2 checkpointed where they are, behind, or before a rewind."""
    w = world(seed)
    got = outcomes(w, seed)
    rnd = random.Random(seed ^ 0xC4EC)
    bad = []
    for u, o in got.items():
        if not w.reachable and rnd.random() < 0.5:  # beside the archive's reading of the commit (plan rule 1a)
            bad += reading_violations(w, u, seed, rnd)
            continue
        c = checkpoint_position(w, u, rnd)
        at = planned(w, u, c, o)
        limit = w.limit(u)
        if at is not None and at > limit and not w.reachable:
            cp = mm2_checkpoint(w, u)
            if cp is not None and cp > limit and not w.skips_more(u, at, cp):
                limit = at
        if (
            not w.reachable
            and at is not None
            and o.answer is not None
            and o.answer[1] == tr.ARCHIVE_FLOOR
            and w.lost_behind_a_sync(u, at)
        ):
            # issue 50 item 7: what the plan commits (MM2's checkpoint included, where it wins) keeps every record an
            # earlier MM2 history copied up to one of its syncs, where the evidence offered a floor that does
            bad.append(("LOST BEHIND A SYNC", u, c, at, w.lost_behind_a_sync(u, at)))
        elif at is not None and at > limit:
            bad.append(("LOST", u, c, at, limit))
        elif (
            at is None
            and w.drained is not None
            and limit < w.target.end
            and (mm2_checkpoint(w, c) is None or (w.reachable and c is not None and c > u))
        ):
            # issue 50 item 6: a drained group MM2 never checkpointed - or rewound on the source below MM2's
            # checkpoint (plan rule 1b: never the checkpoint) - left without a commit falls to its consumer's
            # auto.offset.reset: with latest (Kafka's default) it skips every record it still had to read
            bad.append(("NO COMMIT", u, c, at, limit))
    return bad
