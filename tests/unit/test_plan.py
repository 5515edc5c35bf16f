"""The failover plan (mm2_failover.rules.plan): every rule of the module docstring, on hand-built inputs."""

from __future__ import annotations

from dataclasses import fields

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mm2_failover.rules import plan as pm
from mm2_failover.rules.checkpoints import Checkpoint
from mm2_failover.rules.plan import PartitionBounds, PlanError, PlanRow

T = "primary.orders"
U = "primary.users"


def cp(group="app", topic=T, partition=0, down=10, up=None, alias="primary", metadata=""):
    return Checkpoint(group, topic, partition, 100 + down if up is None else up, down, metadata, source_alias=alias)


def bounds(start=0, end=1000, topic=T, partitions=1):
    return {(topic, p): PartitionBounds(start, end) for p in range(partitions)}


def build(cps, b=None, current=None, parts=None, **kw):
    return pm.build_plan(cps, bounds() if b is None else b, current or {}, parts or {T: 1}, **kw)


def row(plan, group="app", topic=T, partition=0) -> PlanRow:
    (r,) = [r for r in plan.rows if (r.group, r.topic, r.partition) == (group, topic, partition)]
    return r


# ----------------------------------------------------------------------------------- plain commits


def test_a_checkpoint_inside_the_log_is_committed_as_is():
    p = build([cp(down=10, up=110, metadata="m")], b=bounds(5, 20), current={"app": {}})
    r = row(p)
    assert (r.action, r.reason, r.planned_offset) == (pm.COMMIT, "", 10)
    assert (r.upstream_offset, r.downstream_offset, r.current_offset) == (110, 10, None)
    assert (r.log_start, r.log_end, r.retention_gap, r.metadata, r.source_alias) == (5, 20, 0, "m", "primary")
    assert r.writes


@pytest.mark.parametrize("down", [5, 20])
def test_the_log_bounds_themselves_are_not_clamped(down):
    r = row(build([cp(down=down)], b=bounds(5, 20)))
    assert (r.action, r.planned_offset, r.retention_gap) == (pm.COMMIT, down, 0)


def test_without_bounds_nothing_is_clamped():
    r = row(build([cp(down=10**12)], b={}))
    assert (r.action, r.planned_offset, r.log_start, r.log_end) == (pm.COMMIT, 10**12, None, None)


# ----------------------------------------------------------------------------------- rule 1


def test_missing_checkpoint_is_skipped_never_invented():
    p = build(
        [cp(partition=1, down=7)],
        b=bounds(0, 50, partitions=3),
        current={"app": {(T, 2): 4}},
        parts={T: 3},
        on_existing_target_offsets="overwrite",
    )
    assert [(r.partition, r.action, r.reason, r.planned_offset) for r in p.rows] == [
        (0, pm.SKIP, pm.NO_CHECKPOINT, None),
        (1, pm.COMMIT, "", 7),
        (2, pm.SKIP, pm.NO_CHECKPOINT, None),
    ]
    r0, r2 = row(p, partition=0), row(p, partition=2)
    assert (r0.upstream_offset, r0.downstream_offset, r0.current_offset, r0.log_start, r0.log_end) == (
        None,
        None,
        None,
        0,
        50,
    )
    assert r2.current_offset == 4 and r2.source_alias == "primary"
    assert p.counts() == {pm.COMMIT: 1, pm.CLAMP: 0, pm.SKIP: 2}


def test_only_topics_the_group_has_checkpoints_for_get_rows():
    p = build([cp(group="a", topic=T), cp(group="b", topic=U)], b={}, parts={T: 2, U: 1})
    assert sorted((r.group, r.topic, r.partition) for r in p.rows) == [("a", T, 0), ("a", T, 1), ("b", U, 0)]
    assert p.groups() == ["a", "b"]


# ----------------------------------------------------------------------------------- rule 2


def test_below_the_log_start_is_clamped_with_the_retention_gap():
    r = row(build([cp(down=3)], b=bounds(start=40, end=100)))
    assert (r.action, r.reason, r.planned_offset, r.retention_gap) == (pm.CLAMP, pm.RETENTION_GAP, 40, 37)
    assert r.writes and r.downstream_offset == 3


def test_above_the_log_end_is_clamped_to_the_log_end():
    r = row(build([cp(down=500)], b=bounds(start=0, end=120)))
    assert (r.action, r.reason, r.planned_offset, r.retention_gap) == (pm.CLAMP, pm.BEYOND_LOG_END, 120, 0)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6))
def test_the_planned_offset_is_always_inside_the_log(down, start, length):
    end = start + length
    r = row(build([cp(down=down)], b=bounds(start, end)))
    assert start <= r.planned_offset <= end
    assert r.planned_offset == min(max(down, start), end)
    assert r.retention_gap == max(0, start - down)
    assert r.action == (pm.COMMIT if start <= down <= end else pm.CLAMP)


# ----------------------------------------------------------------------------------- rule 3


def conflict_input():
    cps = [
        cp(group="a", partition=0, down=10),
        cp(group="a", partition=1, down=20),
        cp(group="b", partition=0, down=30),
        cp(group="b", partition=1, down=40),
    ]
    current = {"a": {(T, 0): 10, (T, 1): 15}, "b": {}}  # a's partition 1 differs from the plan
    return cps, bounds(0, 100, partitions=2), current, {T: 2}


def test_existing_different_commits_fail_the_whole_plan_naming_the_groups():
    cps, b, current, parts = conflict_input()
    with pytest.raises(PlanError) as e:
        pm.build_plan(cps, b, current, parts, on_existing_target_offsets="fail")
    msg = str(e.value)
    assert msg.startswith("1 group(s) already have different committed offsets on the target: a. Nothing was written.")
    assert "on_existing_target_offsets=skip" in msg and "=overwrite" in msg


def test_fail_names_at_most_20_groups():
    cps = [cp(group=f"g{i:02d}") for i in range(25)]
    current = {f"g{i:02d}": {(T, 0): 1} for i in range(25)}
    with pytest.raises(PlanError) as e:
        build(cps, current=current)
    msg = str(e.value)
    assert msg.startswith("25 group(s)")
    assert "g19" in msg and "g20" not in msg and "g19 (+5 more)" in msg  # words.listed: how many are left out


def test_fail_is_the_default():
    with pytest.raises(PlanError):
        build([cp(down=10)], current={"app": {(T, 0): 9}})


def test_skip_leaves_only_the_conflicting_group_alone():
    cps, b, current, parts = conflict_input()
    p = pm.build_plan(cps, b, current, parts, on_existing_target_offsets="skip")
    a = [(r.partition, r.action, r.reason, r.planned_offset, r.current_offset) for r in p.rows if r.group == "a"]
    assert a == [(0, pm.SKIP, pm.EXISTING_TARGET_OFFSETS, None, 10), (1, pm.SKIP, pm.EXISTING_TARGET_OFFSETS, None, 15)]
    assert [(r.partition, r.action, r.planned_offset) for r in p.rows if r.group == "b"] == [
        (0, pm.COMMIT, 30),
        (1, pm.COMMIT, 40),
    ]
    assert p.writes() == {"b": {(T, 0): 30, (T, 1): 40}}


def test_skip_marks_every_row_of_the_group_even_the_ones_without_checkpoint():
    p = build(
        [cp(partition=0, down=10)],
        b=bounds(0, 100, partitions=2),
        parts={T: 2},
        current={"app": {(T, 0): 3}},
        on_existing_target_offsets="skip",
    )
    assert [(r.action, r.reason) for r in p.rows] == [(pm.SKIP, pm.EXISTING_TARGET_OFFSETS)] * 2


def test_a_commit_on_a_partition_without_checkpoint_counts_as_different():
    # the plan does not write partition 1, but the group has a commit there: that is a difference
    with pytest.raises(PlanError):
        build([cp(partition=0, down=10)], b=bounds(0, 100, partitions=2), parts={T: 2}, current={"app": {(T, 1): 3}})


def test_overwrite_moves_the_group_forward():
    cps, b, current, parts = conflict_input()
    p = pm.build_plan(cps, b, current, parts, on_existing_target_offsets="overwrite")
    assert [(r.group, r.partition, r.action, r.planned_offset) for r in p.rows] == [
        ("a", 0, pm.COMMIT, 10),
        ("a", 1, pm.COMMIT, 20),
        ("b", 0, pm.COMMIT, 30),
        ("b", 1, pm.COMMIT, 40),
    ]


@pytest.mark.parametrize("policy", ["fail", "skip", "overwrite"])
def test_commits_equal_to_the_plan_are_not_different(policy):
    """A re-run after a successful apply converges: same plan, nothing left to write."""
    cps = [cp(partition=0, down=3), cp(partition=1, down=500)]  # one clamp to the start, one to the end
    b = {(T, 0): PartitionBounds(10, 100), (T, 1): PartitionBounds(10, 100)}
    first = pm.build_plan(cps, b, {}, {T: 2}, on_existing_target_offsets=policy)
    assert first.writes() == {"app": {(T, 0): 10, (T, 1): 100}}
    applied = first.writes()
    again = pm.build_plan(cps, b, applied, {T: 2}, on_existing_target_offsets=policy)
    assert [(r.action, r.reason, r.planned_offset) for r in again.rows] == [
        (r.action, r.reason, r.planned_offset) for r in first.rows
    ]
    assert [r.current_offset for r in again.rows] == [10, 100]
    assert pm.diff_to_apply(again, applied) == {}
    assert pm.verify(again, applied) == []


def test_unknown_policy_is_refused():
    with pytest.raises(PlanError, match="fail, skip or overwrite, not 'merge'"):
        build([cp()], on_existing_target_offsets="merge")


# ----------------------------------------------------------------------------------- rule 4


def test_no_rewind_unless_allowed():
    cps = [cp(partition=0, down=10), cp(partition=1, down=10), cp(partition=2, down=10)]
    current = {"app": {(T, 0): 50, (T, 1): 5}}  # 0 ahead of the plan, 1 behind, 2 none
    p = pm.build_plan(cps, bounds(0, 100, partitions=3), current, {T: 3}, on_existing_target_offsets="overwrite")
    assert [(r.action, r.reason, r.planned_offset) for r in p.rows] == [
        (pm.SKIP, pm.TARGET_AHEAD, None),
        (pm.COMMIT, "", 10),
        (pm.COMMIT, "", 10),
    ]
    p = pm.build_plan(
        cps, bounds(0, 100, partitions=3), current, {T: 3}, on_existing_target_offsets="overwrite", allow_rewind=True
    )
    assert [(r.action, r.planned_offset) for r in p.rows] == [(pm.COMMIT, 10)] * 3


def test_no_rewind_applies_to_the_clamped_offset():
    # checkpoint 500 clamped to the log end 100; the target commit 80 is behind the clamped offset: commit
    p = build([cp(down=500)], b=bounds(0, 100), current={"app": {(T, 0): 80}}, on_existing_target_offsets="overwrite")
    assert (row(p).action, row(p).planned_offset) == (pm.CLAMP, 100)
    # log start 40, checkpoint 3 -> 40; the target commit 60 is ahead of 40: kept
    p = build([cp(down=3)], b=bounds(40, 100), current={"app": {(T, 0): 60}}, on_existing_target_offsets="overwrite")
    assert (row(p).action, row(p).reason, row(p).planned_offset) == (pm.SKIP, pm.TARGET_AHEAD, None)


def test_a_target_commit_ahead_of_an_archive_floor_is_not_kept_silently():
    """Rule 4 against rule 10 (the review's): the source lost, the archive floor 41 below MM2's checkpoint 52 - the
    restarted history was cut short, or MM2 translated from syncs the archive never saw. MM2 with
    sync.group.offsets.enabled wrote 52 as the group's target commit; kept (skip, or overwrite without allow_rewind),
    it skips what only the earlier history copied. The plan is refused, naming it; moved back it is written."""
    from mm2_failover.rules.translate import ARCHIVE_FLOOR

    exact = {("app", T, 0): pm.Proven(41, ARCHIVE_FLOOR, 142)}
    for how in ("skip", "overwrite"):
        with pytest.raises(PlanError, match=r"app primary.orders\[0\] \(target commit 52, the archive floor 41\)"):
            build([cp(down=52)], current={"app": {(T, 0): 52}}, on_existing_target_offsets=how, exact=exact)
    p = build(
        [cp(down=52)],
        current={"app": {(T, 0): 52}},
        on_existing_target_offsets="overwrite",
        allow_rewind=True,
        exact=exact,
    )
    assert (row(p).action, row(p).planned_offset, row(p).rule) == (pm.COMMIT, 41, ARCHIVE_FLOOR)


# ----------------------------------------------------------------------------------- rule 5 (apply, every try)


def test_moved_since_the_backup_is_never_written_again():
    from mm2_failover.rules.plan import COMMIT
    from mm2_failover.rules.values import Commit

    def w(g, part, off):
        return PlanRow("primary", g, T, part, off, off, None, off, COMMIT)

    p = pm.Plan([w("g", 0, 10), w("g", 1, 20), w("h", 0, 30), w("h", 1, 40)])
    before = {"g": {(T, 0): None, (T, 1): Commit(5)}, "h": {(T, 0): None, (T, 1): Commit(7)}}
    current = {"g": {(T, 0): Commit(12), (T, 1): Commit(5)}, "h": {(T, 0): Commit(30), (T, 1): Commit(41)}}
    # g[0] committed since (none before, 12 now), h[1] too (7 before, 41 now); g[1] still holds what the backup saw,
    # h[0] already holds the plan
    assert pm.moved_since(p, current, before) == {
        "g": {(T, 0): (None, Commit(12))},
        "h": {(T, 1): (Commit(7), Commit(41))},
    }
    assert pm.diff_to_apply(p, current, before) == {"g": {(T, 1): Commit(20)}}
    assert pm.diff_to_apply(p, current) == {"g": {(T, 0): Commit(10), (T, 1): Commit(20)}, "h": {(T, 1): Commit(40)}}
    # a partition without a commit now is written (nothing to rewind)
    assert pm.diff_to_apply(p, {"g": {(T, 1): Commit(5)}}, before) == {
        "g": {(T, 0): Commit(10), (T, 1): Commit(20)},
        "h": {(T, 0): Commit(30), (T, 1): Commit(40)},
    }
    # a stage computes the plan's commits once and passes them (planned=): the same answers
    planned = p.commits()
    for cur in (current, {"g": {(T, 1): Commit(5)}}, {}):
        assert pm.moved_since(p, cur, before, planned) == pm.moved_since(p, cur, before)
        assert pm.diff_to_apply(p, cur, before, planned) == pm.diff_to_apply(p, cur, before)
        assert pm.diff_to_apply(p, cur, None, planned) == pm.diff_to_apply(p, cur)
        assert pm.verify(p, cur, planned) == pm.verify(p, cur)


# ----------------------------------------------------------------------------------- missing replicas


def test_missing_replica_topic_raises_naming_it():
    with pytest.raises(PlanError) as e:
        pm.build_plan([cp(topic="primary.gone"), cp(topic=T)], {}, {}, {T: 1})
    assert "do not exist on the target: topic primary.gone. Check the replication policy/separator" in str(e.value)


def test_missing_replica_partition_raises_naming_it():
    with pytest.raises(PlanError) as e:
        pm.build_plan(
            [cp(partition=0), cp(partition=3), cp(partition=5, topic=U), cp(topic="x.y")], {}, {}, {T: 2, U: 1}
        )
    msg = str(e.value)
    assert "topic x.y, primary.orders[3], primary.users[5]." in msg
    assert f"{T}[0]" not in msg


# ----------------------------------------------------------------------------------- outputs


def mixed_plan() -> pm.Plan:
    cps = [cp(group="z-app", partition=1, down=7), cp(group="a,app", partition=0, down=2), cp(group="m", down=900)]
    b = bounds(5, 100, partitions=2)
    return pm.build_plan(cps, b, {}, {T: 2})


def test_to_reset_csv_has_only_writing_rows_sorted_and_headerless():
    p = mixed_plan()
    assert p.counts() == {pm.COMMIT: 1, pm.CLAMP: 2, pm.SKIP: 3}
    assert p.to_reset_csv() == (
        '"a,app",primary.orders,0,5\n'  # clamped to the log start; a comma in a group id is quoted
        "m,primary.orders,0,100\n"  # clamped to the log end
        "z-app,primary.orders,1,7\n"
    )
    assert pm.Plan().to_reset_csv() == ""


def test_writes_groups_and_dict_round_trip():
    p = mixed_plan()
    assert p.writes() == {"a,app": {(T, 0): 5}, "m": {(T, 0): 100}, "z-app": {(T, 1): 7}}
    assert p.groups() == ["a,app", "m", "z-app"]
    again = pm.Plan.from_dicts(p.as_dicts())
    assert again == p and again.to_reset_csv() == p.to_reset_csv()
    assert set(p.as_dicts()[0]) == {
        "source_alias",
        "group",
        "topic",
        "partition",
        "upstream_offset",
        "downstream_offset",
        "current_offset",
        "planned_offset",
        "action",
        "reason",
        "log_start",
        "log_end",
        "retention_gap",
        "metadata",
        "rule",
        "source_position",
        "exact_offset",
        "position_at_least",
    }


def test_a_rows_dict_is_its_fields_in_their_order_a_copy_and_nothing_added_to_the_row():
    row = mixed_plan().rows[0]
    d = row.as_dict()
    assert list(d) == [f.name for f in fields(pm.PlanRow)] and d == {f: getattr(row, f) for f in d}
    d["planned_offset"] = -1  # a copy: the row is not changed through it
    assert row.planned_offset != -1
    row.note = "set on the instance by someone"  # an attribute that is not a field stays out
    assert list(row.as_dict()) == [f.name for f in fields(pm.PlanRow)]


def test_verify_reports_every_writing_row_that_does_not_read_back():
    p = mixed_plan()
    committed = {"a,app": {(T, 0): 5}, "m": {(T, 0): 99}, "z-app": {(T, 0): 1}}
    assert pm.verify(p, committed) == [
        pm.Mismatch("m", T, 0, 100, 99),
        pm.Mismatch("z-app", T, 1, 7, None),  # never written
    ]
    assert pm.verify(p, p.writes()) == []
    assert pm.verify(p, {}) == [
        pm.Mismatch(g, t, q, o, None) for g, tp in sorted(p.writes().items()) for (t, q), o in tp.items()
    ]


def test_diff_to_apply_is_what_the_target_does_not_have_yet():
    from mm2_failover.rules.values import Commit

    p = mixed_plan()
    assert pm.diff_to_apply(p, {}) == p.commits()
    current = {"a,app": {(T, 0): 5}, "m": {(T, 0): 3, (T, 1): 100}}
    assert pm.diff_to_apply(p, current) == {"m": {(T, 0): Commit(100)}, "z-app": {(T, 1): Commit(7)}}
    assert pm.diff_to_apply(p, p.writes()) == {}
    assert pm.diff_to_apply(p, p.commits()) == {}


def test_metadata_is_planned_written_and_verified():
    from mm2_failover.rules.values import Commit

    p = build([cp(down=10, metadata="streams")])
    assert p.commits() == {"app": {(T, 0): Commit(10, "streams")}}
    assert pm.diff_to_apply(p, {"app": {(T, 0): Commit(10, "")}}) == {"app": {(T, 0): Commit(10, "streams")}}
    assert pm.verify(p, {"app": {(T, 0): Commit(10, "")}})  # the metadata did not arrive: a mismatch
    assert pm.verify(p, {"app": {(T, 0): Commit(10, "streams")}}) == []


def test_skipped_rows_are_never_written_or_verified():
    p = build([cp(down=10)], current={"app": {(T, 0): 50}}, on_existing_target_offsets="overwrite")
    assert row(p).action == pm.SKIP
    assert p.writes() == {} and p.to_reset_csv() == ""
    assert pm.verify(p, {}) == [] and pm.diff_to_apply(p, {}) == {}


# ----------------------------------------------------------------------------------- rule 0: one answer per key


def test_two_aliases_for_one_key_are_refused_one_alias_per_key_is_fine():
    with pytest.raises(pm.PlanError, match="several source aliases"):
        build([cp(alias="dc1", down=5), cp(alias="dc2", down=9)])
    p = build([cp(alias="dc1", down=5), cp(alias="dc2", group="other", down=9)])
    assert {(r.group, r.source_alias) for r in p.rows} == {("app", "dc1"), ("other", "dc2")}


def test_two_answers_of_one_alias_for_one_key_are_refused_too():
    """Issue 50 item 10: the last one won, silently (a job's answers read twice, or two answers tables merged)."""
    with pytest.raises(pm.PlanError, match="more than one answer") as e:
        build([cp(alias="dc1", down=5), cp(alias="dc1", down=9)])
    assert f"app {T}[0]" in str(e.value) and "5" in str(e.value) and "9" in str(e.value)
    build([cp(alias="dc1", down=5), cp(alias="dc1", down=5)])  # the same answer twice is one answer


def test_a_checkpoint_without_its_alias_is_refused_naming_the_partition():
    """One Checkpoint type: a decoded MM2 record has no alias (the record does not say which flow wrote it); only
    the job's answers, which name it, may be planned from."""
    with pytest.raises(pm.PlanError, match=r"app primary.orders\[0\] names no source alias"):
        build([cp(alias="")])


# ----------------------------------------------------------------------------------- rule 1: groups MM2 never checkpointed


def test_selected_group_committing_on_the_source_without_any_checkpoint_refuses_the_plan():
    with pytest.raises(pm.PlanError, match="ghost") as e:
        build([cp()], source_commits={"ghost": {("primary", T, 0): 5}})
    assert "accept_groups_without_checkpoints" in str(e.value)


def test_accepted_groups_without_checkpoints_are_skipped_rows_and_the_others_move():
    p = build([cp()], source_commits={"ghost": {("primary", T, 0): 5}}, accept_groups_without_checkpoints=True)
    r = row(p, "ghost")
    assert (r.action, r.reason, r.planned_offset, r.source_alias) == (
        pm.SKIP,
        pm.GROUP_NEVER_CHECKPOINTED,
        None,
        "primary",
    )
    assert p.writes() == {"app": {(T, 0): 10}}


def test_partition_committed_on_the_source_without_a_checkpoint_is_a_skipped_row():
    p = build(
        [cp()],
        b={**bounds(), **bounds(topic=U, partitions=2)},
        parts={T: 1, U: 2},
        source_commits={"app": {("primary", U, 1): 7, ("primary", T, 0): 110}},
    )
    assert (row(p, "app", U, 1).action, row(p, "app", U, 1).reason) == (pm.SKIP, pm.NO_CHECKPOINT)
    assert not [r for r in p.rows if (r.topic, r.partition) == (U, 0)]  # it commits nothing there
    assert row(p).action == pm.COMMIT


def test_source_commits_on_topics_without_a_replica_are_ignored():
    p = build([cp()], source_commits={"app": {("primary", "not-replicated", 0): 3}, "x": {("primary", "nr", 0): 1}})
    assert {(r.group, r.topic) for r in p.rows} == {("app", T)}


# ----------------------------------------------------------------------------------- exact translation


def test_a_proven_translation_replaces_the_checkpoint_and_says_so():
    p = build([cp(down=10, up=50)], exact={("app", T, 0): pm.Proven(50, "gap_free_bracket", 50, "")})
    r = row(p)
    assert (r.planned_offset, r.downstream_offset, r.rule, r.exact_offset, r.source_position) == (
        50,
        10,
        "gap_free_bracket",
        50,
        50,
    )
    assert row(build([cp(down=10)])).rule == "checkpoint"


def test_a_translation_still_obeys_clamp_existing_commits_and_no_rewind():
    p = build([cp(down=10)], b=bounds(start=0, end=40), exact={("app", T, 0): pm.Proven(55, "exact_sync", 55, "")})
    assert (row(p).action, row(p).reason, row(p).planned_offset) == (pm.CLAMP, pm.BEYOND_LOG_END, 40)
    p = build(
        [cp(down=10)],
        current={"app": {(T, 0): 60}},
        on_existing_target_offsets="overwrite",
        exact={("app", T, 0): pm.Proven(50, "exact_sync", 50, "")},
    )
    assert (row(p).action, row(p).reason) == (pm.SKIP, pm.TARGET_AHEAD)


def test_a_group_mm2_never_checkpointed_moves_where_a_translation_proves_its_position():
    p = build(
        [cp()],
        source_commits={"ghost": {("primary", T, 0): 5}},
        exact={("ghost", T, 0): pm.Proven(5, "gap_free_bracket", 5, "md")},
    )
    r = row(p, "ghost")
    assert (r.action, r.planned_offset, r.downstream_offset, r.metadata, r.rule) == (
        pm.COMMIT,
        5,
        None,
        "md",
        "gap_free_bracket",
    )


# ----------------------------------------------------------------------------------- rule 1a: a reset, source lost
K = ("primary", T, 0)


def reading(offset, read_at, cp_=None, alias_read=True, margin=10.0):
    read = read_at if isinstance(read_at, tuple) else (read_at, read_at)
    got = pm.archived_positions_taken(
        {"app": {K: pm.Commit(offset, "m")}},
        {"primary": read} if alias_read else {},
        {} if cp_ is None else {("primary", "app", T, 0): cp_},
        margin,
    )
    return got.get("app", {}).get(K)


def test_a_reading_below_mm2s_checkpoint_is_the_position_a_reset_mm2_has_not_checkpointed():
    # issue 50 item 7: the drill's rewound group lost 48 records at MM2's checkpoint with the source lost
    assert reading(20, read_at=1000.0, cp_=(150, 900.0)) == pm.Commit(20, "m")


def test_a_reading_above_mm2s_checkpoint_is_never_the_position_however_much_newer():
    # a review's: MM2 writes a checkpoint only for a rewind below its last one or where its translation moves on - a
    # group at 150 when the archive read it, reset to 60 since (MM2's checkpoint at 40: no new one), would skip 60..149
    assert reading(150, read_at=1000.0, cp_=(40, 100.0)) is None
    assert reading(40, read_at=1000.0, cp_=(40, 100.0)) is None  # the same: MM2's checkpoint, as before


def test_mm2s_checkpoint_clearly_newer_than_the_reading_answers():
    assert reading(20, read_at=900.0, cp_=(150, 911.0)) is None  # the group moved on after the reading
    assert reading(20, read_at=(900.0, 950.0), cp_=(150, 961.0)) is None  # counted from the reading's end


@pytest.mark.parametrize("written_at", [1000.0, 1009.0, 990.0, None])
def test_within_the_margin_or_unknown_the_reading_below_the_checkpoint_answers(written_at):
    assert reading(20, read_at=1000.0, cp_=(150, written_at)) == pm.Commit(20, "m")


def test_a_group_mm2_never_checkpointed_takes_its_reading():
    assert reading(7, read_at=1000.0) == pm.Commit(7, "m")


def test_nothing_read_for_the_alias_leaves_the_checkpoint():
    assert reading(7, read_at=1000.0, alias_read=False) is None


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 100), st.integers(0, 100), st.floats(0, 200), st.floats(0, 200), st.booleans(), st.booleans())
def test_the_position_taken_is_never_above_mm2s_checkpoint(a, c, t_a, t_c, cp_known, time_known):
    """Whatever the readings and clocks: never above MM2's checkpoint (a reset MM2 does not checkpoint), the reading
    where MM2 has none, and below the checkpoint the reading unless the checkpoint is clearly the newer."""
    cp_ = (c, t_c if time_known else None) if cp_known else None
    got = reading(a, read_at=t_a, cp_=cp_)
    position = a if got is not None else c
    assert position <= c or not cp_known
    if not cp_known:
        assert got == pm.Commit(a, "m")
    elif a < c and not (time_known and t_c - t_a > 10.0):
        assert got == pm.Commit(a, "m")
    else:
        assert got is None


# ----------------------------------------------------------------------------------- rule 1b: rewound on the source


def test_a_checkpoint_ahead_of_the_groups_source_commit_refuses_the_plan_naming_the_partition():
    # the group was reset backwards on the source after MM2's newest checkpoint (issue 50 item 1): MM2's checkpoint
    # would skip the records from 20 on; seen on a real bed with translation=checkpoint (planned 102, 164 skipped)
    with pytest.raises(pm.PlanError) as e:
        build([cp(down=102, up=150)], source_commits={"app": {("primary", T, 0): 20}})
    msg = str(e.value)
    assert "app" in msg and f"{T}[0]" in msg and "20" in msg and "150" in msg and "rewound" in msg
    assert "translation=exact" in msg and "accept_groups_without_checkpoints" in msg


def test_a_rewound_group_resumes_at_its_proven_sync_floor():
    p = build(
        [cp(down=102, up=150)], source_commits={"app": {("primary", T, 0): 20}}, positions_at_least={("app", T, 0): 15}
    )
    r = row(p)
    assert (r.action, r.planned_offset, r.rule, r.downstream_offset) == (pm.COMMIT, 15, "sync_floor", 102)


def test_a_rewound_group_below_every_sync_resumes_at_the_replicas_first_record():
    """A review (issue 50's drill flake hunt): rewound below every offset sync of a drained partition, no sync floor -
    the plan skipped (or refused) the group, whose consumers then fell to auto.offset.reset. The replica's log start
    is proven: nothing left anywhere is before it."""
    p = build([cp(down=102, up=150)], source_commits={"app": {("primary", T, 0): 0}}, replica_floors={("app", T, 0): 0})
    r = row(p)
    assert (r.action, r.planned_offset, r.rule, r.source_position) == (pm.COMMIT, 0, "replica_start", 0)
    floored = build(
        [cp(down=102, up=150)],
        source_commits={"app": {("primary", T, 0): 20}},
        positions_at_least={("app", T, 0): 15},
        replica_floors={("app", T, 0): 0},
    )
    assert (row(floored).planned_offset, row(floored).rule) == (15, "sync_floor")  # a sync's floor comes first


def test_a_rewound_group_accepted_without_a_floor_is_a_skipped_row_the_others_move():
    p = build(
        [cp(down=102, up=150), cp(group="other", down=10, up=10)],
        source_commits={"app": {("primary", T, 0): 20}, "other": {("primary", T, 0): 10}},
        accept_groups_without_checkpoints=True,
    )
    r = row(p)
    assert (r.action, r.reason, r.planned_offset) == (pm.SKIP, pm.CHECKPOINT_AHEAD_OF_SOURCE, None)
    assert p.writes() == {"other": {(T, 0): 10}}


def test_a_proven_translation_of_the_rewound_position_is_used():
    p = build(
        [cp(down=102, up=150)],
        source_commits={"app": {("primary", T, 0): 20}},
        exact={("app", T, 0): pm.Proven(20, "exact_sync", 20, "")},
    )
    assert (row(p).planned_offset, row(p).rule) == (20, "exact_sync")


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 200),
    st.integers(0, 200),
    st.integers(0, 50),
    st.one_of(st.none(), st.integers(0, 200)),
    st.booleans(),
)
def test_the_planned_offset_never_passes_the_groups_source_position(commit, up, lag, floor, accept):
    """Replica offsets equal to the source's (MM2 copied the topic from its start, no markers), so the truth is the
    group's source commit: whatever MM2's checkpoint says (its upstream offset ``up``, translated ``lag`` records
    early), and whatever floor the syncs prove (at or below the commit), nothing past the commit is ever planned."""
    down = max(0, up - lag)
    at_least = None if floor is None else min(floor, commit)
    try:
        p = build(
            [cp(down=down, up=up)],
            source_commits={"app": {("primary", T, 0): commit}},
            positions_at_least=None if at_least is None else {("app", T, 0): at_least},
            accept_groups_without_checkpoints=accept,
        )
    except pm.PlanError:
        assert up > commit and at_least is None and not accept
        return
    r = row(p)
    assert r.planned_offset is None or r.planned_offset <= commit
    assert r.writes or (up > commit and at_least is None)


@pytest.mark.parametrize("policy", ["skip", "overwrite"])
def test_a_target_commit_ahead_of_a_rewound_groups_floor_is_never_kept_silently(policy):
    """The review: with sync.group.offsets.enabled MM2 already committed the old position (100) on the target; the
    group was rewound to 40 on the source, floor 35. Rule 4 (target ahead: skip) or rule 3 (skip) kept 100: 40..99
    skipped. Refused, naming it, unless the operator moves it back (allow_rewind with overwrite)."""
    kw = dict(
        source_commits={"app": {("primary", T, 0): 40}},
        positions_at_least={("app", T, 0): 35},
        current={"app": {(T, 0): 100}},
    )
    with pytest.raises(pm.PlanError, match="ahead of the group's position") as e:
        build([cp(down=100, up=100)], on_existing_target_offsets=policy, **kw)
    assert f"app {T}[0]" in str(e.value) and "allow_rewind" in str(e.value)
    p = build([cp(down=100, up=100)], on_existing_target_offsets="overwrite", allow_rewind=True, **kw)
    assert (row(p).action, row(p).planned_offset, row(p).rule) == (pm.COMMIT, 35, "sync_floor")
