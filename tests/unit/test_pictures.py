"""The report pages' pictures (mm2_failover.pictures, issue 53 item 5): static SVG with no script, ink that follows
the page's theme, and every number drawn the one the report or readiness holds. Grouped by the module's rules; the
pages that show them: tests/unit/test_ui_pages.py, and a real browser: tests/e2e/test_ui.py."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone

import pytest

from mm2_failover import pictures as P
from mm2_failover.rules.plan import CLAMP, COMMIT, SKIP, Plan, PlanRow
from mm2_failover.rules.readiness import answer_counts
from mm2_failover.rules.report import build_report
from mm2_failover.ui import pages

EVIL = "<script>alert(1)</script>"
SVG = "{http://www.w3.org/2000/svg}"


def texts(figure: str) -> list[str]:
    """The words an SVG picture shows (its <text> elements), parsed as XML: a picture that is not well-formed fails."""
    svg = figure[figure.index("<svg") : figure.rindex("</svg>") + 6]
    return ["".join(t.itertext()) for t in ET.fromstring(svg).iter(f"{SVG}text")]


def is_static(figure: str) -> bool:
    return not re.search(r"<script|\son[a-z]+\s*=|javascript:", figure, re.I)


# ------------------------------------------------------------------------------------------ every picture


def every_picture() -> dict[str, str]:
    now = datetime(2026, 11, 28, 12, tzinfo=timezone.utc)
    hist = [
        {
            "computed_at": (now - timedelta(hours=h)).isoformat(),
            "groups_not_exact": h % 2,
            "groups_over_rpo": int(h == 3),
        }
        for h in range(30)
    ]
    bars, span, waiting = P.task_bars([{"task_id": "build_plan", "start": 10.0, "end": 12.0, "state": "success"}])
    return {
        "answer-mix": P.answer_mix({"exact": 6, "floor": 1, "checkpoint": 2, "none": 3}),
        "reread-groups": P.reread_groups([(f"g {EVIL}", 5, 1)], 1),
        "resume-positions": P.resume_positions(
            [{"label": f"g {EVIL}", "start": 0, "end": 10, "checkpoint": 4, "planned": 6}], 1, 1
        ),
        "exposure": P.exposure([1.0, 90.0], 3, 1, 1, 60),
        "interval-strip": P.interval_strip(hist, 60, now),
        "timeline": P.timeline(bars, span, waiting),
        "trend": P.trend(f"t {EVIL}", [("a", 1.0), ("b", 2.5)]),
    }


@pytest.mark.parametrize("name", list(every_picture()))
def test_every_picture_is_well_formed_static_svg_named_and_themed(name):
    fig = every_picture()[name]
    assert fig.startswith(f"<figure class=picture data-picture='{name}'>") and fig.endswith("</figure>")
    assert is_static(fig) and EVIL not in fig
    assert texts(fig)  # parses, and has words
    assert "role='img' aria-label=" in fig
    assert P.INK not in fig and "currentColor" in fig  # the ink is the page's text colour: light and dark themes
    assert "<?xml" not in fig and "<metadata>" not in fig


def test_pictures_are_the_same_for_the_same_data_and_never_share_an_id_on_one_page():
    assert P.answer_mix({"exact": 1}) == P.answer_mix({"exact": 1})
    page = "".join(every_picture().values()) + P.trend("another", [("a", 1.0), ("b", 2.5)])
    ids = re.findall(r"""\bid=["']([^"']+)["']""", page)
    assert ids and len(ids) == len(set(ids))
    # every reference points at an id of the page, and the style sheets are scoped to their own picture
    assert set(re.findall(r"url\(#([^)]+)\)", page)) <= set(ids)
    assert '<style type="text/css">*{' not in page


def test_a_name_is_drawn_as_written_never_as_mathematics_or_as_ink():
    """A review's: Kafka group ids may hold "$" (matplotlib's math syntax: italics, or a picture that cannot be
    drawn), or the ink's placeholder colour."""
    for name in ("pay$ments$v2", "a$\\frac$b", "g$^$", f"x {P.INK}"):
        shown = texts(P.reread_groups([(name, 5, 0)], 1))
        assert name in shown, (name, shown)


# ------------------------------------------------------------------------------------------ rule 1


def test_rule_1_each_kind_is_drawn_as_long_as_and_labelled_with_the_reports_own_count():
    rows = [
        PlanRow("primary", "g", "primary.t", p, 10, 10, None, 10, COMMIT, rule=rule)
        for p, rule in enumerate(("exact_sync", "gap_free_bracket", "sync_floor", "checkpoint"))
    ]
    rows += [
        PlanRow("primary", "g", "primary.t", 9, None, None, None, None, SKIP, "no_checkpoint"),
        PlanRow("primary", "g", "primary.t", 8, 10, 3, None, 10, CLAMP, "retention_gap", 10, 90, 7),
    ]
    rep = build_report(
        dag_id="mm2_failover",
        run_id="r",
        params={},
        plan=Plan(rows),
        committed={},
        log_end={},
        mismatches=[],
        dry_run=True,
    )
    mix = rep.totals["partitions_by_answer"]
    assert mix == {"exact": 2, "floor": 1, "checkpoint": 2, "none": 1} == answer_counts(r.as_dict() for r in rows)
    assert mix["exact"] == rep.totals["partitions_exact"] and sum(mix.values()) == rep.totals["partitions"]
    fig, title, _ = P.figure_answer_mix(mix)
    assert title == "How each partition resumes (6 partition(s))"
    ax = fig.axes[0]
    # the bars, top to bottom in the order of the kinds: as long as the counts, each labelled with its count
    drawn = {t.get_text(): p.get_width() for t, p in zip(ax.get_yticklabels(), ax.patches)}
    assert drawn == {P.ANSWER_LABELS[k]: n for k, n in mix.items()}
    svg = P.answer_mix(mix)
    for kind, n in mix.items():
        said = re.search(r'id="[^"]*-count-' + kind + r'"[^>]*>.*?<text[^>]*>([^<]*)</text>', svg, re.S)
        assert said and said.group(1) == str(n), (kind, said)


# ------------------------------------------------------------------------------------------ rule 2


def test_rule_2_the_top_groups_by_re_read_the_most_first_with_what_is_unknown():
    groups = [
        {"group": "a", "reread_estimate": 5},
        {"group": "b", "reread_estimate": 50, "reread_unknown": 2},
        {"group": "c", "reread_estimate": 0},
        {"group": "d", "reread_estimate": None, "reread_unknown": 1},
        {"group": "e", "reread_estimate": 50},
        {"group": "f", "reread_estimate": "n/a"},
        {"group": "g", "reread_estimate": 0.4},
    ]
    assert P.top_reread(groups) == [("b", 50, 2), ("e", 50, 0), ("a", 5, 0)]
    assert P.top_reread(groups, 1) == [("b", 50, 2)]
    fig, title, _ = P.figure_reread_groups(P.top_reread(groups), 3)
    assert title == "The groups with the most re-read (top 3 of 3)"
    ax = fig.axes[0]
    assert [(t.get_text(), p.get_width()) for t, p in zip(ax.get_yticklabels(), ax.patches)][::-1] == [
        ("b", 50),
        ("e", 50),
        ("a", 5),
    ]
    shown = texts(P.reread_groups(P.top_reread(groups), 3))
    assert "50 (+2 partition(s) unknown)" in shown and "5" in shown


# ------------------------------------------------------------------------------------------ rule 3


def test_rule_3_positions_of_the_worst_partitions_whose_log_is_known_drawn_where_they_are_in_the_log():
    parts = [
        {"group": "g", "topic": "t", "partition": 0, "log_start": None, "log_end": 9},
        {
            "group": "g",
            "topic": "t",
            "partition": 1,
            "log_start": 100,
            "log_end": 1100,
            "downstream_offset": 400,
            "planned_offset": 850,
        },
        {
            "group": "g",
            "topic": "t",
            "partition": 2,
            "log_start": 50,
            "log_end": 60,
            "downstream_offset": 3,
            "planned_offset": 50,
        },
    ]
    got = P.positions(parts)
    assert [p["label"] for p in got] == ["g t[1]", "g t[2]"]
    assert got[0] == {"label": "g t[1]", "start": 100, "end": 1100, "checkpoint": 400, "planned": 850}
    assert len(P.positions(parts, 1)) == 1
    assert (P.log_fraction(400, 100, 1100), P.log_fraction(None, 0, 1), P.log_fraction(3, 50, 60)) == (0.3, None, 0.0)
    fig, title, _ = P.figure_resume_positions(got, 2, 2100)
    assert title == "Where each partition resumes in the replica's log (the worst 2 of 2,100, of the 2 read)"
    ax = fig.axes[0]
    marks = {ln.get_gid(): [] for ln in ax.lines if ln.get_gid()}
    for ln in ax.lines:
        if ln.get_gid():
            marks[ln.get_gid()].append((round(float(ln.get_xdata()[0]), 3), round(float(ln.get_ydata()[0]))))
    # top row (y 1) is the worst, t[1]: the checkpoint at 0.3 of its log, the planned offset at 0.75
    assert sorted(marks["checkpoint"]) == [(0.0, 0), (0.3, 1)] and sorted(marks["planned"]) == [(0.0, 0), (0.75, 1)]
    shown = texts(P.resume_positions(got, 2, 2))
    assert {"100", "g t[1]", "MM2's checkpoint", "planned offset"} <= set(shown)
    assert "1,100   planned 850, checkpoint 400" in shown
    assert "60   planned 50, checkpoint 3 (before the log start)" in shown  # said, where the mark cannot say it


# ------------------------------------------------------------------------------------------ rule 4


def test_rule_4_the_exposure_picture_draws_the_known_groups_and_says_readinesss_own_counts_and_the_rpo():
    groups = [
        {"exposure_seconds": 3},
        {"exposure_seconds": 90, "exposure_unknown": 1},  # one partition not known: among the unknown, not drawn
        {"exposure_seconds": None, "exposure_unknown": 2},
        {"exposure_seconds": float("nan")},
        {"exposure_seconds": 120},
    ]
    assert P.known_exposures(groups) == [3.0, 120.0]
    fig, title, cap = P.figure_exposure(P.known_exposures(groups), 5, 2, 1, 60)
    assert title == "Exposure now: 2 of 5 group(s) known, 1 over the RPO"
    assert "2 group(s) with a partition whose exposure is unknown are not drawn" in cap
    ax = fig.axes[0]
    assert sum(p.get_height() for p in ax.patches) == 2  # two groups drawn
    assert [ln.get_xdata()[0] for ln in ax.lines if ln.get_gid() == "rpo"] == [60]
    assert "RPO 60 s" in texts(P.exposure([3.0], 1, 0, 0, 60))


def test_rule_4_each_interval_is_told_by_the_worst_it_found_and_only_the_last_24_hours_are_drawn():
    assert P.interval_state({"groups_over_rpo": 1, "groups_not_exact": 3}, 60) == "over the RPO"
    assert P.interval_state({"worst_exposure_seconds": 61}, 60) == "over the RPO"
    assert P.interval_state({"groups_not_exact": 1, "worst_exposure_seconds": 60}, 60) == "not all exact"
    assert P.interval_state({}, 60) == "all exact, within the RPO"
    now = datetime(2026, 11, 28, 12, tzinfo=timezone.utc)
    hist = [{"computed_at": (now - timedelta(hours=h)).isoformat(), "groups_over_rpo": int(h < 2)} for h in range(30)]
    hist.append({"computed_at": (now + timedelta(hours=2)).isoformat(), "groups_over_rpo": 1})  # another host's clock
    hist.append({"computed_at": "not a time"})
    day = P.day_of_intervals(hist, 60, now.timestamp())
    assert sorted(h for h, _ in day) == [float(h) for h in range(25)] + [24.0]  # 24 h ago .. now, the future at now
    fig, title, _ = P.figure_interval_strip(hist, 60, now)
    shown = texts(P.interval_strip(hist, 60, now))
    # 0 to 24 hours ago: 25 intervals (24 h ago included), the one dated ahead drawn at now; the 5 older not drawn
    assert "The last 24 hours: 26 interval(s)" in shown
    assert "over the RPO (3)" in shown and "all exact, within the RPO (23)" in shown
    spans = sorted(round((p.get_x() + p.get_width() / 2), 2) for p in fig.axes[0].patches)
    assert spans == sorted(round(h, 2) for h, _ in day)


# ------------------------------------------------------------------------------------------ rule 5


def test_rule_5_one_bar_per_try_that_ran_the_approvals_wait_apart_and_a_try_not_ended_to_now():
    tries = [
        {"task_id": "capture_end_offsets", "try_number": 1, "state": "success", "start": 0.0, "end": 4.0},
        {"task_id": "check_groups_empty", "try_number": 1, "state": "success", "start": 4.0, "end": 9.0, "pokes": 3},
        {"task_id": "approve_plan", "try_number": 1, "state": "success", "start": 9.0, "end": 69.0},
        {"task_id": "apply_group_offsets", "try_number": 1, "state": "failed", "start": 70.0, "end": 75.0},
        {"task_id": "apply_group_offsets", "try_number": 2, "state": "running", "start": 85.0, "end": None},
        {"task_id": "verify_group_offsets", "try_number": 1, "state": "scheduled", "start": None, "end": None},
        {"task_id": "announce", "map_index": 0, "try_number": 1, "state": "success", "start": 80.0, "end": 90.0},
        {"task_id": "announce", "map_index": 1, "try_number": 1, "state": "skipped", "start": 80.0, "end": 80.0},
    ]
    bars, span, waiting = P.task_bars(tries, now=100.0)
    assert (span, waiting) == (100.0, 60.0)
    assert [b["label"] for b in bars] == [
        "capture_end_offsets #1",
        "check_groups_empty #1",
        "approve_plan #1",
        "apply_group_offsets #1",
        "announce [0] #1",
        "apply_group_offsets #2",
    ]
    assert [b["approval"] for b in bars] == [False, False, True, False, False, False]
    assert bars[-1]["seconds"] == 15.0 and not bars[-1]["ended"]  # running: drawn to now
    fig, title, _ = P.figure_timeline(bars, span, waiting)
    assert (
        title
        == "Time per task: 100.0 s from the first start to the last end, 60.0 s of it waiting for a person's approval"
    )
    ax = fig.axes[0]
    assert [(p.get_x(), p.get_width()) for p in ax.patches][::-1][:3] == [(0.0, 4.0), (4.0, 5.0), (9.0, 60.0)]
    shown = texts(P.timeline(bars, span, waiting))
    assert " 60.0 s waiting for a person" in shown and " 5.0 s (failed)" in shown
    assert " 5.0 s, 3 pokes" in shown and " 15.0 s (running)" in shown
    # an approval still waiting runs to now, and says so
    bars, span, waiting = P.task_bars([{"task_id": "approve_plan", "state": "deferred", "start": 0.0}], now=30.0)
    assert (span, waiting) == (30.0, 30.0)
    assert " 30.0 s waiting for a person, still waiting" in texts(P.timeline(bars, span, waiting))
    assert P.task_bars([]) == ([], 0.0, 0.0)


# ------------------------------------------------------------------------------------------ on the pages


def test_a_run_page_draws_the_reports_own_counts_and_its_timeline_inside_airflow(tmp_path):
    rows = [
        PlanRow(
            "primary",
            f"g{i}",
            "primary.t",
            0,
            60,
            10,
            None,
            10 + i,
            COMMIT,
            log_start=0,
            log_end=100,
            rule="exact_sync" if i % 2 else "checkpoint",
        )
        for i in range(4)
    ]
    rep = build_report(
        dag_id="mm2_failover",
        run_id="r1",
        params={},
        plan=Plan(rows),
        committed={},
        log_end={("primary.t", 0): 100},
        mismatches=[],
        dry_run=True,
        source_commits={(f"g{i}", "primary.t", 0): 60 for i in range(4)},
    ).as_dict()
    tries = [{"task_id": "build_plan", "try_number": 1, "state": "success", "start": 1e9, "end": 1e9 + 3}]
    t = pages.render_run("mm2_failover", "r1", rep, None, ["report.json"], "/mm2", tries)
    figs = re.findall(r"<figure class=picture data-picture='([a-z-]+)'>", t)
    assert figs == ["answer-mix", "reread-groups", "resume-positions", "timeline"]
    mix = t[t.index("data-picture='answer-mix'") :]
    assert "How each partition resumes (4 partition(s))" in texts(mix[: mix.index("</figure>")])
    assert t.index("Outcome:") < t.index("data-picture='answer-mix'") < t.index("Groups (4)")
    # outside Airflow (no task tries), a report written before partitions_by_answer (its rows all here), and one
    # whose rows are not all here: no count is drawn that is not the report's
    old = {**rep, "totals": {k: v for k, v in rep["totals"].items() if k != "partitions_by_answer"}}
    t = pages.render_run("mm2_failover", "r1", old, None, [], "/mm2")
    assert "data-picture='timeline'" not in t and "data-picture='answer-mix'" in t
    t = pages.render_run("mm2_failover", "r1", {**old, "partitions": old["partitions"][:2]}, None, [], "/mm2")
    assert "data-picture='answer-mix'" not in t


def test_a_report_whose_figures_cannot_be_drawn_still_has_its_page():
    """A review's: values outside the guard (a count that is null, a total that is not a number) answered 500."""
    rep = {
        "outcome": "succeeded",
        "totals": {"partitions": "n/a", "partitions_by_answer": {"exact": None}},
        "groups": [{"group": "g", "reread_estimate": 7}],
        "partitions": [],
    }
    t = pages.render_run("mm2_failover", "r1", rep, None, [], "/mm2")
    assert "Outcome:" in t and "Groups (1)" in t


def test_the_worst_partitions_of_a_long_report_say_they_are_of_the_rows_read():
    """A review's: with more partitions than the page reads, the title claimed the worst of them all."""
    t = pages.report_pictures(
        {"partitions": 2100},
        [],
        [{"group": "g", "topic": "t", "partition": 0, "log_start": 0, "log_end": 9, "planned_offset": 3}],
    )
    assert "the worst 1 of 2,100, of the 1 read" in t
