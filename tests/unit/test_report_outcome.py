"""The approval's decision changes a published report's outcome only (stages/approve_plan.record_decision): the report is
republished without loading or writing its rows again (stages/run_report.publish_outcome, report.restate_outcome). Differential:
what that writes equals, file by file, what a whole publish of the same report with the same decision writes."""

from __future__ import annotations

import json
import types

import pytest

from mm2_failover.adapters.runfolder import REPORT_PARTITIONS, RunFolder, RunFolderError
from mm2_failover.rules import approval as rules
from mm2_failover.rules import plan as pm
from mm2_failover.rules.plan import Plan, PlanRow
from mm2_failover.rules.report import build_report, render_markdown, restate_outcome
from mm2_failover.stages.run_report import publish_outcome, publish_report

T = "primary.orders"
ROWS = [
    PlanRow("primary", f"g{i}", T, p, 100 + p, 10 + p, None, 10 + p, pm.COMMIT, "", 0, 50)
    for i in range(30)
    for p in range(3)
]
ROWS.append(PlanRow("primary", "idle", T, 0, None, None, None, None, pm.SKIP, pm.NO_CHECKPOINT, 0, 25))


def preview(decision: rules.Decision | None):
    rep = build_report(
        dag_id="mm2_failover",
        run_id="manual__1",
        params={"dry_run": False},
        plan=Plan(ROWS),
        committed={},
        log_end={},
        mismatches=[],
        dry_run=True,
        warnings=["a | warning"],
        outcome=rules.OUTCOMES[rules.AWAITING],
    )
    if decision is not None:
        rep.outcome, rep.approval = rules.OUTCOMES[decision.status], decision.as_dict()
    return rep


def ctx_in(path) -> types.SimpleNamespace:
    return types.SimpleNamespace(folder=RunFolder(path), dag_id="mm2_failover", run_id="manual__1")


def published(path) -> dict:
    files = ("report.json", "report.md", "summary.json", REPORT_PARTITIONS, "report_stale_checkpoints.parquet")
    out = {name: (path / name).read_bytes() for name in files}
    summary = json.loads(out.pop("summary.json"))
    summary.pop("time")  # when it was written
    return {**out, "summary": summary}


@pytest.mark.parametrize("status", [rules.AWAITING, rules.APPROVED, rules.REJECTED, rules.TIMED_OUT])
def test_the_decision_republished_without_its_rows_equals_a_whole_publish(tmp_path, status):
    asked = rules.Decision(rules.AWAITING, "sha256:abc", asked_at="2026-11-26T10:00:00+00:00", timeout_seconds=60)
    decided = rules.Decision(
        status,
        "sha256:abc",
        asked_at=asked.asked_at,
        decided_at="2026-11-26T10:00:09+00:00",
        decided_by="admin",
        timeout_seconds=60,
    )
    whole, fast = tmp_path / "whole", tmp_path / "fast"
    publish_report(ctx_in(whole), preview(decided))
    publish_report(ctx_in(fast), preview(asked))
    rows_before = (fast / REPORT_PARTITIONS).stat().st_mtime_ns
    rep = RunFolder(fast).load_report(partitions=False)
    assert rep.partitions == []
    rep.outcome, rep.approval = rules.OUTCOMES[decided.status], decided.as_dict()
    publish_outcome(ctx_in(fast), rep)
    assert (fast / REPORT_PARTITIONS).stat().st_mtime_ns == rows_before  # the rows were not written again
    assert published(fast) == published(whole)
    assert RunFolder(fast).load_report().partitions == RunFolder(whole).load_report().partitions


def test_restating_the_outcome_changes_that_line_only():
    before = render_markdown(preview(None))
    decided = rules.Decision(rules.REJECTED, "sha256:abc", decided_at="2026-11-26T10:00:09+00:00", decided_by="bob")
    after = restate_outcome(before, preview(decided))
    assert after == render_markdown(preview(decided))
    changed = [(a, b) for a, b in zip(before.split("\n"), after.split("\n")) if a != b]
    assert len(changed) == 1 and changed[0][1].startswith("**Outcome: REJECTED**")


def test_a_markdown_that_is_not_a_report_is_refused():
    with pytest.raises(ValueError, match="not a report.md"):
        restate_outcome("# notes\n\nsomething else\n\n", preview(None))


def test_a_report_without_its_rows_cannot_be_saved_as_if_they_were_there(tmp_path):
    folder = RunFolder(tmp_path)
    with pytest.raises(RunFolderError, match="report's rows .* are not there to keep"):
        folder.save_report(preview(None), rows=False)
    assert not (tmp_path / "report.json").exists()


@pytest.mark.parametrize("damage", ["gone", "not ours"])
def test_a_report_md_gone_or_not_ours_is_written_again_whole(tmp_path, damage):
    decided = rules.Decision(rules.APPROVED, "sha256:abc", decided_at="2026-11-26T10:00:09+00:00", decided_by="admin")
    whole, fast = tmp_path / "whole", tmp_path / "fast"
    publish_report(ctx_in(whole), preview(decided))
    publish_report(ctx_in(fast), preview(None))
    if damage == "gone":
        (fast / "report.md").unlink()
    else:
        (fast / "report.md").write_text("# notes\n\nsomething else\n\n")
    rep = RunFolder(fast).load_report(partitions=False)
    rep.outcome, rep.approval = rules.OUTCOMES[decided.status], decided.as_dict()
    publish_outcome(ctx_in(fast), rep)
    assert published(fast) == published(whole)
