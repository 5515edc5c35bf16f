"""Exact translation from offset syncs (mm2_failover.rules.translate, pure): the rules by example, the wire format, and a
property test over random source histories - data records, transaction markers, aborted batches (copied or not),
compaction gaps, and MM2 restarts that copy records again - with sparse syncs as MM2 emits them."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mm2_failover.rules import translate as tr
from mm2_failover.rules.translate import Sync, SyncIndex, Translation, Unproven

# ------------------------------------------------------------------------------------------ rules by example


def test_exact_sync():
    t = SyncIndex([(0, 0), (100, 100)]).translate(100)
    assert (t.downstream, t.rule) == (100, tr.EXACT_SYNC)


def test_gap_free_bracket_interpolates():
    t = SyncIndex([(0, 0), (100, 100)]).translate(40)
    assert (t.downstream, t.rule, t.bracket) == (40, tr.BRACKET, (Sync(0, 0), Sync(100, 100)))
    t = SyncIndex([(10, 3), (110, 103)]).translate(50)  # the replica started later: offsets shifted, not stretched
    assert t.downstream == 43


def test_a_bracket_with_a_gap_proves_nothing():
    u = SyncIndex([(0, 0), (100, 98)]).translate(40)  # two source offsets (e.g. transaction markers) not copied
    assert isinstance(u, Unproven) and u.bracket == (Sync(0, 0), Sync(100, 98))


def test_drained_tail():
    idx = SyncIndex([(0, 0), (100, 100)])
    assert isinstance(idx.translate(130), Unproven)  # past the last sync, nothing known
    t = idx.translate(130, drained=(150, 150))
    assert (t.downstream, t.rule) == (130, tr.DRAINED_TAIL)
    assert isinstance(idx.translate(130, drained=(150, 149)), Unproven)  # the tail lost one: not one to one
    assert isinstance(idx.translate(160, drained=(150, 150)), Unproven)  # beyond the end


def test_a_drained_tail_with_gaps_is_searched_up_to_the_replica_end():
    """Transaction markers in the tail: not one to one, but the drained ends bound where the copy can be (rule 7)."""
    u = SyncIndex([(0, 0), (100, 100)]).translate(130, drained=(150, 146))
    assert isinstance(u, Unproven) and u.bracket == (Sync(100, 100), Sync(150, 146))
    assert SyncIndex([(0, 0), (100, 100)]).translate(130).bracket == (Sync(100, 100), None)  # not drained: no end


def test_a_group_past_the_last_record_of_a_drained_partition_resumes_at_the_replica_end():
    u = SyncIndex([(0, 0), (100, 100)]).translate(149, drained=(150, 146))  # 149: a commit marker, the last offset
    assert tr.decide(tr.Evidence(u)) is None
    assert tr.decide(tr.Evidence(u, nothing_after=True, replica_end=146)) == (146, tr.AT_END)
    assert tr.decide(tr.Evidence(u, nothing_after=True)) is None  # not drained: the replica's end is not final


def test_before_the_first_sync_nothing_is_known():
    assert isinstance(SyncIndex([(50, 50)]).translate(10), Unproven)


def test_a_re_copied_offset_is_looked_up_in_the_later_history_and_its_first_copy_answers_without_a_lookup():
    """The fault drill's case (MM2 SIGKILLed): history A synced (52, 52); history B restarted at 40 and synced
    (40, 66), (79, 105). Starting at A's copy of 52 re-reads 40..51 when B copies them again: the lookup in B's range
    finds B's copy (78); where no lookup can be made (the source lost) A's copy still answers - safe, as before."""
    idx = SyncIndex([(0, 0), (39, 39), (52, 52), (40, 66), (79, 105)])
    t = idx.translate(52)
    assert t == Unproven((Sync(40, 66), Sync(79, 105)), superseded=Sync(52, 52))
    assert tr.decide(tr.Evidence(t, lookup=78)) == (78, tr.RECORD_LOOKUP)
    assert tr.decide(tr.Evidence(t)) == (52, tr.SUPERSEDED_SYNC)  # safe, but not exact: labelled as such (item 11)
    t = SyncIndex([(0, 0), (60, 60), (60, 75)]).translate(60)  # two syncs at U: the later copy is looked up
    assert t == Unproven((Sync(60, 75), None), superseded=Sync(60, 60))
    assert tr.decide(tr.Evidence(t)) == (60, tr.SUPERSEDED_SYNC)
    assert SyncIndex([(0, 0), (52, 52), (60, 60)]).translate(52) == Translation(52, tr.EXACT_SYNC, (Sync(52, 52), None))


# ------------------------------------------------------------------------------------------ wire format


def test_offset_sync_records_round_trip_and_bad_ones_are_refused():
    k, v = tr.encode_sync("orders", 3, 120, 97)
    assert tr.decode_sync(k, v) == ("orders", 3, Sync(120, 97))
    for key, value in [
        (None, v),
        (k, None),
        (k[:-1], v),
        (k, v[:-1]),
        (k, v + b"x"),
        (k + b"x", v),
        (tr.encode_sync("o", 0, -1, 2)[0], tr.encode_sync("o", 0, -1, 2)[1]),
    ]:
        with pytest.raises(tr.MalformedSync):
            tr.decode_sync(key, value)


# ------------------------------------------------------------------------------------------ the property

DATA, MARKER, ABORTED, COMPACTED = "data", "marker", "aborted", "compacted"


def simulate(seed: int):
    """A source partition and MM2 copying it. Returns (kinds by source offset, replica as a list of source offsets,
    syncs, read_uncommitted)."""
    rnd = random.Random(seed)
    n = rnd.randint(5, 120)
    kinds = [rnd.choices([DATA, MARKER, ABORTED, COMPACTED], [0.8, 0.07, 0.06, 0.07])[0] for _ in range(n)]
    read_uncommitted = rnd.random() < 0.5
    copied = {DATA} | ({ABORTED} if read_uncommitted else set())
    replica: list[int] = []
    syncs: list[tuple[int, int]] = []
    lag_max = rnd.choice([0, 3, 10, 100])
    s, last_sync_d, fresh = 0, None, True
    restarts = rnd.randint(0, 2)
    while s < n:
        if kinds[s] in copied:
            d = len(replica)
            replica.append(s)
            # MM2 emits a sync for the first record after a (re)start and then at most every lag_max records, and
            # drops some (its producer keeps few syncs in flight)
            if fresh or (d - last_sync_d > lag_max and rnd.random() < 0.8):
                syncs.append((s, d))
                last_sync_d, fresh = d, False
        s += 1
        if restarts and rnd.random() < 0.03 and s > 2:  # MM2 restarts and copies again from an earlier offset
            s, fresh, restarts = rnd.randint(max(0, s - 20), s - 1), True, restarts - 1
    return kinds, replica, syncs, read_uncommitted


def safe_limit(replica: list[int], u: int) -> int | None:
    """The highest replica offset a consumer of source position ``u`` may start at without losing a record: every
    source record >= u that was copied must still be ahead (some copy of it at or after the start)."""
    last_copy: dict[int, int] = {}
    for d, s in enumerate(replica):
        last_copy[s] = d
    ahead = [d for s, d in last_copy.items() if s >= u]
    return min(ahead) if ahead else len(replica)


def no_duplicates(replica: list[int], lo: int, hi: int) -> bool:
    """What the pipeline checks on the target before trusting a bracket: no record copied twice in [lo, hi] (the
    bracket's own ends included: a sync emitted after an MM2 restart marks a re-copy)."""
    part = replica[lo : hi + 1]
    return len(part) == len(set(part))


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 10**9))
def test_never_past_the_consumed_position_and_exact_when_gap_free(seed):
    kinds, replica, syncs, _ru = simulate(seed)
    idx = SyncIndex(syncs)
    drained = (len(kinds), len(replica))
    for u in range(len(kinds) + 1):
        t = idx.translate(u, drained)
        if isinstance(t, Unproven):
            continue
        lo, hi = t.bracket
        if t.rule == tr.BRACKET and not no_duplicates(replica, lo.downstream, hi.downstream):
            continue  # the pipeline refuses such a bracket (a re-copy inside it)
        if t.rule == tr.DRAINED_TAIL and not no_duplicates(replica, lo.downstream, len(replica) - 1):
            continue
        limit = safe_limit(replica, u)
        assert t.downstream <= limit, (u, t, syncs, replica)  # nothing lost
        if len(set(replica)) == len(replica):  # MM2 never copied a record twice: nothing re-read either
            assert t.downstream == limit, (u, t, syncs, replica)


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 10**9))
def test_the_lookup_range_holds_a_copy_of_the_next_record_and_the_last_copy_in_it_loses_nothing(seed):
    """Rule 7 over random histories (MM2 restarts included): the pipeline translates the next record the group reads
    (the first data record V at or after U, read on the source); wherever no rule applies to V, the search range
    holds a copy of V, and the last copy in the range is at or below the highest offset that loses no data record
    (aborted copies skipped are phantoms, not loss)."""
    kinds, replica, syncs, _ru = simulate(seed)
    idx = SyncIndex(syncs)
    drained = (len(kinds), len(replica))
    last_data: dict[int, int] = {}
    for d, s in enumerate(replica):
        if kinds[s] == DATA:
            last_data[s] = d
    for u in range(len(kinds)):
        nxt = next((s for s in range(u, len(kinds)) if kinds[s] == DATA), None)
        t = idx.translate(u if nxt is None else nxt, drained, replica_start=0)
        if not isinstance(t, Unproven):
            continue
        if nxt is None:
            continue  # nothing left to read (decided by rule 7's "at the end", tested above)
        lo, hi = t.bracket
        assert lo is not None and hi is not None, (u, t, syncs)
        copies = [d for d in range(lo.downstream, min(hi.downstream, len(replica) - 1) + 1) if replica[d] == nxt]
        assert copies, (u, nxt, t, syncs, replica)
        assert max(copies) <= min(d for s, d in last_data.items() if s >= u), (u, t, syncs, replica)


def test_after_an_mm2_restart_the_search_runs_between_the_latest_copies():
    # history A copied 0..40 (syncs (0, 0), (20, 20), (35, 35)); B re-copied from 10 (syncs (10, 41), (30, 61))
    u = SyncIndex([(0, 0), (20, 20), (35, 35), (10, 41), (30, 61)]).translate(25, replica_start=0)
    assert isinstance(u, Unproven) and u.bracket == (Sync(10, 41), Sync(30, 61))  # B's copy of 25 is at 56
    assert SyncIndex([(50, 50), (60, 60)]).translate(10, replica_start=7).bracket == (Sync(0, 7), Sync(50, 50))


def test_without_the_duplicate_check_a_re_copy_inside_a_bracket_could_lose_records():
    """Why the pipeline reads the bracket's downstream range before trusting it: a transaction marker before U and
    a re-copy after it cancel out in the arithmetic."""
    # source: 10 data, 11 marker, 12 data, 13 data; MM2 copies 10, 12, 13, restarts, copies 13 again, then 14
    replica = [10, 12, 13, 13, 14]
    idx = SyncIndex([(10, 0), (14, 4)])
    t = idx.translate(12)
    assert isinstance(t, Translation) and t.downstream == 2  # arithmetic alone says the copy of 12 is at 2 ...
    assert replica[2] == 13 and safe_limit(replica, 12) == 1  # ... but it is at 1: starting at 2 would lose 12
    assert not no_duplicates(replica, 0, 4)  # the check refuses this bracket


# ------------------------------------------------------------------------------------------ rules 5-7: trust


def test_a_translation_is_trusted_only_with_evidence():
    idx = SyncIndex([(0, 0), (100, 100)])
    t = idx.translate(40)
    assert tr.decide(tr.Evidence(t)) is None  # arithmetic alone: not enough
    assert tr.decide(tr.Evidence(t, verified=True)) == (40, tr.BRACKET)
    assert tr.decide(tr.Evidence(t, verified=False, one_to_one=True)) is None  # the source contradicts it
    assert tr.decide(tr.Evidence(t, one_to_one=True)) == (40, tr.BRACKET)  # source lost: no copy twice in range
    assert tr.decide(tr.Evidence(t, one_to_one=False)) is None
    assert tr.decide(tr.Evidence(idx.translate(100))) == (100, tr.EXACT_SYNC)  # MM2 recorded that copy itself


def test_a_lookup_answers_where_no_rule_applies():
    u = SyncIndex([(0, 0), (100, 98)]).translate(40)
    assert tr.decide(tr.Evidence(u)) is None
    assert tr.decide(tr.Evidence(u, lookup=39)) == (39, tr.RECORD_LOOKUP)


# ------------------------------------------------------------------------------------------ rules 8-9: failing back


def test_back_by_example():
    idx = SyncIndex([(100, 0), (150, 50), (170, 60)])
    assert idx.back(50) == tr.Back(150, tr.EXACT_SYNC, (Sync(150, 50), None))
    assert idx.back(20) == tr.Back(120, tr.BRACKET, (Sync(100, 0), Sync(150, 50)))  # 50 copied one to one
    assert idx.back(55) == tr.Back(150, tr.SYNC_FLOOR, (Sync(150, 50), None))  # 20 offsets became 10: no proof
    tail = idx.back(65, replica_end=65)
    assert tail == tr.Back(175, tr.DRAINED_TAIL, (Sync(170, 60), None))  # to be checked:
    assert tail.evidence_range(65) == (60, 64) and tail.tail_origin(65) == 174  # the last copy is the origin's 174
    assert idx.back(65).rule == tr.SYNC_FLOOR  # without the replica's end, no tail
    assert SyncIndex([(100, 10)]).back(5) is None  # nothing proven below the first sync: the origin's log start
    assert idx.back(55).needs_evidence is False and idx.back(20).needs_evidence is True


def unread_data(kinds, replica, d: int) -> list[int]:
    """The origin's data records a group that consumed the replica up to ``d`` has not read (no copy below d)."""
    read = set(replica[:d])
    return [s for s in range(len(kinds)) if kinds[s] == DATA and s not in read]


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 10**9))
def test_failing_back_never_skips_an_unread_record_and_is_exact_when_proven(seed):
    """Rules 8-9 over random histories (transactions, compaction, MM2 restarts that copy again): for every position
    on the replica, the origin offset loses no data record the group has not read there; a proven answer (checked
    as the pipeline checks it: no record copied twice in its range) re-reads nothing where MM2 never copied a
    record twice (after a re-copy the group itself read some records twice on the replica); the floor is always
    safe."""
    kinds, replica, syncs, _ru = simulate(seed)
    idx = SyncIndex(syncs)
    r = len(replica)
    for d in range(r + 1):
        b = idx.back(d, replica_end=r)
        assert b is not None  # MM2 syncs its first copied record: (first, 0)
        if b.needs_evidence:
            lo, hi = b.evidence_range(r)
            ok = no_duplicates(replica, lo, hi)
            if b.rule == tr.DRAINED_TAIL:
                ok = ok and replica[r - 1] == b.tail_origin(r)  # the last copy is the origin's record there
            if not ok:
                b = idx.floor(d)  # the pipeline refuses the arithmetic, keeps the floor
        unread = unread_data(kinds, replica, d)
        assert all(s >= b.upstream for s in unread), (d, b, syncs, replica)  # nothing lost
        if b.rule != tr.SYNC_FLOOR and len(set(replica)) == len(replica):  # MM2 never copied a record twice
            reread = [s for s in set(replica[:d]) if s >= b.upstream and kinds[s] == DATA]
            assert reread == [], (d, b, syncs, replica)  # exact


# ------------------------------------------------------------------------------------------ the index's lookups


class ScanIndex:
    """The lookups as first written, a scan of every sync per lookup (the oracle for SyncIndex's precomputed
    arrays and bisections: the same answer, ties included)."""

    def __init__(self, syncs):
        self.syncs = sorted({s if isinstance(s, Sync) else Sync(*s) for s in syncs})

    def exact(self, u):
        at = [s for s in self.syncs if s.upstream == u]
        return min(at, key=lambda x: x.downstream) if at else None

    def search_range(self, u, replica_start):
        below = [s for s in self.syncs if s.upstream <= u]
        lo = max(below, key=lambda x: x.downstream) if below else None
        if lo is None and replica_start is not None:
            lo = Sync(0, replica_start)
        floor = lo.downstream if lo is not None else -1
        above = [x for x in self.syncs if x.upstream > u and x.downstream > floor]
        return lo, (min(above, key=lambda x: x.downstream) if above else None)

    def back_exact(self, d):
        at = [s for s in self.syncs if s.downstream == d]
        return at[0] if at else None

    def floor(self, d):
        below = [s for s in self.syncs if s.downstream <= d]
        return max(below, key=lambda x: x.upstream) if below else None


def random_syncs(rnd: random.Random) -> list[tuple[int, int]]:
    """One or more MM2 histories (each increasing in both offsets, restarting at or before where the last stopped),
    re-emitted syncs and exact duplicates, or plain noise."""
    if rnd.random() < 0.2:
        return [(rnd.randrange(60), rnd.randrange(60)) for _ in range(rnd.randrange(12))]
    out, u, d = [], 0, rnd.randrange(5)
    for _ in range(rnd.randint(1, 4)):
        for _ in range(rnd.randrange(1, 10)):
            u, d = u + rnd.randrange(1, 8), d + rnd.randrange(0, 8)
            out.append((u, d))
            if rnd.random() < 0.1:
                out.append((u, d + rnd.randrange(1, 4)))  # the same upstream offset copied again
        u = max(0, u - rnd.randrange(0, 15))  # MM2 restarts at or before where it stopped
        d += rnd.randrange(1, 5)
    return out + rnd.sample(out, min(len(out), rnd.randrange(3)))


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 10**9))
def test_the_index_looks_up_exactly_what_a_scan_of_every_sync_finds(seed):
    _index_against_the_scan(seed)


def _index_against_the_scan(seed):
    rnd = random.Random(seed)
    raw = random_syncs(rnd)
    idx, scan = SyncIndex(raw), ScanIndex(raw)
    top = max([s.upstream for s in scan.syncs] + [s.downstream for s in scan.syncs] + [0]) + 3
    for u in range(top):
        start = rnd.choice([None, 0, 2])
        t = idx.translate(u, replica_start=start)
        want_exact = scan.exact(u)
        lo, _hi = scan.search_range(u, start)
        if want_exact is not None and lo.downstream <= want_exact.downstream:
            assert t == Translation(want_exact.downstream, tr.EXACT_SYNC, (want_exact, None)), (u, raw)
        elif want_exact is not None:  # copied again by a later history: rule 7's range, the sync kept as fallback
            assert isinstance(t, Unproven) and t.superseded == want_exact, (u, raw)
            assert t.bracket == scan.search_range(u, start), (u, raw)
        elif isinstance(t, Unproven):
            assert t.bracket == scan.search_range(u, start), (u, raw)
        assert idx.search_range(
            u, sum(1 for s in scan.syncs if s.upstream <= u), None, start
        ).bracket == scan.search_range(u, start), (u, raw)
        f = scan.floor(u)
        assert idx.floor(u) == (None if f is None else tr.Back(f.upstream, tr.SYNC_FLOOR, (f, None))), (u, raw)
        b = idx.back(u)
        e = scan.back_exact(u)
        if f is None:
            assert b is None, (u, raw)
        elif e is not None and e.upstream >= f.upstream:
            assert b == tr.Back(e.upstream, tr.EXACT_SYNC, (e, None)), (u, raw)


def test_only_the_partitions_the_drain_check_observed_count_as_drained():
    """Review of issue 50 item 3: with topics_regex narrower than the groups' topics, the drain checks only those
    topics, but every captured partition was given to the proofs as drained - a later MM2 history's range, the sync
    floor, the replica's start -, and a group on a topic still being copied could be placed past records whose only
    copies were the earlier history's (a generated case: planned 35, the group at 22). The translation stage takes
    only the partitions the drain check observed (stages.translation.drain_checked), whatever their state: readiness
    observes without waiting and answers as a failover would once drained (the soak: taking only the drained ones
    made every busy interval say "no longer provable exactly"); without a drain check, all."""
    from types import SimpleNamespace

    from mm2_failover.rules import drain as dm
    from mm2_failover.stages.translation import drain_checked

    rows = [
        {"alias": "primary", "topic": "orders", "partition": 0, "state": dm.DRAINED},
        {"alias": "primary", "topic": "orders", "partition": 1, "state": "producers still writing"},
    ]
    verdict = dm.DrainVerdict(True, False, rows)
    ctx = SimpleNamespace(folder=SimpleNamespace(load_drain=lambda: verdict))
    assert drain_checked(ctx) == {("primary", "orders", 0), ("primary", "orders", 1)}  # not ("primary", "audit", 0)
    assert drain_checked(SimpleNamespace(folder=SimpleNamespace(load_drain=lambda: None))) is None


def _restarts_by_definition(idx, upstream, downstream, replica_end=None, drained=None):
    """E9's pairs as restarts_above's docstring defines them, pair by pair (the differential test's reference)."""
    d = [int(x) for x in idx._by_d_downs]
    u = [int(x) for x in idx._by_d_ups]
    n = len(d) if replica_end is None else sum(1 for x in d if x < replica_end)
    d, u = d[:n], u[:n]
    if drained is not None and n and drained[0] > 0 and drained[1] - 1 > d[-1]:
        d.append(drained[1] - 1)
        u.append(drained[0] - 1)
    return [
        (Sync(u[j - 1], d[j - 1]), Sync(u[j], d[j]))
        for j in range(1, len(d))
        if d[j] > downstream
        and u[j] >= upstream
        and (u[j] <= u[j - 1] or d[j - 1] - downstream < 2 * (d[j] - d[j - 1]))
    ]


def test_restarts_above_bisects_to_the_pairs_its_definition_names():
    """E9's pairs of syncs are found by a bisection over arrays built once (a lagging group on a partition of 100k
    syncs must not scan them all); held to the definition, pair by pair, over random archives."""
    import random

    rnd = random.Random(50)
    for _ in range(3000):
        idx = SyncIndex(list({(rnd.randint(0, 40), rnd.randint(0, 60)) for _ in range(rnd.randint(0, 12))}))
        for _ in range(10):
            args = (
                rnd.randint(0, 45),
                rnd.randint(-1, 65),
                rnd.choice([None, rnd.randint(0, 70)]),
                rnd.choice([None, (rnd.randint(0, 50), rnd.randint(0, 80))]),
            )
            assert idx.restarts_above(*args) == _restarts_by_definition(idx, *args), (idx.syncs, args)
