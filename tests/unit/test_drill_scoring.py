"""The exact-failover drill's scoring (testbed/exact_drill.py): what counts as lost, re-read and phantom."""

from __future__ import annotations

from testbed.exact_drill import PointResult, Truth, render, score, summarize


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


def test_summary_counts_points_without_checkpoints_and_their_answers():
    pts = [PointResult("burst", "exact", "g", 0, 5, False, True, "gap_free_bracket", 5, 0, 0, 0, 0, True),
           PointResult("burst", "exact", "g", 1, 5, True, True, "checkpoint", 3, 0, 2, 0, None),
           PointResult("burst", "checkpoint", "g", 0, 5, False, False)]
    rows = {r["translation"]: r for r in summarize(pts)}
    assert rows["exact"] | {"rules": None} == {"pattern": "burst", "translation": "exact", "points": 2, "answered": 2,
                                                "no_checkpoint": 1, "no_checkpoint_answered": 1, "lost": 0,
                                                "re_read": 2, "phantom": 0, "said": 0, "said_unknown": 1,
                                                "said_off": 0, "rules": None}
    assert rows["checkpoint"]["answered"] == 0 and rows["checkpoint"]["no_checkpoint"] == 1
    assert "| burst | exact | 2 | 2 | 1 (1) | 0 | 2 | 0 + unknown on 1 | 0 | checkpoint 1, gap_free_bracket 1 |" \
        in render(summarize(pts))


def test_a_figure_more_than_ten_percent_off_the_records_is_counted_off():
    pts = [PointResult("burst", "exact", "g", 0, 5, True, True, "checkpoint", 3, 0, 20, 0, 17),
           PointResult("burst", "exact", "g", 1, 5, True, True, "checkpoint", 3, 0, 20, 0, 18)]
    [row] = summarize(pts)
    assert (row["said"], row["said_off"]) == (35, 1) and "35 (1 off)" in render([row])
