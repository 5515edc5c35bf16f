"""The plan against the target's commits now (mm2_failover/rules/plandiff.py), by rule."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mm2_failover.rules import plandiff as d

# ------------------------------------------------------------------------------------------ 1. state of a partition


def test_a_partition_at_its_planned_offset_is_as_planned_whatever_it_was_before():
    assert d.state_of(before=3, planned=7, now=7) == d.AS_PLANNED
    assert d.state_of(before=None, planned=7, now=7) == d.AS_PLANNED
    assert d.state_of(before=7, planned=7, now=7) == d.AS_PLANNED  # nothing to change: already there


def test_a_partition_still_at_its_commit_before_the_run_is_not_written_yet():
    assert d.state_of(before=3, planned=7, now=3) == d.NOT_WRITTEN
    assert d.state_of(before=None, planned=7, now=None) == d.NOT_WRITTEN


def test_any_other_offset_moved_since_and_no_commit_at_all_is_gone():
    assert d.state_of(before=3, planned=7, now=9) == d.MOVED
    assert d.state_of(before=3, planned=7, now=5) == d.MOVED
    assert d.state_of(before=None, planned=7, now=2) == d.MOVED
    assert d.state_of(before=3, planned=7, now=None) == d.GONE


@given(st.one_of(st.none(), st.integers(0, 20)), st.integers(0, 20), st.one_of(st.none(), st.integers(0, 20)))
def test_every_partition_has_exactly_one_state_and_as_planned_means_the_planned_offset(before, planned, now):
    s = d.state_of(before, planned, now)
    assert s in d.STATES
    assert (s == d.AS_PLANNED) == (now == planned)
    assert (s == d.GONE) == (now is None and now != before and now != planned)


# ------------------------------------------------------------------------------------------ 2. bounded


def test_at_most_the_limit_of_groups_is_read_in_the_plans_order_and_the_rest_is_counted():
    groups = [f"g{i}" for i in range(5)] + ["g1"]
    assert d.select_groups(groups, limit=3) == (["g0", "g1", "g2"], 2)
    assert d.select_groups(groups, contains="g3", limit=3) == (["g3"], 0)
    assert d.select_groups(groups, contains="nope") == ([], 0)


# ------------------------------------------------------------------------------------------ 3. summary


def w(g, p, before, planned):
    return {"group": g, "topic": "primary.t", "partition": p, "current_offset": before, "planned_offset": planned}


def test_the_summary_counts_each_state_and_lists_the_groups_off_the_plan_worst_first():
    writes = [w("a", 0, None, 5), w("a", 1, 2, 6), w("b", 0, 1, 4), w("c", 0, 3, 8), w("d", 0, 0, 1)]
    now = {"a": {("primary.t", 0): 5, ("primary.t", 1): 2}, "b": {("primary.t", 0): 9}, "c": {}}
    got = d.diff(writes, now, ["a", "b", "c"], left_out=1)
    assert got.counts == {d.MOVED: 1, d.GONE: 1, d.NOT_WRITTEN: 1, d.AS_PLANNED: 1}
    assert got.groups_off_plan == ["b", "c", "a"]
    assert [(r["group"], r["partition"], r["state"]) for r in got.rows] == [
        ("b", 0, d.MOVED),
        ("c", 0, d.GONE),
        ("a", 1, d.NOT_WRITTEN),
        ("a", 0, d.AS_PLANNED),
    ]
    assert (got.groups_read, got.groups_left_out) == (3, 1)  # d was not read: not in the rows
