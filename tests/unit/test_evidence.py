"""The whole proof path of exact translation, positions -> reads -> evidence -> decision (mm2_failover.rules.evidence over
mm2_failover.rules.translate), property-tested on generated worlds (testbed/worlds.py: MM2 histories and their truth, read
through an in-memory cluster with Kafka's semantics, testbed/memlog.py), and each hole the proof path once had
reintroduced as a mutation the property must catch. The rules by example come first, grouped by the evidence rule
(E1-E9) they test."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mm2_failover.adapters.kafka import cluster
from mm2_failover.rules import evidence as ev
from mm2_failover.rules import translate as tr
from mm2_failover.rules.translate import Sync, SyncIndex
from testbed.memlog import ABORTED, COMPACTED, DATA, MARKER, MemoryLog, Partition
from testbed.worlds import REP, SRC, plan_violations, violations, world


def logs(source: list, target: list, source_start: int = 0, target_start: int = 0, fail=None):
    """MemoryLogs of one partition each: entries are contents (data) or a kind (MARKER, ABORTED, COMPACTED)."""

    def part(entries, start):
        return Partition([(e, None) if e in (MARKER, ABORTED, COMPACTED) else (DATA, e) for e in entries], start)

    return MemoryLog("source", {SRC: part(source, source_start)}, fail), MemoryLog(
        "target", {REP: part(target, target_start)}
    )


def prove_one(
    source, target, syncs, u, drained=None, lost=False, budget=ev.DEFAULT_BUDGET, scan=ev.DEFAULT_SCAN, replica_start=0
):
    w = ev.Want("k", "a", SRC, REP, u, SyncIndex(syncs), drained, replica_start)
    return ev.prove([w], {"a": None if lost else source}, target, budget, scan)["k"]


# ------------------------------------------------------------------------------------------ E1-E3 by example


def test_e1_a_bracket_over_the_read_budget_proves_nothing():
    """Issue 31 item 2: the source lost, the bracket's range not read (over the budget): no "no duplicates" on an
    empty span."""
    src, tgt = logs(list("abcdefghij"), list("abcdefghij"))
    assert prove_one(src, tgt, [(0, 0), (9, 9)], 4, lost=True).answer == (4, tr.BRACKET)
    out = prove_one(src, tgt, [(0, 0), (9, 9)], 4, lost=True, budget=5)
    assert out.answer == (1, tr.ARCHIVE_FLOOR) and "over_budget" in out.why  # not proven: the archive floor (E8)


def test_e2_a_position_below_the_source_log_start_reads_no_next_record_and_is_never_placed_at_the_end():
    """Issue 31 item 1: the group at 1 had not read b..e; they are gone from the source but still on the replica.
    Kafka's default reset would have read "nothing after 1" from the log end (at_end: b..j skipped)."""
    src, tgt = logs(list("abcdefghij"), list("abcdefghij"), source_start=5)
    out = prove_one(src, tgt, [(0, 0), (4, 3), (9, 8)], 1, drained=(10, 10))  # not gap-free: unproven
    assert out.source_log_start == 5 and out.answer is None  # no target-side proof: MM2's checkpoint
    out = prove_one(src, tgt, [(0, 0), (9, 9)], 1, drained=(10, 10))
    assert out.answer == (1, tr.BRACKET)  # proven on the target alone (E4)
    assert all(lo >= 5 for _tp, lo, _hi, _s in src.reads)  # nothing asked below the log start


def test_e2_a_group_below_every_sync_and_the_source_log_start_never_checkpointed_resumes_at_the_replica_start():
    """Issue 50 item 6: the group at 1 had not read b..e, now gone from the source (retention); MM2 had no offset
    sync at or below 1, so it never wrote a checkpoint for the group, and the plan gave the partition no commit - its
    consumer fell to auto.offset.reset (Kafka's default, latest: every replicated record skipped). The replica's
    first record loses nothing that is left anywhere; it is not called exact."""
    src, tgt = logs(list("abcdefghij"), list("cdefghij"), source_start=5, target_start=0)
    out = prove_one(src, tgt, [(6, 4), (9, 7)], 1, drained=(10, 8), replica_start=0)
    assert out.source_log_start == 5 and out.answer is None and out.position_at_least is None
    assert ev.resume_at(out, checkpointed=False) == (0, tr.REPLICA_START)
    assert not tr.is_exact(tr.REPLICA_START) and tr.REPLICA_START in tr.RULE_TEXT
    assert ev.resume_at(out, checkpointed=True) is None  # MM2's checkpoint answers (and plan rule 1b checks it)
    out = prove_one(src, tgt, [(6, 4), (9, 7)], 1, drained=None, replica_start=0)  # not drained: not proven
    assert ev.resume_at(out, checkpointed=False) is None


def test_e2_the_reader_never_jumps_to_the_log_end(monkeypatch):
    src, tgt = logs(list("abcdefghij"), list("abcdefghij"), source_start=5)
    assert src.read_ranges({SRC: {(1, 9)}}, 100)[(SRC, 1, 9)].status == ev.BELOW_START
    monkeypatch.setattr(cluster, "BOUNDED_READ_CONF", {})  # librdkafka's default reset
    assert src.read_ranges({SRC: {(1, 9)}}, 100)[(SRC, 1, 9)] == ev.Read(1, 9, ev.COMPLETE)  # the silent jump


def test_e3_nothing_after_only_when_the_read_reached_the_end():
    src, tgt = logs(["a", "b", MARKER, MARKER, MARKER], ["a", "b"])
    out = prove_one(src, tgt, [(0, 0)], 2, drained=(5, 2))
    assert out.answer == (2, tr.AT_END)
    out = prove_one(src, tgt, [(0, 0)], 2, drained=(5, 2), scan=2)  # [2, 4) read, 4 not: unknown
    assert out.answer is None and out.why.startswith("no next record within the scan:")
    src, tgt = logs(["a", "b", MARKER, MARKER, MARKER], ["a", "b"], fail=lambda tp, lo, hi: True)
    assert prove_one(src, tgt, [(0, 0)], 2, drained=(5, 2)).answer is None  # a failed read says nothing


def test_e3_each_position_reads_its_own_next_record():
    """One group far behind (below the log start) does not change what a caught-up group reads."""
    src, tgt = logs(list("abcdefghij") + [MARKER], list("abcdefghij"), source_start=3)
    index = SyncIndex([(0, 0), (9, 9)])
    wants = [ev.Want(u, "a", SRC, REP, u, index, (11, 10), 0) for u in (1, 6, 10)]
    got = ev.prove(wants, {"a": src}, tgt)
    assert got[10].answer == (10, tr.AT_END) and got[6].answer == (6, tr.BRACKET) and got[1].answer == (1, tr.BRACKET)


# ------------------------------------------------------------------------------------------ E4-E7 by example


def test_e4_a_bracket_needs_a_contiguous_span_on_the_target():
    """Issue 31 item 3: a source marker before U and a target marker after its copy (MM2 with exactly-once support)
    cancel out: 10 source offsets, 10 target offsets, no duplicate - but U's copy is one lower."""
    source = ["a", "b", MARKER, "c", "d", "e", "f", "g", "h", "i"]  # c at 3
    target = ["a", "b", "c", "d", "e", MARKER, "f", "g", "h", "i"]  # c at 2: its copy is one lower
    src, tgt = logs(source, target)
    out = prove_one(src, tgt, [(0, 0), (9, 9)], 3, lost=True)
    assert out.answer == (1, tr.ARCHIVE_FLOOR) and out.evidence.one_to_one is False  # not proven (E8)
    assert prove_one(src, tgt, [(0, 0), (9, 9)], 3).answer == (2, tr.RECORD_LOOKUP)  # the source tells


def test_e5_a_verified_copy_must_be_the_first_copy_of_its_content():
    """A producer retry's twin where the arithmetic points: the arithmetic is one too far (a marker before U), and
    the record there is the twin of U's record."""
    source = ["a", MARKER, "x", "x", "b", "c"]  # x at 2 and its twin at 3
    target = ["a", "x", "x", "b", "c", "c"]  # MM2 copied c twice (restart): counts match the source's
    src, tgt = logs(source, target)
    out = prove_one(src, tgt, [(0, 0), (5, 5)], 2)
    # the first of the two x's, not anchored (c copied twice past it): safe, and not called exact (issue 50 item 3)
    assert out.evidence.verified is False and out.answer == (1, tr.FIRST_COPY)


def test_e5_a_copy_with_another_of_its_content_in_the_range_is_not_verified_but_looked_up():
    """The arithmetic one too early (the source's marker after U, MM2's exactly-once commit marker on the replica
    before it): the record there is the first copy of U's content in [lo, at] - but the copy of U's earlier twin.
    Verified, it was called exact with re-read 0 while the group re-read the twin (the truth harness, seed
    300583362). Another copy of the content in the range sends it to the lookup, which anchors the later one."""
    source = ["a", "x", "x", MARKER, "c", "d"]  # x at 1 and its twin at 2; the group has read 1
    target = ["a", MARKER, "x", "x", "c", "d"]
    src, tgt = logs(source, target)
    out = prove_one(src, tgt, [(0, 0), (4, 4)], 2)
    assert out.answer == (3, tr.RECORD_LOOKUP)


def test_e6_a_lookup_takes_the_first_copy_unless_a_later_one_is_anchored():
    """Issue 31 item 4: a non-idempotent producer's retry wrote x twice with y between; the last copy of x would skip
    y. After an MM2 restart inside the range (no sync at the restart) the later copy is anchored by the next sync."""
    source = ["a", MARKER, "x", "y", "x", "b"]
    target = ["a", "x", "y", "x", "b"]
    src, tgt = logs(source, target)
    assert prove_one(src, tgt, [(0, 0), (5, 4)], 2).answer == (1, tr.RECORD_LOOKUP)
    source = ["a", MARKER, "x", "y", "z", "b"]
    target = ["a", "x", "y", "x", "y", "z", "b"]  # MM2 died after y, restarted at x: x copied at 1 and 3
    src, tgt = logs(source, target)
    assert prove_one(src, tgt, [(0, 0), (5, 6)], 2).answer == (3, tr.RECORD_LOOKUP)


def test_e6_the_first_copy_taken_for_want_of_an_anchored_later_one_is_not_called_exact():
    """Issue 50 item 3: MM2 died after y and restarted at x (x, y copied twice); the anchor read of the later copy
    failed, so the lookup took the first copy - safe, the group re-reads x and y - and the outcome said
    record_lookup: the report counted it exact, re-read 0."""
    source, target = ["a", MARKER, "x", "y", "z"], ["a", "x", "y", "x", "y", "z"]
    src, tgt = logs(source, target, fail=lambda tp, lo, hi: hi - lo > 1)  # the source's anchor read fails
    out = prove_one(src, tgt, [(0, 0)], 2, drained=(5, 6), scan=1)
    assert out.answer == (1, tr.FIRST_COPY) and not tr.is_exact(tr.FIRST_COPY) and out.position_at_least == 0
    src, tgt = logs(source, target)  # read: the later copy is anchored record for record, and exact
    assert prove_one(src, tgt, [(0, 0)], 2, drained=(5, 6), scan=1).answer == (3, tr.RECORD_LOOKUP)


def test_e2_an_earlier_historys_bracket_is_not_the_answer_after_a_restart_copied_the_record_again():
    """Issue 50 item 3: history A copied r0..r14 (syncs every 3), MM2 restarted at 2 and history B copied r2..r19
    again (from 15). A group at 10: A's gap-free bracket (9, 9)-(12, 12) said 10, "exact, re-read 0" - and the group
    re-read B's copies of r2..r9 after A's r10..r14. On the drained partition B's range is searched: r10 at 23."""
    source = [f"r{i}" for i in range(20)]
    target = [f"r{i}" for i in range(15)] + [f"r{i}" for i in range(2, 20)]
    src, tgt = logs(source, target)
    syncs = [(0, 0), (3, 3), (6, 6), (9, 9), (12, 12), (2, 15)]
    assert prove_one(src, tgt, syncs, 10, drained=(20, 33)).answer == (23, tr.RECORD_LOOKUP)
    # with the source lost nothing proves B reached 10: A's bracket, proven one to one on the target (E4), stays -
    # but as the first copy of a record B copied again (the group re-reads B's r2..r9), not as exact (the truth
    # harness, tests/unit/test_truth.py, found it called exact with re-read 0)
    assert prove_one(src, tgt, syncs, 10, lost=True).answer == (10, tr.SUPERSEDED_SYNC)
    # not drained (replication not finished, the source up): A's bracket verified on the source is the first copy too
    assert prove_one(src, tgt, syncs, 10).answer == (10, tr.SUPERSEDED_SYNC)
    # the replica topic recreated (A's and B's syncs still archived, all past the new replica's end): a new history
    # C copied r0..r19 at 0..19 - the old syncs are no history of this replica, C's bracket answers
    new_target = [f"r{i}" for i in range(20)]
    src, tgt = logs(source, new_target)
    old_syncs = [(0, 100), (2, 115)]
    assert prove_one(src, tgt, old_syncs + [(0, 0), (3, 3), (19, 19)], 10, drained=(20, 20)).answer == (10, tr.BRACKET)


def test_e2_a_later_history_whose_only_archived_sync_is_above_the_group_still_voids_the_earlier_bracket():
    """Found by the exact drill (bench/results/exact-drill-20261128-125550.json, pattern twins): MM2, SIGKILLed
    before it had committed any progress for the partition, copied it again from 0 - history A r0..r13 at 0..13,
    history B r0..r13 again from 14 - and the archive holds (0, 0), (10, 10) and B's (10, 24) only: no sync of B's
    start (the drill's archive had none; MM2 writes its syncs asynchronously and skips some under load). A group at
    5: A's bracket (0, 0)-(10, 10) said 5, "exact, re-read 0", and the group re-read B's r0..r13 after A's r5..r13.
    B's sync at the bracket's top upstream offset with a higher downstream one says a later history reached no
    further than the bracket's top: where it started is not in the archive, so the bracket is not an answer - B's
    range is searched on the drained partition (r5 at 19), and with the source lost the bracket is the first copy,
    not exact."""
    source = [f"r{i}" for i in range(14)]
    target = source + source
    src, tgt = logs(source, target)
    syncs = [(0, 0), (10, 10), (10, 24)]
    assert prove_one(src, tgt, syncs, 5, drained=(14, 28)).answer == (19, tr.RECORD_LOOKUP)
    assert prove_one(src, tgt, syncs, 5, lost=True).answer == (5, tr.SUPERSEDED_SYNC)
    # no later history: the bracket answers, exact
    assert prove_one(src, logs(source, source)[1], [(0, 0), (10, 10)], 5, drained=(14, 14)).answer == (5, tr.BRACKET)


def test_e2_a_sync_at_the_position_is_not_exact_when_a_later_history_reached_its_next_sync_again():
    """The exact drill (bench/results/exact-drill-20261128-131428.json, transactions, MM2's defaults: exact_sync, 20
    re-read, said 0): history A copied r0..r14, history B restarted at 8 and copied r8..r19 from 15; the archive
    holds A's (0, 0), (10, 10), (12, 12) and B's (12, 19), not B's start. A group at 10: A's sync at 10 said "exact"
    and the group re-read B's r8, r9 after A's r10..r14. B's sync at A's next sync's upstream offset says B may have
    copied 10 again: on the drained partition the range up to B's sync is searched (r10 at 17, anchored)."""
    source = [f"r{i}" for i in range(20)]
    target = [f"r{i}" for i in range(15)] + [f"r{i}" for i in range(8, 20)]
    src, tgt = logs(source, target)
    syncs = [(0, 0), (10, 10), (12, 12), (12, 19)]
    assert prove_one(src, tgt, syncs, 10, drained=(20, 27)).answer == (17, tr.RECORD_LOOKUP)
    # B's sync not archived: drained, the ends stand for a last sync, and B's range up to them holds r10 (E9)
    assert prove_one(src, tgt, syncs[:3], 10, drained=(20, 27)).answer == (17, tr.RECORD_LOOKUP)


def test_e7_a_sync_at_the_position_a_later_history_may_have_reached_again_is_its_first_copy_where_not_searched():
    """The world above with B's range not searched - the source lost, or the source up and replication not known to
    be finished (no drained ends: readiness, or a partition the drain check did not cover): A's sync at 10 said
    exact_sync, "re-read 0", where the group re-reads B's r8, r9. A's bracket below B's sync is then A's first copy
    (E7, superseded_sync): so is the sync at its lower end - never exact, its re-read unknown."""
    source = [f"r{i}" for i in range(20)]
    target = [f"r{i}" for i in range(15)] + [f"r{i}" for i in range(8, 20)]
    src, tgt = logs(source, target)
    syncs = [(0, 0), (10, 10), (12, 12), (12, 19)]
    for out in (prove_one(src, tgt, syncs, 10, lost=True), prove_one(src, tgt, syncs, 10)):
        assert out.answer == (10, tr.SUPERSEDED_SYNC) and out.position_at_least is None
        assert not tr.is_exact(out.answer[1])
    assert prove_one(src, tgt, syncs, 11).answer == (11, tr.SUPERSEDED_SYNC)  # the bracket above it: as before
    assert prove_one(src, tgt, syncs[:3], 10, lost=True).answer == (10, tr.EXACT_SYNC)  # B not seen


def test_e6_a_lookup_in_a_range_a_later_history_may_have_reached_again_is_the_first_copy_where_not_searched():
    """Found by the property's unsynced worlds (seed 208): history A copied r0..r14 (the marker at 12 not copied; its
    syncs (0, 0), (10, 10), (13, 12)), history B restarted at 8 and copied r8..r19 from 14, its first archived sync
    (13, 18). A group at 11: A's bracket is not gap-free, so r11 is looked up - drained, in the range up to B's sync
    (B's copy at 17, anchored). Replication not known to be finished, the range ends at A's (13, 12): A's copy at
    11 was record_lookup, "exact, re-read 0", and the group re-reads B's r8..r10 - the first copy (E6's
    first_copy), its re-read unknown."""
    source = [f"r{i}" for i in range(12)] + [MARKER] + [f"r{i}" for i in range(13, 20)]
    target = [f"r{i}" for i in range(15) if i != 12] + [f"r{i}" for i in range(8, 20) if i != 12]
    src, tgt = logs(source, target)
    syncs = [(0, 0), (10, 10), (13, 12), (13, 18)]
    assert prove_one(src, tgt, syncs, 11, drained=(20, 25)).answer == (17, tr.RECORD_LOOKUP)
    out = prove_one(src, tgt, syncs, 11)
    assert out.answer == (11, tr.FIRST_COPY) and out.position_at_least is None
    assert prove_one(src, tgt, syncs[:3], 11).answer == (11, tr.RECORD_LOOKUP)  # B not seen


def test_e9_a_restart_whose_first_sync_was_never_written_is_looked_up_in_its_own_range():
    """The former known limit, found on the exact drill (re-read 5, said 0) and by the property's unsynced worlds
    with their positions kept (seed 518): history A copied r0..r13 (syncs (0, 0), (3, 3), (7, 6), (11, 9): the
    marker and the aborted record not copied), MM2 restarted at 1 and copied r1..r13 again from 12; MM2 replaced the
    restart's first sync before writing it, and its first sync written is (11, 20). A group at 5: A's bracket named
    A's copy at 4, "exact, re-read 0", and the group re-read B's r1..r3. The restart (upstream offsets going back at
    (11, 20)) holds a copy of r5 at 15, whose run up to (11, 20) is the source's r5..r11 record for record: it
    answers, exact."""
    source = (
        [f"r{i}" for i in range(4)]
        + [MARKER]
        + [f"r{i}" for i in range(5, 10)]
        + [ABORTED]
        + [f"r{i}" for i in range(11, 20)]
    )
    copied = [f"r{i}" for i in range(14) if i not in (4, 10)]
    target = copied + copied[1:] + [f"r{i}" for i in range(14, 20)]
    src, tgt = logs(source, target)
    syncs = [(0, 0), (3, 3), (7, 6), (11, 9), (11, 20)]
    for drained in ((20, len(target)), None):
        out = prove_one(src, tgt, syncs, 5, drained=drained)
        assert out.answer == (15, tr.RECORD_LOOKUP), (drained, out)
    # a group at a sync of A's (r3 at 3): the same, its copy in the restart's range (14) anchored at (11, 20)
    assert prove_one(src, tgt, syncs, 3, drained=(20, len(target))).answer == (14, tr.RECORD_LOOKUP)
    # the restart's first sync written past where A stopped, no upstream offset going back ((9, 8) -> (13, 22))
    past = [(0, 0), (3, 3), (7, 6), (9, 8), (13, 22)]
    assert prove_one(src, tgt, past, 5, drained=(20, len(target))).answer == (15, tr.RECORD_LOOKUP)
    # no sync written since the restart (the property's seed 9608): drained, the ends stand for a last sync
    assert prove_one(src, tgt, syncs[:4], 5, drained=(20, len(target))).answer == (15, tr.RECORD_LOOKUP)
    # the restart's range not read whole (over the budget): A's copy is the first copy, never called exact
    out = prove_one(src, tgt, syncs, 5, drained=(20, len(target)), budget=8)
    assert out.answer is None or not tr.is_exact(out.answer[1]), out


def test_e9_a_restart_between_syncs_whose_offsets_look_like_one_history_is_read():
    """The exact drill's burst pattern (re-read 1, said 0, at an exact sync): nothing in the syncs shows the restart.
    Here a transactional source (a marker after every record, not copied by MM2 without exactly-once support):
    history A copied r0..r5 (syncs (0, 0), (6, 3)), MM2 restarted at r3 and copied r3..r7 from 6, its first sync
    written (14, 10). Between the two syncs there are fewer replica offsets (7) than source offsets (8), and the
    upstream offsets go on: one history to the eye. A group at r3 (source offset 6): A's sync said exact_sync at 3;
    the group re-read r4, r5 after the restart's r3. The pair is close enough above the answer to hold a restart's
    copy of r3, so it is read: r3 at 6, its run anchored at (14, 10)."""
    source = [x for i in range(8) for x in (f"r{i}", MARKER)]
    target = [f"r{i}" for i in range(6)] + [f"r{i}" for i in range(3, 8)]
    src, tgt = logs(source, target)
    syncs = [(0, 0), (6, 3), (14, 10)]
    for drained in ((16, 11), None):
        assert prove_one(src, tgt, syncs, 6, drained=drained).answer == (6, tr.RECORD_LOOKUP), drained
    # the restart began past the group (r4 on): A's sync is the only copy of r3, exact
    late = [f"r{i}" for i in range(6)] + [f"r{i}" for i in range(4, 8)]
    src, tgt = logs(source, late)
    assert prove_one(src, tgt, [(0, 0), (6, 3), (14, 9)], 6, drained=(16, 10)).answer == (3, tr.EXACT_SYNC)


def test_e9_reads_the_pairs_close_to_any_answer_the_bracket_allows_and_to_an_answer_it_moved():
    """A review's (helper) findings. F1: the pairs were chosen against the bracket's lower sync, not the answer: one
    history copied r0..r20 (syncs (0, 0), (12, 12), (20, 20)), MM2 restarted at 18 and wrote its first sync at
    (21, 24); a group at 18 was answered by the bracket at 18, "exact", re-reading r18..r20 (truth 21). F2: E9 moved
    the answer up to a first restart's copy (61), but the pairs close to it were never read: a second restart, also
    at 10, copied r10 again at 77 (its first sync (26, 93)); said exact at 61, re-reading 16."""
    src, tgt = logs([f"r{i}" for i in range(22)], [f"r{i}" for i in range(21)] + [f"r{i}" for i in range(18, 22)])
    for drained in ((22, 25), None):
        assert prove_one(src, tgt, [(0, 0), (12, 12), (20, 20), (21, 24)], 18, drained=drained).answer == (
            21,
            tr.RECORD_LOOKUP,
        ), drained
    target = [f"r{i}" for i in range(61)] + [f"r{i}" for i in range(10, 26)] + [f"r{i}" for i in range(10, 27)]
    src, tgt = logs([f"r{i}" for i in range(61)], target)
    syncs = [(0, 0), (10, 10), (60, 60), (20, 71), (25, 76), (26, 93)]
    for drained in ((61, len(target)), None):
        assert prove_one(src, tgt, syncs, 10, drained=drained).answer == (77, tr.RECORD_LOOKUP), drained


def test_e9_a_copy_in_a_restarts_range_not_anchored_is_the_first_copy_and_no_copy_keeps_the_answer():
    """The same restart, a group at 5: where the restart's copy of r5 is not the source's run record for record
    (its r7 changed), the answer is A's copy, first_copy; where the restart began past the group (r6 on), A's copy
    is the only copy: exact. Below the source's log start (no record to anchor by), a copy of the answer's record
    in the restart's range makes it the first copy (the property's seed 330)."""
    source = (
        [f"r{i}" for i in range(4)]
        + [MARKER]
        + [f"r{i}" for i in range(5, 10)]
        + [ABORTED]
        + [f"r{i}" for i in range(11, 20)]
    )
    copied = [f"r{i}" for i in range(14) if i not in (4, 10)]
    syncs = [(0, 0), (3, 3), (7, 6), (11, 9), (11, 20)]
    odd = copied + ["r1", "r2", "r3", "r5", "r6", "x7", "r8", "r9", "r11", "r12", "r13"]
    src, tgt = logs(source, odd)
    assert prove_one(src, tgt, syncs, 5, drained=(20, len(odd))).answer == (4, tr.FIRST_COPY)
    late = copied + ["r6", "r7", "r8", "r9", "r11", "r12", "r13"]
    src, tgt = logs(source, late)
    assert prove_one(src, tgt, [(0, 0), (3, 3), (7, 6), (11, 9), (11, 16)], 5, drained=(20, len(late))).answer == (
        4,
        tr.RECORD_LOOKUP,
    )
    src, tgt = logs(source, copied + copied[1:], source_start=8)
    out = prove_one(src, tgt, [(0, 0), (2, 2), (3, 3), (11, 9), (11, 20)], 2, drained=(20, 23))
    assert out.answer == (2, tr.FIRST_COPY), out


def test_e7_below_the_source_log_start_a_sync_or_bracket_a_later_history_may_have_reached_again_is_its_first_copy():
    """The same world, drained, the source's log start past the group (r0..r14 gone from it): no next record to
    look up B's copy by, and B's sync (12, 19) does not prove B started at or before the group (it may have started
    past it: a later copy of the record's content could be a later twin's), so the first copy answers - A's sync at
    10, and A's bracket (10, 10)-(12, 12) once proven one to one on the target (E4) -, superseded_sync, never exact.
    Both fell to MM2's checkpoint (the bracket's at 11 re-reads one record more)."""
    source = [f"r{i}" for i in range(20)]
    target = [f"r{i}" for i in range(15)] + [f"r{i}" for i in range(8, 20)]
    src, tgt = logs(source, target, source_start=15)
    syncs = [(0, 0), (10, 10), (12, 12), (12, 19)]
    out = prove_one(src, tgt, syncs, 10, drained=(20, 27))
    assert out.source_log_start == 15 and out.answer == (10, tr.SUPERSEDED_SYNC) and out.position_at_least == 10
    out = prove_one(src, tgt, syncs, 11, drained=(20, 27))
    assert out.answer == (11, tr.SUPERSEDED_SYNC) and out.evidence.one_to_one
    assert prove_one(src, tgt, syncs, 11, drained=(20, 27), budget=2).answer is None  # E4 not read: not proven


def test_e7_below_the_source_log_start_a_bracket_across_a_restart_is_no_first_copy():
    """The property's world at seed 547451 (shape permuted), cut down: history A copied r0..r7 (the aborted record
    at 2 not copied), MM2 restarted at 7 twice (B copied r7 at 7, C at 8); the archive holds (0, 0), B's (7, 7) and
    C's (7, 8). A group at 4, below the source's log start: the bracket (0, 0)-(7, 7) spans A and B, its arithmetic
    (4) the copy of r5 - taken as the first copy, the group loses r4. Not one to one on the target (r7 twice, E4):
    MM2's checkpoint answers."""
    source = ["r0", "r1", ABORTED, "r3", "r4", "r5", "r6", "r7"]
    target = ["r0", "r1", "r3", "r4", "r5", "r6", "r7", "r7", "r7"]
    src, tgt = logs(source, target, source_start=8)
    out = prove_one(src, tgt, [(0, 0), (7, 7), (7, 8)], 4, drained=(8, 9))
    assert out.answer is None and out.evidence.one_to_one is False


def test_e7_a_superseded_sync_is_labelled_and_its_later_copy_found_on_the_target():
    """History A copied 0..5 (sync (4, 4)); B restarted at 2 (sync (2, 6)) and copied 2..9 again; sync (8, 12)."""
    target = ["r0", "r1", "r2", "r3", "r4", "r5", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9"]
    src, tgt = logs([f"r{i}" for i in range(10)], target)
    syncs = [(0, 0), (4, 4), (2, 6), (8, 12)]
    src2, tgt2 = logs([f"r{i}" for i in range(10)], target, source_start=6)  # U=4 below the source's log start
    out = prove_one(src2, tgt2, syncs, 4, drained=(10, 14))
    assert out.answer == (8, tr.RECORD_LOOKUP)  # B's copy of r4, found by the first copy's content (drained)
    out = prove_one(src, tgt, syncs, 4, lost=True)  # the source lost: B may have died before re-reaching A's reach
    assert out.answer == (4, tr.SUPERSEDED_SYNC) and out.position_at_least is None
    out = prove_one(src, tgt, syncs[:3], 4, lost=True)  # no sync above 4 in B: B may not have reached 4
    assert out.answer == (4, tr.SUPERSEDED_SYNC) and out.position_at_least is None  # nothing proven of the re-reads
    out = prove_one(src, tgt, syncs, 4, drained=(10, 14), budget=1)  # drained, but B's range over the read budget
    assert out.answer == (4, tr.SUPERSEDED_SYNC) and out.position_at_least == 6  # B restarted at 6: >= 2 re-read


def test_e7_with_the_source_lost_a_restart_cut_short_keeps_the_first_copy():
    """MM2 copied records 0..50 (history A, a sync for each), restarted at 40 and had copied 40..45 again (history B,
    at 51..56) when the source was lost. A group at 42 still has to read 46..50, whose only copies are A's: B's copy
    of 42 (53) would skip them; A's (42) loses nothing."""
    source = [f"r{i}" for i in range(51)]
    target = [f"r{i}" for i in range(51)] + [f"r{i}" for i in range(40, 46)]
    syncs = [(i, i) for i in range(51)] + [(40 + j, 51 + j) for j in range(6)]
    src, tgt = logs(source, target)
    assert prove_one(src, tgt, syncs, 42, lost=True).answer == (42, tr.SUPERSEDED_SYNC)


def test_e8_with_the_source_lost_an_unproven_position_resumes_at_the_newest_archived_sync_below_it():
    """Issue 50 item 7: with the source lost and nothing proven, MM2's checkpoint answered - translated from MM2's
    sparse store of syncs (on a real bed 952 re-read where the newest archived sync at or below the position re-reads
    617). Its rule over every archived sync answers instead: the newest sync at or below the position, plus one."""
    source = [f"r{i}" if i % 6 else MARKER for i in range(30)]  # a transaction marker every 6 offsets
    target = [f"r{i}" for i in range(30) if i % 6]  # markers are not copied: the offsets drift
    src, tgt = logs(source, target)
    syncs = [(1, 0), (13, 10), (25, 20)]  # no bracket is gap-free
    out = prove_one(src, tgt, syncs, 17, lost=True)
    assert out.answer == (11, tr.ARCHIVE_FLOOR)  # r14 at 11: the group (at 17) re-reads r14..r16, loses nothing


def test_e8_with_the_source_lost_a_restarted_history_cut_short_is_not_taken_for_the_floor():
    """MM2 copied records 0..50 (history A, syncs every 10), restarted at 40 and had copied 40..45 again (history
    B, from 51) when the source was lost. A group at 42 still has to read 46..50, whose only copies are A's. B's
    newest sync (40, 51) - MM2's own checkpoint - skips them; B's syncs reach no further than 40 where A's reached
    50: B was cut short, and A's floor answers (41: re-reads 41, and B's copies, loses nothing)."""
    source = [f"r{i}" for i in range(51)]
    target = [f"r{i}" for i in range(51)] + [f"r{i}" for i in range(40, 46)]
    syncs = [(i, i) for i in range(0, 51, 10)] + [(40, 51)]
    src, tgt = logs(source, target)
    assert prove_one(src, tgt, syncs, 42, lost=True).answer == (41, tr.ARCHIVE_FLOOR)
    # B copied past A's reach (a sync at 55): B's floor answers
    source = [f"r{i}" for i in range(60)]
    target = [f"r{i}" for i in range(51)] + [f"r{i}" for i in range(40, 60)]
    src, tgt = logs(source, target)
    assert prove_one(src, tgt, syncs + [(55, 66)], 42, lost=True).answer == (52, tr.ARCHIVE_FLOOR)


def test_e8_syncs_at_or_past_the_replicas_end_are_no_history_of_it():
    """The review's reproducer: the replica topic recreated, the old one's syncs (0, 100) and (19, 119) still
    archived; the new one copied r0..r19 with exactly-once commit markers (no bracket gap-free). The old syncs'
    "newest at or below 10" said 101 - clamped to the replica's end, every record skipped. They are past the
    replica's end: no history of it."""
    source = [f"r{i}" for i in range(20)]
    target = []
    for i in range(20):
        target += [f"r{i}"] + ([MARKER] if i % 4 == 3 else [])
    src, tgt = logs(source, target)
    out = prove_one(src, tgt, [(0, 0), (8, 10), (16, 20), (0, 100), (19, 119)], 10, lost=True)
    assert out.answer == (11, tr.ARCHIVE_FLOOR) and not out.cut_short


def test_e8_a_checkpoint_past_every_archived_sync_does_not_overrule_the_floor():
    """The review's stale archive: A copied 0..50 (syncs every 10), MM2 restarted at 40 and copied 40..45 again
    (B, from 51) before the outage; B's sync (40, 51) never reached the archive. MM2's checkpoint (52, from B's
    sync) names a copy past every archived sync: whether B was cut short is not known from the archive, so the
    floor (41) stands - the checkpoint would skip r46..r50."""
    source = [f"r{i}" for i in range(51)]
    target = [f"r{i}" for i in range(51)] + [f"r{i}" for i in range(40, 46)]
    src, tgt = logs(source, target)
    out = prove_one(src, tgt, [(i, i) for i in range(0, 51, 10)], 42, lost=True, budget=5)
    assert out.answer == (41, tr.ARCHIVE_FLOOR)
    assert ev.resume_at(out, True, 52) == (41, tr.ARCHIVE_FLOOR)
    assert ev.resume_at(out, True, 41) is None  # a checkpoint the archive explains, at least as far: it answers


def test_failing_back_counts_a_bracket_only_on_a_span_read_whole():
    replica, origin = logs(list("abcdefghij"), list("abcdefghij"))
    w = ev.BackWant("k", SRC, REP, 4, SyncIndex([(0, 0), (9, 9)]), 10)
    assert ev.prove_back([w], replica, origin)["k"].rule == tr.BRACKET
    assert ev.prove_back([w], replica, origin, budget=5)["k"].rule == tr.SYNC_FLOOR
    assert ev.prove_back([w], None, origin)["k"].rule == tr.SYNC_FLOOR


@settings(max_examples=1500, deadline=None)
@given(st.integers(0, 10**9))
def test_the_whole_path_never_places_a_group_past_a_record_it_has_not_read_and_is_exact_when_gap_free(seed):
    assert not violations(seed), (seed, violations(seed), world(seed))


@settings(max_examples=1500, deadline=None)
@given(st.integers(0, 10**9))
def test_the_plan_never_commits_a_group_past_a_record_it_has_not_read_rewound_or_not(seed):
    """The fallbacks included: MM2's checkpoint where nothing is proven, the sync floor, and a checkpoint ahead of a
    group rewound on the source (issue 50 item 1: planned at MM2's checkpoint, 164 records skipped on a real bed)."""
    assert not plan_violations(seed), (seed, plan_violations(seed), world(seed))


def test_mutation_5_a_checkpoint_ahead_of_a_rewound_group_is_caught(monkeypatch):
    """Issue 50 item 1: the plan taking MM2's checkpoint without comparing it with the group's source commit."""
    from mm2_failover.rules import plan as pm

    monkeypatch.setattr(pm, "_rewound", lambda cp, commit: False)
    assert next((seed for seed in MUTATION_SEEDS if plan_violations(seed)), None) is not None


def _rule_1a_mutation_caught(monkeypatch, mutated) -> int | None:
    from mm2_failover.rules import plan as pm

    monkeypatch.setattr(pm, "_reading_answers", mutated)
    return next((seed for seed in MUTATION_SEEDS if any(v[0] == "LOST" for v in plan_violations(seed))), None)


def test_mutation_18_the_archives_newer_reading_taken_above_mm2s_checkpoint_is_caught(monkeypatch):
    """Issue 50 item 7, plan rule 1a as first written (a review's): the reading taken where it is newer than MM2's
    checkpoint, also above it - a group reset after the reading to MM2's checkpoint or above is never checkpointed
    (MM2 writes one only for a rewind below its last one, or where its translation moves on)."""

    def first_rule(offset, read, cp, margin):
        if read is None:
            return False
        if cp is None or (cp[1] is not None and read[0] - cp[1] > margin):
            return True
        if cp[1] is not None and cp[1] - read[1] > margin:
            return False
        return offset < cp[0]

    assert _rule_1a_mutation_caught(monkeypatch, first_rule) is not None


def test_mutation_19_mm2s_checkpoint_taken_over_a_reset_the_archive_read_is_caught(monkeypatch):
    """Before rule 1a: with the source lost MM2's checkpoint was the position, also of a group reset backwards after
    it (the drill's rewound group lost 48 records)."""
    assert (
        _rule_1a_mutation_caught(monkeypatch, lambda offset, read, cp, margin: read is not None and cp is None)
        is not None
    )


def test_mutation_20_rule_1a_without_its_clock_margin_is_caught(monkeypatch):
    """A checkpoint whose timestamp is later than the reading by less than the clocks' difference is not the newer."""
    assert (
        _rule_1a_mutation_caught(
            monkeypatch,
            lambda offset, read, cp, margin: (
                read is not None and (cp is None or (offset < cp[0] and (cp[1] is None or cp[1] <= read[1])))
            ),
        )
        is not None
    )


# ------------------------------------------------------------------------------------------ the mutations

MUTATION_SEEDS = range(6000)


def caught(kind: str = "LOST") -> int | None:
    """The first seed whose world the (mutated) path answers with a violation of this kind - by default, places past
    a record the group has not read (None: the property would not catch the mutation)."""
    return next((seed for seed in MUTATION_SEEDS if any(v[0] == kind for v in violations(seed))), None)


def test_mutation_1_reads_that_jump_to_the_log_end_are_caught(monkeypatch):
    """Item 1: no reset=error (librdkafka's default) and no special case for positions below the log start."""
    monkeypatch.setattr(cluster, "BOUNDED_READ_CONF", {})
    monkeypatch.setattr(ev, "below_log_start", lambda u, start: False)
    assert caught() is not None


def test_mutation_2_evidence_that_was_not_read_is_caught(monkeypatch):
    """Item 2: a read over the budget (or failed) taken as a complete, empty one."""
    monkeypatch.setattr(ev, "is_evidence", lambda read: read is not None)
    assert caught() is not None


def test_mutation_3_a_bracket_without_contiguity_is_caught(monkeypatch):
    """Item 3: rule 6 counting duplicates only."""

    def no_duplicates_only(read, lo, hi):
        span = read.span(lo, hi) if ev.is_evidence(read) else []
        return ev.is_evidence(read) and len({r.content for r in span}) == len(span)

    monkeypatch.setattr(ev, "one_to_one", no_duplicates_only)
    assert caught() is not None


def test_mutation_4_the_last_content_twin_is_caught(monkeypatch):
    """Item 4: the lookup taking the last candidate, whatever it is."""
    monkeypatch.setattr(ev, "choose_copy", lambda cands, later: max(cands) if cands else None)
    assert caught() is not None


def test_mutation_8_a_group_never_checkpointed_below_every_sync_left_without_a_commit_is_caught(monkeypatch):
    """Issue 50 item 6: no replica-start floor for a drained position below every offset sync."""
    monkeypatch.setattr(ev, "replica_floor", lambda o: None)
    assert next((seed for seed in MUTATION_SEEDS if plan_violations(seed)), None) is not None


def test_mutation_15_the_archive_floor_in_a_history_cut_short_is_caught(monkeypatch):
    """Issue 50 item 7: rule 10 without its guard - the newest sync at or below the position, whatever its history
    (MM2's checkpoint's answer): records only an earlier history copied are skipped."""

    def newest(self, upstream, replica_end=None):
        below = [
            (d, u)
            for u, d in zip(self._by_d_ups.tolist(), self._by_d_downs.tolist())
            if u <= upstream and (replica_end is None or d < replica_end)
        ]
        return None if not below else (max(below)[0] + (0 if max(below)[1] == upstream else 1), False, max(below)[0])

    monkeypatch.setattr(SyncIndex, "history_floor", newest)
    assert caught("LOST BEHIND A SYNC") is not None


def test_mutation_16_mm2s_checkpoint_over_a_floor_of_a_history_cut_short_is_caught(monkeypatch):
    """The review's: ``resume_at`` letting MM2's checkpoint win over an archive floor whose newest sync's history was
    cut short (the checkpoint is in that history: it skips what only the earlier one copied)."""
    real = ev.resume_at

    def checkpoint_wins(o, checkpointed, checkpoint_at=None):
        if (
            o.answer is not None
            and o.answer[1] == tr.ARCHIVE_FLOOR
            and checkpoint_at is not None
            and checkpoint_at >= o.answer[0]
        ):
            return None
        return real(o, checkpointed, checkpoint_at)

    monkeypatch.setattr(ev, "resume_at", checkpoint_wins)
    assert (
        next((s for s in MUTATION_SEEDS if any(v[0] == "LOST BEHIND A SYNC" for v in plan_violations(s))), None)
        is not None
    )


def test_mutation_9_an_earlier_historys_bracket_called_exact_is_caught(monkeypatch):
    """Issue 50 item 3: the gap-free bracket of the history before an MM2 restart, called exact while the restarted
    history copied the group's next record again. The property's EXACT BUT RE-READS catches it on the worlds shaped
    for it (RECOPIED: the earlier history's syncs dense, the later one's sparse, groups in the range copied twice),
    and so does the example. E9 (``later_copy``) reads the later history's range too: the mutation is taken with E9
    off (with it on, the property still catches it, on one world in seeds 0-5999)."""
    monkeypatch.setattr(ev, "later_copy", lambda c, answer, t_reads, s_reads: answer)
    monkeypatch.setattr(SyncIndex, "recopied_since", lambda self, i, lo, end: False)
    monkeypatch.setattr(SyncIndex, "reached_again", lambda self, hi, end: None)
    assert caught("EXACT BUT RE-READS") is not None
    with pytest.raises(AssertionError):
        test_e2_an_earlier_historys_bracket_is_not_the_answer_after_a_restart_copied_the_record_again()


def test_mutation_17_e6_comparing_the_anchored_runs_as_multisets_is_caught(monkeypatch):
    """The review's: E6 proving a later candidate when the target's run up to the anchor holds the source's records
    as a multiset, in any order. A record retried twice (x, x, s, x) and MM2 restarted right after copying the
    third write (x, x, s, x, x on the target): the run from the second x (x, s, x, x) holds the source's records
    from the first (x, x, s, x), another order. Such a run holds only copies of records at or after the next one,
    each content as often as the source: the group loses no content and re-reads no record, so LOST and the re-read
    counts cannot tell. The property's OUT OF ORDER does, on the worlds shaped for it (PERMUTED)."""

    def as_multisets(target, start, anchor_d, source, position, anchor_u):
        if (
            not (ev.is_evidence(target) and ev.is_evidence(source))
            or target.hi <= anchor_d
            or source.hi <= anchor_u
            or source.lo > position
        ):
            return False
        return Counter(r.content for r in target.span(start, anchor_d)) == Counter(
            r.content for r in source.span(position, anchor_u)
        )

    source = ["a", "x", "x", "s", "x", "b"]
    target = ["a", "x", "x", "s", "x", "x", "b"]  # MM2 restarted at 4 (a sync there), x copied again
    src, tgt = logs(source, target)
    assert prove_one(src, tgt, [(0, 0), (4, 5)], 1, drained=(6, 7)).answer == (1, tr.FIRST_COPY)
    monkeypatch.setattr(ev, "anchored", as_multisets)
    assert prove_one(src, tgt, [(0, 0), (4, 5)], 1, drained=(6, 7)).answer == (2, tr.RECORD_LOOKUP)
    assert caught("OUT OF ORDER") is not None


def test_mutation_22_a_sync_a_later_history_may_have_reached_again_left_to_the_checkpoint_is_caught(monkeypatch):
    """The review's: below the source's log start, on a drained partition, a sync at the position whose next sync a
    later history reached again (``reached_again``) answered nothing (no first copy): MM2's checkpoint, "not proven
    by the records", where the sync proves the first copy. The property's SYNC LEFT TO THE CHECKPOINT (the uniform
    draw's worlds, more of the UNSYNCED ones)."""
    real = SyncIndex.translate

    def no_first_copy(self, *args, **kwargs):
        t = real(self, *args, **kwargs)
        return dataclasses.replace(t, first_copy=None) if isinstance(t, tr.Unproven) else t

    monkeypatch.setattr(SyncIndex, "translate", no_first_copy)
    assert caught("SYNC LEFT TO THE CHECKPOINT") is not None


def test_mutation_23_the_first_copy_of_a_voided_bracket_taken_unproven_is_caught(monkeypatch):
    """A previous attempt at mutation 22's fix: the arithmetic of a bracket a later history may have reached again
    taken as its first copy without E4 (one to one on the target). Its upper sync can be a later history's (a
    restart inside the bracket): the arithmetic is then off - on the PERMUTED worlds, a record lost at seeds 16939
    and 547451, and over the mutation seeds OUT OF ORDER (a copy of a later twin)."""
    real = tr.decide

    def unproven(e):
        got = real(e)
        t = e.translation
        if got is None and isinstance(t, tr.Unproven) and t.first_copy is not None:
            return t.first_copy.downstream, tr.SUPERSEDED_SYNC
        return got

    monkeypatch.setattr(tr, "decide", unproven)
    assert any(v[0] == "LOST" for v in violations(547451))
    assert caught("OUT OF ORDER") is not None


def test_mutation_24_a_lookup_a_later_history_may_have_reached_again_called_exact_where_not_drained_is_caught(
    monkeypatch,
):
    """With replication not known to be finished, E6's lookup in an earlier history's range whose upper sync a later
    history reached again: its copy called record_lookup, exact. EXACT BUT RE-READS on the UNSYNCED worlds. E9
    (``later_copy``) finds these restarts by their copies too: the mutation is taken with E9 off."""
    monkeypatch.setattr(ev, "later_copy", lambda c, answer, t_reads, s_reads: answer)
    real = ev.first_copy_only
    monkeypatch.setattr(
        ev,
        "first_copy_only",
        lambda index, answer, translated, end: answer[1] != tr.RECORD_LOOKUP and real(index, answer, translated, end),
    )
    assert caught("EXACT BUT RE-READS") is not None


def test_mutation_25_a_restart_whose_first_sync_was_never_written_left_unsearched_is_caught(monkeypatch):
    """E9 off (the former known limit): an earlier history's copy called exact where a restart above it,
    its first sync never written, copied the record again. EXACT BUT RE-READS on the UNSYNCED worlds."""
    monkeypatch.setattr(ev, "later_copy", lambda c, answer, t_reads, s_reads: answer)
    assert caught("EXACT BUT RE-READS") is not None


def test_mutation_26_a_restarts_copy_taken_without_its_anchor_is_caught(monkeypatch):
    """E9 taking the last copy in a restart's range unproven (no run anchored record for record up to its sync): a
    later twin's copy, or one whose run the restart copied differently."""

    def unanchored(c, answer, t_reads, s_reads):
        nxt = c.next.record
        for p, b, key in c.restart_reads:
            read = t_reads.get(key) if key is not None else None
            if nxt is not None and ev.is_evidence(read) and b.downstream > answer[0]:
                cands = [x for x in ev.candidates(read, p.downstream + 1, b.downstream, nxt.content) if x > answer[0]]
                if cands:
                    answer = (max(cands), tr.RECORD_LOOKUP)
        return answer

    monkeypatch.setattr(ev, "later_copy", unanchored)
    assert any(caught(kind) is not None for kind in ("LOST", "OUT OF ORDER"))


def test_mutation_27_e9_pairs_chosen_against_the_brackets_lower_sync_are_caught(monkeypatch):
    """A review's F1: E9's pairs planned for an answer at the bracket's lower sync, not anywhere up to its top. The
    UNSYNCED worlds with sparser syncs and up to three restarts: EXACT BUT RE-READS."""
    real = ev._plan_restart_reads
    monkeypatch.setattr(
        ev,
        "_plan_restart_reads",
        lambda c, ranges, bounds, reach: real(c, ranges, bounds, c.translation.bracket[0].downstream),
    )
    assert caught("EXACT BUT RE-READS") is not None


def test_mutation_28_e9_without_its_rounds_is_caught(monkeypatch):
    """A review's F2: an answer E9 moved up to a restart's copy, the pairs close to it never read. Rare in the
    generated worlds (4 of seeds 6000-59,999): the property is held to it on those seeds."""
    monkeypatch.setattr(ev, "E9_ROUNDS", 0)
    assert any(v[0] == "EXACT BUT RE-READS" for s in (31354, 37139) for v in violations(s))


def test_mutation_29_a_rewound_group_below_every_sync_left_without_the_replica_floor_is_caught(monkeypatch):
    """The drill flake hunt's finding: plan rule 1b without its last floor - a group rewound on the source below MM2's
    checkpoint and below every offset sync of a drained partition skipped (its consumers then at auto.offset.reset).
    The plan's NO COMMIT (12 of seeds 0-2999, the first 32)."""
    from mm2_failover.rules import plan as pm

    real = pm.build_plan
    monkeypatch.setattr(pm, "build_plan", lambda *a, **k: real(*a, **{**k, "replica_floors": None}))
    assert next((s for s in MUTATION_SEEDS if any(v[0] == "NO COMMIT" for v in plan_violations(s))), None) is not None


def test_the_index_and_the_evidence_agree_on_a_superseded_sync():
    u = SyncIndex([(0, 0), (4, 4), (2, 6), (8, 12)]).translate(4)
    assert isinstance(u, tr.Unproven) and u.superseded == Sync(4, 4) and u.bracket == (Sync(2, 6), Sync(8, 12))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_worlds_are_reproducible(seed):
    assert world(seed) == world(seed)


# ------------------------------------------------------------------------------------------ E10: one proof per question


def test_e10_groups_at_the_same_position_get_the_outcome_of_one_proof(monkeypatch):
    src, tgt = logs(list("abcdefghij") + [MARKER], list("abcdefghij"))
    index = SyncIndex([(0, 0), (9, 9)])
    decided = Counter()
    real = ev._decide

    def counted(c, *a):
        decided[c.want.position] += 1
        return real(c, *a)

    monkeypatch.setattr(ev, "_decide", counted)
    wants = [ev.Want((g, u), "a", SRC, REP, u, index, (11, 10), 0) for g in range(50) for u in (1, 6, 10)]
    got = ev.prove(wants, {"a": src}, tgt)
    assert len(got) == 150
    for u, answer in ((1, (1, tr.BRACKET)), (6, (6, tr.BRACKET)), (10, (10, tr.AT_END))):
        assert {got[(g, u)] for g in range(50)} == {got[(0, u)]} and got[(0, u)].answer == answer
    assert decided == {1: 1, 6: 1, 10: 1}  # decided once per position, not once per group


def test_e10_the_question_is_everything_an_outcome_depends_on():
    """Same position, another drained end or replica start, another index: another question (a key leaving one out
    would hand one group another's outcome)."""
    src, tgt = logs(list("abcdefghij") + [MARKER], list("abcdefghij"))
    index = SyncIndex([(0, 0), (9, 9)])
    drained = ev.Want("drained", "a", SRC, REP, 10, index, (11, 10), 0)
    not_drained = ev.Want("not", "a", SRC, REP, 10, index, None, 0)
    got = ev.prove([drained, not_drained], {"a": src}, tgt)
    assert got["drained"].answer == (10, tr.AT_END) and got["not"] != got["drained"]
    base = ev.question(drained)
    for other in (
        dataclasses.replace(drained, drained=None),
        dataclasses.replace(drained, replica_start=3),
        dataclasses.replace(drained, index=SyncIndex([(0, 0), (9, 9)])),
        dataclasses.replace(drained, position=9),
        dataclasses.replace(drained, alias="b"),
        dataclasses.replace(drained, source_tp=("other", 0)),
        dataclasses.replace(drained, replica_tp=("primary.other", 0)),
    ):
        assert ev.question(other) != base, other
    assert ev.question(dataclasses.replace(drained, key="someone else")) == base


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 10**9))
def test_e10_on_generated_worlds_each_groups_outcome_is_the_one_it_gets_proven_alone(seed):
    """Every position asked by three groups at once: each group's outcome is the one a proof of its own gives (the
    path before E10, each want its own case: a differential test of the two)."""
    from testbed.worlds import outcomes as world_outcomes

    w = world(seed)
    shared = world_outcomes(w, seed, groups=3)
    own = world_outcomes(w, seed, groups=3, one_proof_per_want=True)
    assert shared == own
    assert {u: o for (g, u), o in shared.items() if g == 0} == world_outcomes(w, seed)


def test_e10_a_group_gets_the_outcome_of_its_own_position_even_if_a_key_repeats():
    """Found by a review: the twins pointed at the first want's key, and a later want with that key and another
    position overwrote it."""
    src, tgt = logs(list("abcdefghij") + [MARKER], list("abcdefghij"))
    index = SyncIndex([(0, 0), (9, 9)])

    def w(k, u):
        return ev.Want(k, "a", SRC, REP, u, index, (11, 10), 0)

    got = ev.prove([w("k1", 1), w("k2", 1), w("k1", 10)], {"a": src}, tgt)
    assert got["k2"].answer == (1, tr.BRACKET), got["k2"].answer
    assert got["k1"].answer == (10, tr.AT_END)  # a repeated key: the last want's, as before E10


def test_mutation_31_e10_handing_a_group_another_positions_outcome_is_caught(monkeypatch):
    """E10's question without the position (groups of a partition sharing one proof whatever their positions): the
    differential property above finds a world where a group's outcome is not its own proof's."""
    monkeypatch.setattr(ev, "question", lambda w: (w.alias, w.source_tp, w.replica_tp, id(w.index), w.drained))
    from testbed.worlds import outcomes as world_outcomes

    def differs(seed):
        w = world(seed)
        return world_outcomes(w, seed, groups=2) != world_outcomes(w, seed, groups=2, one_proof_per_want=True)

    assert next((s for s in MUTATION_SEEDS if differs(s)), None) is not None


# ------------------------------------------------------------------------------------------ reads: one copy per segment


def test_reads_inside_one_read_of_a_partition_share_its_records_and_answer_only_for_their_own_range():
    """At 10k groups at positions of their own, each range's own copy of its records and their indexes held 11.3 GB
    in build_plan (the RTO bench with --records 10000): ranges read inside one read share it (evidence.Segment)."""
    src, _tgt = logs(list("abcdefghijklmnopqrst"), [])
    ranges = {SRC: {(lo, lo + 10) for lo in range(0, 10)}}
    reads = src.read_ranges(ranges, 100)
    segs = {id(r.segment) for r in reads.values()}
    assert len(segs) == 1 and all(not isinstance(r.records, tuple) for r in reads.values())
    r = reads[(SRC, 5, 15)]
    assert [x.offset for x in r.records] == list(range(5, 15)) and len(r.records) == 10
    assert r.records[0].offset == 5 and r.records[-1].offset == 14 and [x.offset for x in r.records[1:3]] == [6, 7]
    assert r.at(4) is None and r.at(15) is None and r.at(5).content == "f"  # the segment holds 4 and 15: not this read
    assert [x.offset for x in r.span(0, 19)] == list(range(5, 15))
    assert r.copies(0, 19, "e") == [] and r.copies(0, 19, "f") == [5] and r.copies(0, 19, "p") == []
    assert r == ev.Read(5, 15, ev.COMPLETE, tuple(r.records))  # equal to the same read holding its own copy
