"""Run reports (mm2_failover.rules.report): totals, per-group and per-partition tables, JSON and Markdown."""

from __future__ import annotations

import json

import pytest

from mm2_failover.rules import plan as pm
from mm2_failover.rules.plan import Plan, PlanRow
from mm2_failover.rules.report import build_report, estimate_reread, render_markdown

T = "primary.orders"


def the_plan() -> Plan:
    return Plan(
        [
            PlanRow("primary", "a", T, 0, 110, 10, None, 10, pm.COMMIT, "", 0, 50),
            PlanRow("primary", "a", T, 1, 103, 3, None, 5, pm.CLAMP, pm.RETENTION_GAP, 5, 40, retention_gap=2),
            PlanRow("primary", "b", T, 0, 90, 9, 7, None, pm.SKIP, pm.EXISTING_TARGET_OFFSETS, 0, 60),
            PlanRow("primary", "c", T, 0, 120, 20, None, 20, pm.COMMIT, "", 0, 30),
            PlanRow("primary", "c", T, 1, None, None, None, None, pm.SKIP, pm.NO_CHECKPOINT, 0, 25),
        ]
    )


COMMITTED = {"a": {(T, 0): 10, (T, 1): 5}, "b": {(T, 0): 7}, "c": {(T, 0): 19}}
LOG_END = {(T, 0): 55, (T, 1): 45}
# the groups' commits on the source (where MM2 last checkpointed them): the re-read is estimated from them
SOURCE = {("a", T, 0): 110, ("a", T, 1): 103, ("b", T, 0): 90, ("c", T, 0): 120}


def report(**kw):
    plan = kw.pop("plan", the_plan())
    committed = kw.pop("committed", COMMITTED)
    args = dict(
        dag_id="mm2_failover",
        run_id="manual__1",
        params={"dry_run": kw.get("dry_run", False)},
        plan=plan,
        committed=committed,
        log_end=LOG_END,
        mismatches=pm.verify(plan, committed),
        source_commits=SOURCE,
    )
    args.update(kw)
    return build_report(**args)


def test_totals_and_groups_of_a_failed_run():
    r = report(refused={"b": "existing_target_offsets"})
    assert r.outcome == "failed" and r.dry_run is False
    assert r.mismatches == [{"group": "c", "topic": T, "partition": 0, "planned": 20, "committed": 19}]
    assert r.totals == {
        "groups": 3,
        "groups_moved": 1,
        "groups_skipped": 1,
        "partitions": 5,
        "committed": 2,
        "planned_commits": 3,
        "skipped": 2,
        "clamped": 1,
        "refused_groups": 1,
        "mismatches": 1,
        "records_lost_to_retention": 2,
        "records_lost_to_retention_upper_bound": 2,
        "partitions_lost_to_retention_unknown": 0,
        "records_reread_estimate": (110 - 10) + (103 - 5) + (120 - 20),
        "partitions_reread_unknown": 0,
        "records_reread_by_checkpoints": None,
        "partitions_exact": 0,
        "partitions_by_answer": {"exact": 0, "floor": 0, "checkpoint": 3, "none": 2},
        "lag": (55 - 10) + (45 - 5) + (55 - 7) + (55 - 19),
        # MM2's checkpoints only: the re-read figure is an estimate from offsets, nothing proven from below
        "records_reread_exact": False,
        "records_reread_at_least": 0,
    }
    g = {x["group"]: x for x in r.groups}
    assert [x["group"] for x in r.groups] == ["a", "b", "c"]
    assert g["a"] == {
        "group": "a",
        "partitions": 2,
        "committed": 2,
        "skipped": 0,
        "clamped": 1,
        "retention_lost": 2,
        "lag": 85,
        "mismatches": 0,
        "refused": "",
        "source_aliases": ["primary"],
        "fate": "moved",
        "reread_estimate": (110 - 10) + (103 - 5),
        "reread_unknown": 0,
    }
    assert g["b"]["fate"].startswith("skipped: it already has different commits on the target")
    assert g["c"]["fate"].startswith("not as planned")
    assert (g["b"]["skipped"], g["b"]["committed"], g["b"]["lag"], g["b"]["refused"]) == (
        1,
        0,
        48,
        "existing_target_offsets",
    )
    assert (g["c"]["committed"], g["c"]["mismatches"], g["c"]["lag"], g["c"]["skipped"]) == (0, 1, 36, 1)
    json.dumps(r.as_dict())  # its published form is plain JSON


def test_with_the_source_lost_the_re_read_of_mm2s_checkpoints_is_unknown_not_guessed():
    """Issue 50 item 7: without the groups' source commits (the source lost) MM2's checkpoint's own upstream offset
    says nothing of the copies MM2 made twice (a real bed: 703 estimated, 1,424 re-read): not estimated, and said."""
    r = report(source_commits=None)
    assert (r.totals["records_reread_estimate"], r.totals["partitions_reread_unknown"]) == (None, 3)
    assert "| unknown on 3 partition(s) |" in render_markdown(r)
    assert {x["group"]: (x["reread_estimate"], x["reread_unknown"]) for x in r.groups} == {
        "a": (None, 2),
        "b": (None, 0),
        "c": (None, 1),
    }
    assert "| unknown on 2 |" in render_markdown(r)  # group a's row: not a partial sum said as the whole


def test_partition_rows():
    p = {(x["group"], x["partition"]): x for x in report().partitions}
    assert (p["a", 0]["committed_after"], p["a", 0]["lag"], p["a", 0]["verified"]) == (10, 45, True)
    assert (p["a", 1]["action"], p["a", 1]["retention_gap"], p["a", 1]["lag"]) == (pm.CLAMP, 2, 40)
    assert (p["b", 0]["verified"], p["b", 0]["current_offset"], p["b", 0]["committed_after"]) == (None, 7, 7)
    assert (p["c", 0]["verified"], p["c", 0]["committed_after"]) == (False, 19)
    assert (p["c", 1]["lag"], p["c", 1]["committed_after"], p["c", 1]["verified"]) == (None, None, None)


def test_lag_falls_back_to_the_planned_log_end():
    r = report(log_end={})
    p = {(x["group"], x["partition"]): x for x in r.partitions}
    assert (p["a", 0]["lag"], p["a", 1]["lag"], p["b", 0]["lag"], p["c", 0]["lag"]) == (40, 35, 53, 11)


def test_a_clean_run_succeeds():
    plan = the_plan()
    plan.rows = [r for r in plan.rows if r.group == "a"]
    r = report(plan=plan)
    assert r.outcome == "succeeded"
    assert (r.totals["groups_moved"], r.totals["committed"], r.totals["mismatches"]) == (1, 2, 0)


def test_dry_run_counts_nothing_committed():
    plan = the_plan()
    before = {"b": {(T, 0): 7}}  # the target as it is: nothing was written
    r = build_report(
        dag_id="d", run_id="r", params={}, plan=plan, committed=before, log_end=LOG_END, mismatches=[], dry_run=True
    )
    assert r.outcome == "dry_run" and r.dry_run is True
    t = r.totals
    assert (t["committed"], t["groups_moved"]) == (0, 0)
    assert (t["planned_commits"], t["skipped"], t["clamped"], t["records_lost_to_retention"]) == (3, 2, 1, 2)
    assert all(g["committed"] == 0 for g in r.groups)
    assert all(p["verified"] is None for p in r.partitions)
    assert "(dry run: nothing was written)" in render_markdown(r)


def test_markdown_contains_the_tables():
    r = report(
        refused={"b": "existing_target_offsets"},
        warnings=["source unreachable: disaster mode"],
        checkpoints_summary={
            "records_read": 10,
            "checkpoints": 4,
            "tombstones": 1,
            "quarantined": 2,
            "quarantined_by_reason": {"key_truncated": 2},
        },
    )
    md = render_markdown(r)
    lines = md.splitlines()
    assert lines[0] == "# mm2-failover report: mm2_failover / manual__1"
    assert "**Outcome: FAILED**" in lines
    assert "| 3 | 1 | 1 | 5 | 2 | 2 | 1 | 1 | 1 | 2 | 298 (estimate; 0 offsets from the proven floor) | 169 |" in lines
    assert "> WARNING: source unreachable: disaster mode" in lines
    assert "Checkpoints read: 10 records, 4 latest, 1 tombstones, 2 quarantined {'key_truncated': 2}" in lines
    assert "- latest checkpoints by a full pass over the captured range (no latest-checkpoint state)" in lines

    assert "## Groups" in lines and "## Partitions" in lines
    assert "| a | primary | moved | 2 | 2 | 0 | 1 | 2 | 198 | 85 |" in lines
    assert (
        "| b | primary | skipped: it already has different commits on the target (on_existing_target_offsets) "
        "| 1 | 0 | 1 | 0 | 0 |  | 48 |"
    ) in lines
    assert f"| a | {T} | 1 | 103 | 3 |  | checkpoint |  | 5 | 5 | clamp | retention_gap | 40 |" in lines
    assert f"| b | {T} | 0 | 90 | 9 |  | checkpoint | 7 |  | 7 | skip | existing_target_offsets | 48 |" in lines
    assert f"| c | {T} | 1 |  |  |  | checkpoint |  |  |  | skip | no_checkpoint |  |" in lines
    assert "## Mismatches (committed != planned)" in lines
    assert f"- c {T}[0]: planned 20, committed 19" in lines
    # every table row has as many cells as its header
    for header in ("| groups |", "| group | aliases |", "| group | topic |"):
        i = next(n for n, line in enumerate(lines) if line.startswith(header))
        width = lines[i].count("|")
        j = i + 1
        while j < len(lines) and lines[j].startswith("|"):
            assert lines[j].count("|") == width, lines[j]
            j += 1
    assert md.endswith("\n")


def test_the_report_says_which_state_version_answered_and_why_an_alias_was_read_in_full():
    from mm2_failover.rules.report import state_lines

    lines = state_lines(
        {
            "state": {
                "aliases": {
                    "primary": {"version": "v-1", "reason": "state version v-1 + a tail of 12 offset(s)"},
                    "east": {"version": None, "reason": "full pass: version v-1 does not cover alias 'east'"},
                }
            }
        }
    )
    assert lines == [
        "latest checkpoints of east: full pass: version v-1 does not cover alias 'east'",
        "latest checkpoints of primary: state version v-1 + a tail of 12 offset(s)",
    ]


def test_the_report_says_how_the_answers_were_written():
    from mm2_failover.rules.report import state_lines

    lines = state_lines(
        {
            "state": {"aliases": {"primary": {"version": "v-1", "reason": "state version v-1 + a tail"}}},
            "output_layout": {
                "layout": "state+delta",
                "why": "only the touched keys' answers",
                "touched_keys": 12,
                "delta_answers": 11,
                "base_files": "hard links",
            },
        }
    )
    assert lines[-1] == (
        "answers written as state+delta: 11 answer(s) of the 12 key(s) the tail touched, the others "
        "the state version's (hard links)"
    )
    full = state_lines({"state": {"aliases": {}}, "output_layout": {"layout": "full", "why": "--policy max: ..."}})
    assert full[-1] == "answers written in full: --policy max: ..."


def test_markdown_of_a_clean_run_has_no_mismatch_section():
    plan = the_plan()
    plan.rows = [r for r in plan.rows if r.group == "a"]
    md = render_markdown(report(plan=plan))
    assert "**Outcome: SUCCEEDED**" in md and "Mismatches" not in md and "WARNING" not in md
    assert "Checkpoints read" not in md


@pytest.mark.parametrize(
    "mismatches, refused, outcome",
    [
        ([], None, "succeeded"),
        ([pm.Mismatch("a", T, 0, 1, 2)], None, "failed"),
        ([], {"a": "live consumers"}, "failed"),
    ],
)
def test_outcome(mismatches, refused, outcome):
    plan = the_plan()
    plan.rows = [r for r in plan.rows if r.group == "a"]
    assert report(plan=plan, mismatches=mismatches, refused=refused).outcome == outcome


def test_md_table_escapes_pipes_and_renders_none_empty():
    from mm2_failover.rules.report import md_table

    lines = md_table([("group", "l"), ("lag", "r")], [["a|b", None], ["c", 3]])
    assert lines == ["| group | lag |", "|---|---:|", "| a\\|b |  |", "| c | 3 |"]


# ------------------------------------------------------------------------------------------ re-read estimate


def test_reread_estimate_per_partition():
    from testbed.plan_rows import rows

    plan_rows = [r.as_dict() for r in rows()]
    est = {
        (x["group"], x["partition"], x["topic"]): x
        for x in estimate_reread(plan_rows, {("drill-a", "primary.t", 0): 45})
    }
    a0 = est[("drill-a", 0, "primary.t")]
    assert (a0["source_committed"], a0["behind_commit"], a0["reread"]) == (45, 5, 5)  # consumed after the checkpoint
    a1 = est[("drill-a", 1, "primary.t")]
    # no source commit (the source lost): MM2's translation slack is not taken for the re-read (issue 50 item 7)
    assert (a1["source_committed"], a1["behind_commit"], a1["reread"]) == (None, None, None)
    assert ("drill-a", 2, "primary.t") not in est  # skipped: nothing planned, nothing re-read
    # clamped up to the log start, no source commit: where the group is on the replica is not known (item 7)
    assert est[("orders", 0, "primary.u")]["reread"] is None


def test_reread_not_guessed_when_offsets_are_not_aligned():
    r = PlanRow("primary", "g", "primary.t", 0, 5, 900, None, 900, pm.COMMIT).as_dict()
    [x] = estimate_reread([r], {("g", "primary.t", 0): 5})
    assert x["reread"] is None and "not estimated" in x["note"]


def test_exact_positions_give_the_re_read_and_what_the_checkpoints_alone_would_re_read():
    plan = Plan(
        [
            PlanRow(
                "primary",
                "a",
                T,
                0,
                110,
                10,
                None,
                100,
                pm.COMMIT,
                "",
                0,
                200,
                rule="gap_free_bracket",
                source_position=110,
                exact_offset=100,
            ),
            PlanRow("primary", "a", T, 1, 50, 20, None, 20, pm.COMMIT, "", 0, 200),
        ]
    )
    r = build_report(
        dag_id="d",
        run_id="r",
        params={},
        plan=plan,
        committed={},
        log_end={},
        mismatches=[],
        dry_run=True,
        source_commits={("a", T, 0): 110, ("a", T, 1): 50},
    )
    t = r.totals
    assert (t["records_reread_estimate"], t["records_reread_by_checkpoints"], t["partitions_exact"]) == (30, 90, 1)
    # the source lost (no commit known): exact from MM2's checkpoint's position, which may lag the group - unknown
    lost = build_report(
        dag_id="d",
        run_id="r",
        params={},
        plan=plan,
        committed={},
        log_end={},
        mismatches=[],
        dry_run=True,
        source_commits={("a", T, 1): 50},
    )
    assert (lost.totals["records_reread_estimate"], lost.totals["partitions_reread_unknown"]) == (30, 1)
    assert "MM2's checkpoints alone: 90" in render_markdown(r)


def test_where_the_position_is_not_known_the_re_read_is_an_estimate_proven_from_below():
    """Issue 31 item 11: MM2 copied a burst twice, the group fell back to MM2's checkpoint: the offsets said 703
    re-read where the records showed 1,424. The offset syncs prove the group's next record is at or after 1,500 on
    the replica (the later copy's history restarted there): the row says at least 1,424, and the total is labelled."""
    from mm2_failover.rules.plan import COMMIT

    cp = PlanRow("primary", "g", T, 0, 779, 76, None, 76, COMMIT, position_at_least=1500)
    sup = PlanRow(
        "primary",
        "h",
        T,
        0,
        None,
        None,
        None,
        40,
        COMMIT,
        rule="superseded_sync",
        source_position=50,
        exact_offset=40,
        position_at_least=90,
    )
    exact = PlanRow(
        "primary", "i", T, 0, None, None, None, 12, COMMIT, rule="record_lookup", source_position=12, exact_offset=12
    )
    est = {x["group"]: x for x in estimate_reread([r.as_dict() for r in (cp, sup, exact)], {("i", T, 0): 12})}
    assert (est["g"]["reread"], est["g"]["reread_at_least"], est["g"]["exact"]) == (None, 1424, False)
    assert "at least 1424 offset(s) from the floor the offset syncs prove" in est["g"]["note"]
    # a superseded sync's first copy: not counted (issue 50 item 7: a floor's figure is a count or unknown); what is
    # proven is said as an offset distance
    assert (est["h"]["reread"], est["h"]["reread_at_least"], est["h"]["exact"]) == (None, 50, False)
    assert (est["i"]["reread"], est["i"]["exact"]) == (0, True)
    from mm2_failover.rules.plan import Plan

    rep = build_report(
        dag_id="d",
        run_id="r",
        params={},
        plan=Plan([cp, sup, exact]),
        committed={},
        log_end={},
        mismatches=[],
        source_commits={("i", T, 0): 12},
    )
    t = rep.totals
    assert (t["records_reread_estimate"], t["records_reread_at_least"], t["records_reread_exact"]) == (0, 1474, False)
    assert (t["partitions_exact"], t["partitions_reread_unknown"]) == (1, 2)  # neither floor's row is a count
    assert "0 + unknown on 2 partition(s) (estimate; 1474 offsets from the proven floor)" in render_markdown(rep), (
        render_markdown(rep)
    )


def test_a_checkpoint_row_that_cannot_be_estimated_says_unknown_not_its_proven_floor():
    """The exact drill (bench/results/exact-drill-20261128-131428.json, retention): a group at 52, behind the
    source's log start, left at MM2's checkpoint (replica 101, its upstream 52): the replica's offsets differ from
    the source's, so the offsets estimate nothing, and the syncs prove the group's copy at or after 101 - "at least
    0". The report said "re-read 0" where the group re-read 51: a proven floor is not an estimate. It says unknown,
    and the floor as what it is."""
    from mm2_failover.rules.plan import COMMIT

    cp = PlanRow("primary", "g", T, 0, 52, 101, None, 101, COMMIT, position_at_least=101)
    [e] = estimate_reread([cp.as_dict()], {("g", T, 0): 52})
    assert (e["reread"], e["reread_at_least"], e["exact"]) == (None, 0, False), e


def test_a_sync_floor_row_is_counted_from_below_not_as_exact():
    from mm2_failover.rules.plan import COMMIT, Plan

    floor = PlanRow(
        "primary",
        "g",
        T,
        0,
        None,
        None,
        None,
        100,
        COMMIT,
        rule="sync_floor",
        source_position=120,
        exact_offset=100,
        position_at_least=100,
    )
    [e] = estimate_reread([floor.as_dict()], {})
    assert (e["reread"], e["reread_at_least"], e["exact"]) == (None, 0, False) and "sync floor" in e["note"]
    rep = build_report(dag_id="d", run_id="r", params={}, plan=Plan([floor]), committed={}, log_end={}, mismatches=[])
    assert rep.totals["partitions_exact"] == 0 and rep.totals["records_reread_exact"] is False


def test_a_replica_start_row_is_not_exact_its_re_read_is_not_claimed_and_what_retention_took_is_lost():
    """Issue 50 item 6: a group behind the source's retention, never checkpointed, resumes at the replica's first
    record; the records between its commit and the source record copied there are gone (lost, counted exactly where
    verify found that record on the source), and its re-read is not a count."""
    from mm2_failover.rules.plan import COMMIT, Plan

    row = PlanRow(
        "primary",
        "g",
        T,
        0,
        None,
        None,
        None,
        7,
        COMMIT,
        rule="replica_start",
        source_position=2,
        exact_offset=7,
        log_start=7,
        log_end=40,
    )
    [e] = estimate_reread([row.as_dict()], {})
    assert (e["reread"], e["exact"]) == (None, False) and "replica's first record" in e["note"]
    rep = build_report(
        dag_id="d",
        run_id="r",
        params={},
        plan=Plan([row]),
        committed={"g": {(T, 0): 7}},
        log_end={(T, 0): 40},
        mismatches=[],
        lost_exact={("g", T, 0): 5},
    )
    t = rep.totals
    assert (t["partitions_exact"], t["records_reread_exact"]) == (0, False)
    assert (t["records_lost_to_retention"], t["records_lost_to_retention_upper_bound"]) == (5, 5)
    rep = build_report(
        dag_id="d",
        run_id="r",
        params={},
        plan=Plan([row]),
        committed={"g": {(T, 0): 7}},
        log_end={(T, 0): 40},
        mismatches=[],
    )  # the record not found on the source: not known
    assert rep.totals["partitions_lost_to_retention_unknown"] == 1
    assert "0 + unknown on 1 partition(s)" in render_markdown(rep)


def _plain_reference(v):
    """report.plain before its fast path for scalars (a call per value): the reference of the test below."""
    if isinstance(v, dict):
        return {k: _plain_reference(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain_reference(x) for x in v]
    if isinstance(v, tuple):
        return type(v)(*map(_plain_reference, v)) if hasattr(v, "_fields") else tuple(_plain_reference(x) for x in v)
    if isinstance(v, set):
        return {_plain_reference(x) for x in v}
    return v


def _json_like():
    from collections import namedtuple

    from hypothesis import strategies as st

    Pair = namedtuple("Pair", "a b")
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.text(max_size=3), inner, max_size=4)
            | st.tuples(inner, inner)
            | st.builds(Pair, inner, inner)
            | st.sets(scalars.filter(lambda x: x is not None), max_size=3)
            | st.dictionaries(st.text(max_size=3), scalars, max_size=6)
        ),
        max_leaves=30,
    )


def test_plain_copies_exactly_what_the_reference_copies_and_shares_no_container():
    """The fast path of report.plain (a dict of scalars copied in one go) gives what a call per value gave, types
    included, and a copy: changing the copy's containers leaves the original as it was."""
    import copy

    from hypothesis import given, settings

    from mm2_failover.rules.report import plain

    def shape(v):  # equality that also tells True from 1 and a namedtuple from a tuple
        if isinstance(v, dict):
            return ("dict", sorted((repr(k), shape(x)) for k, x in v.items()))
        if isinstance(v, (list, tuple)):
            return (type(v).__name__, [shape(x) for x in v])
        if isinstance(v, set):
            return ("set", sorted(repr(x) for x in v))
        return (type(v).__name__, repr(v))

    def containers(v, out):
        if isinstance(v, (dict, list, set)):
            out.append(id(v))
        for x in v.values() if isinstance(v, dict) else v if isinstance(v, (list, tuple)) else ():
            containers(x, out)
        return out

    @settings(max_examples=300, deadline=None)
    @given(_json_like())
    def check(v):
        before = copy.deepcopy(v)
        got = plain(v)
        assert shape(got) == shape(_plain_reference(v))
        assert not set(containers(got, [])) & set(containers(v, []))
        assert shape(v) == shape(before)

    check()


def test_report_md_lists_every_notable_partition_and_plain_ones_up_to_its_limit():
    """report.md's partition table at scale (report.markdown_partitions): every row that is not a plain commit read
    back as planned is listed, in order, then plain rows up to the limit; the rest are counted and named as being
    in the Parquet file. Under the limit every row is listed."""
    from mm2_failover.rules.report import markdown_partitions

    rows = [{"group": f"g{i}", "action": "commit", "reason": "", "verified": True} for i in range(50)]
    rows[7] = {**rows[7], "verified": False}  # a mismatch
    rows[30] = {**rows[30], "action": "skip", "reason": "no_checkpoint", "verified": None}
    rows[41] = {**rows[41], "action": "clamp", "reason": "retention_gap", "retention_gap": 4}
    assert markdown_partitions(rows, limit=50) == (rows, 0)
    shown, left = markdown_partitions(rows, limit=10)
    assert left == 40 and len(shown) == 10
    assert [r["group"] for r in shown] == ["g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7", "g30", "g41"]
    shown, left = markdown_partitions(rows, limit=2)  # notable rows are never left out, whatever the limit
    assert [r["group"] for r in shown] == ["g7", "g30", "g41"] and left == 47


def test_report_md_says_how_many_rows_it_left_out(monkeypatch):
    from mm2_failover.rules import report as reportmod

    monkeypatch.setattr(reportmod, "MD_PARTITION_ROWS", 2)
    monkeypatch.setattr(reportmod.markdown_partitions, "__defaults__", (2,))
    md = render_markdown(report())
    assert "... and 1 more partition(s) committed and read back as planned, not listed here" in md
    assert "report_partitions.parquet" in md


def test_partitions_of_a_rewound_group_left_unmoved_are_a_warning_and_a_fate():
    """The review: rule 1b's accepted skips (checkpoint_ahead_of_source) had no warning and no fate text."""
    from mm2_failover.rules import plan as pm
    from mm2_failover.rules.checkpoints import Checkpoint

    t = "primary.orders"
    plan = pm.build_plan(
        [Checkpoint("app", t, 0, 150, 102, "", source_alias="primary")],
        {(t, 0): pm.PartitionBounds(0, 1000)},
        {},
        {t: 1},
        source_commits={"app": {("primary", t, 0): 20}},
        accept_groups_without_checkpoints=True,
    )
    rep = build_report(
        dag_id="mm2_failover", run_id="r", params={}, plan=plan, committed={}, log_end={}, mismatches=[], dry_run=True
    )
    assert any("rewound on the source" in w and f"app {t}[0]" in w for w in rep.warnings), rep.warnings
    assert "rewound on the source after MM2's newest checkpoint" in rep.groups[0]["fate"]


def test_groups_and_partitions_worst_first_never_alphabetically_alone():
    """Issue 53 item 4: refused, then not as planned, then lost to retention, then by re-read (unknown before 0)."""
    from mm2_failover.rules.report import worst_first, worst_partitions_first

    groups = [
        {"group": "a-fine", "reread_estimate": 0},
        {"group": "b-reread", "reread_estimate": 50},
        {"group": "c-lost", "retention_lost": 3, "reread_estimate": 0},
        {"group": "d-unknown", "reread_estimate": None, "reread_unknown": 2},
        {"group": "e-more-lost", "retention_lost": 9},
        {"group": "m-mismatch", "mismatches": 1},
        {"group": "z-refused", "refused": "live members"},
        {"group": "b-little", "reread_estimate": 2},
    ]
    assert [g["group"] for g in worst_first(groups)] == [
        "z-refused",
        "m-mismatch",
        "e-more-lost",
        "c-lost",
        "b-reread",
        "b-little",
        "d-unknown",
        "a-fine",
    ]
    parts = [
        {"group": "a", "topic": "t", "partition": 0, "action": "commit", "verified": True, "reread_estimate": 1},
        {"group": "a", "topic": "t", "partition": 1, "action": "commit", "verified": True, "reread_estimate": 9},
        {"group": "b", "topic": "t", "partition": 0, "action": "skip", "verified": None},
        {"group": "c", "topic": "t", "partition": 0, "action": "clamp", "retention_gap": 4, "verified": True},
        {"group": "d", "topic": "t", "partition": 0, "action": "commit", "verified": False},
    ]
    assert [(p["group"], p["partition"]) for p in worst_partitions_first(parts)] == [
        ("d", 0),
        ("c", 0),
        ("b", 0),
        ("a", 1),
        ("a", 0),
    ]


def test_every_warning_names_partitions_in_words_and_says_how_many_are_left_out():
    """A warning people read (report.md, the run page, the approval request) listed stale checkpoints as a Python
    list of dicts ("[{'group': 'a', ...}]") and cut long lists at 10 without saying how many more there were."""
    rows = [PlanRow("primary", f"g{i:02d}", T, 0, 10, 10, None, 10, pm.COMMIT) for i in range(12)]
    src = {(f"g{i:02d}", T, 0): 15 for i in range(12)}
    rep = report(plan=Plan(rows), committed={}, mismatches=[], dry_run=True, source_commits=src)
    stale = next(w for w in rep.warnings if "had not checkpointed the newest commit" in w)
    assert "{" not in stale and "'group'" not in stale
    assert f"g00 {T}[0] (checkpoint at 10, the source's commit at 15)" in stale and stale.endswith("(+2 more)")
    no_cp = [
        PlanRow("primary", f"g{i:02d}", T, 0, None, None, None, None, pm.SKIP, pm.NO_CHECKPOINT) for i in range(12)
    ]
    rep = report(plan=Plan(rows[:1] + no_cp), committed={}, mismatches=[], dry_run=True, source_commits={})
    assert next(w for w in rep.warnings if "have no checkpoint" in w).endswith("(+2 more)")


def test_worst_first_ranks_a_figure_that_is_not_a_number_as_unknown_and_never_raises():
    """The run page sorts a report.json read from the artifacts: one whose re-read or retention figure is not a number
    (a report edited by hand, or written by another version) raised TypeError and the page answered 500. Such a figure
    is unknown: ranked as the groups whose re-read is unknown, above those that re-read nothing."""
    from mm2_failover.rules.report import worst_first, worst_partitions_first

    groups = [
        {"group": "a-fine", "reread_estimate": 0},
        {"group": "b-text", "reread_estimate": "many", "retention_lost": "?"},
        {"group": "c-reread", "reread_estimate": 5},
        {"group": "d-bool", "reread_estimate": True},
    ]
    assert [g["group"] for g in worst_first(groups)] == ["c-reread", "b-text", "d-bool", "a-fine"]
    parts = [
        {"group": "a", "topic": "t", "partition": 0, "action": "commit", "verified": True, "reread_estimate": "x"},
        {"group": "b", "topic": "t", "partition": 0, "action": "clamp", "retention_gap": "?", "verified": True},
        {"group": "c", "topic": "t", "partition": 0, "action": "commit", "verified": True, "reread_estimate": 3},
    ]
    assert [p["group"] for p in worst_partitions_first(parts)] == ["b", "c", "a"]


def test_the_reports_view_is_its_copy_uncopied_and_its_readers_change_nothing_in_it(tmp_path):
    """Report.view (what the publishing, the metrics and the Asset events read) is as_dict without the copy; its
    readers - report.json and its rows written, report.md, summary.json, the metrics, the Asset events - leave the
    report as it was, and building the report changed nothing in the plan's rows (each partition's dict is the
    row's copy, completed in place)."""
    import copy

    from mm2_failover.adapters.runfolder import RunFolder
    from mm2_failover.metrics import emit_metrics
    from mm2_failover.rules import assets
    from mm2_failover.rules.report import run_summary

    plan = the_plan()
    rows_before = copy.deepcopy(plan.rows)
    rep = report(plan=plan)
    assert plan.rows == rows_before and all(len(vars(r)) == len(vars(rows_before[0])) for r in plan.rows)
    assert rep.view() == rep.as_dict()
    before = copy.deepcopy(rep.as_dict())
    d = rep.view()

    class Sink:
        def incr(self, *a, **k):
            pass

        gauge = incr

    RunFolder(tmp_path).save_report(d)
    render_markdown(d)
    run_summary("mm2_failover", "manual__1", d, None, "2026-11-29T00:00:00+00:00")
    emit_metrics(d, Sink())
    assets.events(d, target_cluster_id="c1", target_conn_id="kafka_target")
    assert rep.as_dict() == before and RunFolder(tmp_path).load_report().as_dict() == before
