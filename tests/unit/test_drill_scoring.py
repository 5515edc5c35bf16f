"""The exact-failover drill's scoring (testbed/exact_drill.py): what counts as lost, re-read and phantom."""

from __future__ import annotations

from testbed.exact_drill import PointResult, Truth, gate_summary, refused_by_gate, render, score, summarize


def truth(n: int, aborted=(), gone=()) -> Truth:
    """Payloads b"0".. b"n-1" at source offsets 0..n-1."""
    offsets = {str(i).encode(): i for i in range(n)}
    present = frozenset(v for v, o in offsets.items() if o not in gone and o not in aborted)
    return Truth(offsets, frozenset(str(i).encode() for i in aborted), present)


def copies(source_offsets) -> list[tuple[int, bytes]]:
    return [(d, str(s).encode()) for d, s in enumerate(source_offsets)]


def test_resuming_at_the_copy_of_the_next_record_loses_and_re_reads_nothing():
    assert score(5, 5, copies(range(10)), truth(10)) == (0, 0, 0)


def test_resuming_early_re_reads_and_late_loses():
    assert score(2, 5, copies(range(10)), truth(10)).re_read == 3
    s = score(7, 5, copies(range(10)), truth(10))
    assert (s.lost, s.re_read) == (2, 0)


def test_a_record_copied_twice_is_lost_only_if_no_copy_is_ahead():
    c = copies([0, 1, 2, 3, 4, 2, 3, 4, 5])  # MM2 restarted and copied 2..4 again
    assert score(5, 2, c, truth(6)) == (0, 0, 0)  # the second copies of 2..4 are ahead: nothing lost
    assert score(5, 1, c, truth(6)).lost == 1  # record 1 has no copy ahead


def test_aborted_copies_ahead_are_phantoms_never_losses():
    c = copies(range(10))
    s = score(3, 3, c, truth(10, aborted=(4, 5)))
    assert (s.lost, s.re_read, s.phantom) == (0, 0, 2)
    assert score(6, 3, c, truth(10, aborted=(3, 4, 5))).lost == 0  # skipping only aborted copies loses nothing


def test_a_copy_the_source_compacted_away_is_not_lost_when_skipped_but_is_a_re_read_when_read_again():
    c = copies(range(10))
    assert score(6, 4, c, truth(10, gone=(4, 5))).lost == 0  # the group would never have read 4, 5 on the source
    assert score(6, 4, c, truth(10, gone=(6,))).lost == 2
    assert score(2, 4, c, truth(10, gone=(2,))).re_read == 2  # 2 (gone) and 3 are before the position


def test_mm2s_duplicates_of_a_twin_ahead_of_the_position_are_not_re_reads():
    """The drill's own scoring, found on bench/results/exact-drill-20261128-130854.json (twins, exact: 6 re-read per
    point said 0, every group at its record's copy): a payload written twice (source 3 and 5) that MM2 copied twice
    more after a restart (2..6 re-copied) has four copies ahead of a group at 1 - none of them a record the group
    had read (both writes are ahead of it), as a non-twin's duplicate ahead never counts: 0, not 2. Both writes read
    (the group at 6), each copy ahead is a re-read, as for a non-twin."""
    t = Truth({b"0": 0, b"1": 1, b"2": 2, b"x": 3, b"4": 4, b"6": 6}, twins={b"x": (3, 5)})
    c = list(enumerate([b"0", b"1", b"2", b"x", b"4", b"x", b"6", b"2", b"x", b"4", b"x", b"6"]))
    assert score(1, 1, c, t).re_read == 0
    assert score(5, 6, c, t).re_read == 5  # 2 and 4 again (at 7, 9), and x three times (at 5, 8, 10)


def test_summary_counts_points_without_checkpoints_and_their_answers():
    pts = [
        PointResult("burst", "exact", "g", 0, 5, False, True, "gap_free_bracket", 5, 0, 0, 0, 0, True),
        PointResult("burst", "exact", "g", 1, 5, True, True, "checkpoint", 3, 0, 2, 0, None),
        PointResult("burst", "checkpoint", "g", 0, 5, False, False),
    ]
    rows = {r["translation"]: r for r in summarize(pts)}
    assert rows["exact"] | {"rules": None} == {
        "pattern": "burst",
        "translation": "exact",
        "points": 2,
        "answered": 2,
        "no_checkpoint": 1,
        "no_checkpoint_answered": 1,
        "lost": 0,
        "re_read": 2,
        "phantom": 0,
        "said": 0,
        "said_unknown": 1,
        "said_off": 0,
        "rules": None,
        "bar_points": 0,
        "bar_re_read": 0,
        "re_read_at_bar": 0,
        "bar_lossy": 0,
    }
    assert rows["checkpoint"]["answered"] == 0 and rows["checkpoint"]["no_checkpoint"] == 1
    assert (
        "| burst | exact | 2 | 2 | 1 (1) | 0 | 2 | 0 + unknown on 1 | 0 |  | checkpoint 1, gap_free_bracket 1 |"
        in render(summarize(pts))
    )


def test_a_figure_more_than_ten_percent_off_the_records_is_counted_off():
    pts = [
        PointResult("burst", "exact", "g", 0, 5, True, True, "checkpoint", 3, 0, 20, 0, 17),
        PointResult("burst", "exact", "g", 1, 5, True, True, "checkpoint", 3, 0, 20, 0, 18),
    ]
    [row] = summarize(pts)
    assert (row["said"], row["said_off"]) == (35, 1) and "35 (1 off)" in render([row])


# ------------------------------------------------------------- tail_never_copied (issue 50 item 2): the drain gate
def test_a_record_the_source_holds_that_mm2_never_copied_is_lost_once_the_failover_commits_past_it():
    """Source 0..9, MM2 copied 0..6 and then 4..6 again (a restart's re-copies): the replica (10 copies) is as long as
    the source, but 7..9 have no copy. A group at 5 resuming anywhere on the replica never reads 7..9 - counted when
    the scorer is told to count records never copied (the failover's loss, not only the plan's)."""
    c = copies([0, 1, 2, 3, 4, 5, 6, 4, 5, 6])
    assert score(10, 5, c, truth(10)).lost == 2  # by default only what MM2 copied counts (the plan's own loss: 5, 6)
    assert score(10, 5, c, truth(10), uncopied=True).lost == 2 + 3  # 5, 6 skipped + 7..9 never copied
    assert score(5, 5, c, truth(10), uncopied=True) == (3, 1, 0)  # at the copy of 5: 7..9 lost, 4's re-copy re-read
    assert score(5, 5, c, truth(10, aborted=(8, 9)), uncopied=True).lost == 1  # aborted records are never lost
    assert score(5, 5, c, truth(10, gone=(7,)), uncopied=True).lost == 2  # nor those the source no longer holds
    assert score(5, 8, c, truth(10), uncopied=True).lost == 2  # records before the position are not the group's


def test_points_the_drain_gate_refused_are_not_answered_lose_nothing_and_say_so_in_the_rules():
    pts = [PointResult("tail_never_copied", "exact", "g", p, 5, True, False, refused=True) for p in range(3)]
    pts.append(
        PointResult("tail_never_copied", "exact, source lost", "g", 0, 5, True, True, "checkpoint", 7, 10, 0, 0, None)
    )
    rows = {r["translation"]: r for r in summarize(pts)}
    exact = rows["exact"]
    assert (
        exact["points"],
        exact["answered"],
        exact["lost"],
        exact["re_read"],
        exact["said"],
        exact["said_unknown"],
    ) == (3, 0, 0, 0, 0, 0)
    assert exact["rules"] == {"drain refused": 3}
    text = render(summarize(pts))
    assert "| tail_never_copied | exact | 3 | 0 | 0 (0) | 0 | 0 | 0 | 0 |  | drain refused 3 |" in text
    assert (
        "| tail_never_copied | exact, source lost | 1 | 1 | 0 (0) | 10 | 0 | 0 + unknown on 1 | 0 |  | checkpoint 1 |"
        in text
    )


def test_the_new_patterns_rows_come_after_every_other_patterns():
    pts = [
        PointResult(pat, "exact", "g", 0, 5, True, True, "checkpoint", 5)
        for pat in ("tail_never_copied", "rewound", "exactly_once", "burst")
    ]
    assert [r["pattern"] for r in summarize(pts)] == ["burst", "exactly_once", "rewound", "tail_never_copied"]


def verdict(drained: bool, *rows: tuple[str, int, int | None, int | None, str]) -> dict:
    """A drain verdict as drain.json keeps it: rows (topic, partition, source end, replica end, state)."""
    return {
        "drained": drained,
        "rows": [
            {"topic": t, "partition": p, "source_end": s, "replica_end": r, "state": st} for t, p, s, r, st in rows
        ],
    }


def test_a_gate_verdict_is_recorded_per_partition_beside_what_the_old_end_offset_rule_said():
    v = verdict(
        False,
        ("t", 0, 110, 120, "replication behind"),
        ("t", 1, 110, 100, "replication behind"),
        ("other", 0, 5, 5, "drained"),
    )
    assert gate_summary(v, "t") == {
        "drained": False,
        "states": {0: "replication behind", 1: "replication behind"},
        "old_rule_drained": {0: True, 1: False},
    }
    lost = verdict(True, ("t", 0, None, 120, "drained"))  # disaster mode: no source end, the old rule says nothing
    assert gate_summary(lost, "t") == {"drained": True, "states": {0: "drained"}, "old_rule_drained": {0: None}}


def test_the_failover_is_refused_only_when_every_gate_it_could_run_under_refuses():
    behind, drained = {"drained": False}, {"drained": True}
    assert refused_by_gate([behind, behind]) is True
    assert refused_by_gate([behind, drained]) is False  # a gate that passes lets the plan through: scored, loss shown
    assert refused_by_gate([drained]) is False


def test_the_newest_sync_at_or_below_the_position_is_mm2s_rule_over_the_archive():
    from testbed.exact_drill import newest_sync_at_or_below

    syncs = ([0, 10, 10, 20, 5], [0, 10, 30, 20, 40])  # a later history re-copied from 5 (its copy at 40)
    assert newest_sync_at_or_below(syncs, 10, 100) == 41  # the highest copy at or below: 5 -> 40, plus one
    assert newest_sync_at_or_below(syncs, 10, 35) == 30  # at the position: its copy; 40 is past the replica's end
    assert newest_sync_at_or_below(syncs, 4, 35) == 1
    assert newest_sync_at_or_below(([7], [7]), 3, 100) is None


def test_the_bar_is_summed_where_it_loses_nothing_beside_the_plans_re_read_there():
    lost = "exact, source lost"
    pts = [
        PointResult(
            "burst", lost, "g", 0, 50, True, True, "checkpoint", 10, 0, 40, 0, None, bar_re_read=30, bar_lost=0
        ),
        PointResult(
            "burst", lost, "g", 1, 50, True, True, "archive_floor", 45, 0, 5, 0, None, bar_re_read=9, bar_lost=2
        ),
        PointResult("burst", lost, "g", 2, 50, True, True, "archive_floor", 45, 0, 5, 0, None),
    ]
    [row] = summarize(pts)
    assert (row["bar_points"], row["bar_re_read"], row["re_read_at_bar"], row["bar_lossy"]) == (1, 30, 40, 1)
    assert "| 30 (40), loses on 1 |" in render([row])
