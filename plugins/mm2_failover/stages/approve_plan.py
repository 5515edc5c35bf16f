"""The approval of a failover run's plan (issue 33; its rules: :mod:`mm2_failover.rules.approval`): the preview report
the approver reads, the request, the decision kept in ``approval.json`` and in the report, and the check apply makes
before its first write."""

from __future__ import annotations

import logging

from mm2_failover.adapters.config import four_eyes
from mm2_failover.adapters.runfolder import now_iso
from mm2_failover.rules import approval as rules
from mm2_failover.rules import plan as planmod
from mm2_failover.rules import plandiff
from mm2_failover.rules import report as reportmod
from mm2_failover.rules.notify import report_link
from mm2_failover.stages.build_plan import make_plan
from mm2_failover.stages.context import RunContext
from mm2_failover.stages.run_report import publish_outcome, report_run

log = logging.getLogger(__name__)


def current_hash(ctx: RunContext) -> str:
    """The hash of ``plan.json`` as the run folder reads it now (rule 2): the bytes its plan is parsed from."""
    return ctx.folder.load_plan().plan_hash


def preview(ctx: RunContext, plan: planmod.Plan, committed: dict | None = None) -> reportmod.Report | None:
    """The report of the plan before anything is written (nothing compared): a dry run's final report, or
    what the approver reads while the plan waits. None for a run that writes without asking (its verify reports).
    ``committed``: the target's commits as just read (else read here)."""
    p = ctx.params
    asks = rules.needed(p.require_approval, p.dry_run, ctx.unconfirmed_disaster_aliases())
    if not p.dry_run and not asks:
        return None
    if committed is None:
        committed = ctx.target.commits_many(plan.groups(), p.apply_concurrency)
    return report_run(ctx, plan, committed, dry_run=True, outcome=None if p.dry_run else rules.OUTCOMES[rules.AWAITING])


def plan_and_preview(ctx: RunContext) -> tuple[planmod.Plan, reportmod.Report | None]:
    """``build_plan``: the plan, once per run, and its :func:`preview`. A plan built in this same call has just read
    the target's commits: the preview shows that read (one read of every group less, ~2 s at 10k groups); a retry
    that reuses an older plan reads them again."""
    fresh = not ctx.folder.has_plan()
    plan = make_plan(ctx)
    return plan, preview(ctx, plan, committed=plan.current_commits() if fresh else None)


def moved_since(ctx: RunContext, plan: planmod.Plan) -> dict:
    """The live diff's counts as the request is made (:mod:`mm2_failover.rules.plandiff`): the partitions the plan writes
    whose commit on the target is neither the one the plan saw nor the planned one, and their groups; a read that
    fails is said, never fatal to the request."""
    writes = [r.as_dict() for r in plan.rows if r.writes]
    groups = sorted({w["group"] for w in writes})
    try:
        now = ctx.target.commits_many(groups, ctx.params.apply_concurrency)
    except Exception as e:  # noqa: BLE001 - a count for the request, never the reason it is not asked
        return {"error": str(e)}
    d = plandiff.diff(writes, {g: {tp: c.offset for tp, c in cs.items()} for g, cs in now.items()}, groups)
    off = {r["group"] for r in d.rows if r["state"] in (plandiff.MOVED, plandiff.GONE)}
    return {"partitions": d.counts[plandiff.MOVED] + d.counts[plandiff.GONE], "groups": len(off), "read": len(d.rows)}


def ask(
    ctx: RunContext, base_url: str, since_trigger_seconds: float | None = None, triggered_by: str | None = None
) -> tuple[str, str, rules.Decision]:
    """The request (subject, Markdown body) for this run's plan, and its record in ``approval.json`` (awaiting).
    ``since_trigger_seconds``, ``triggered_by``: the run's age and who triggered it, as Airflow says."""
    f = ctx.folder
    rep = f.load_report(partitions=False)  # its totals and warnings: not its 100k rows at 10k groups
    if rep is None:
        raise rules.ApprovalRefused(f"no preview report in {f.dir}: build_plan must run before approve_plan (clear it)")
    record = f.load_plan()
    h = record.plan_hash  # the request names the plan it summarises: one read
    subject, body = rules.request_text(
        run_id=ctx.run_id,
        totals=rep.totals,
        rules=record.plan.rules(),
        warnings=rep.warnings,
        disaster_aliases=list((rep.snapshot or {}).get("disaster_aliases") or []),
        plan_hash=h,
        page_url=report_link(base_url, ctx.dag_id, f.dir.name),
        unconfirmed=ctx.unconfirmed_disaster_aliases(),
        groups=rep.groups,
        since_trigger_seconds=since_trigger_seconds,
        triggered_by=triggered_by,
        moved_since=moved_since(ctx, record.plan),
        approver_not_triggerer=four_eyes(ctx.params),
    )
    asked = rules.Decision(rules.AWAITING, h, asked_at=now_iso(), timeout_seconds=ctx.params.approval_timeout_seconds)
    record_decision(ctx, asked)
    return subject, body, asked


def record_decision(ctx: RunContext, decision: rules.Decision) -> None:
    """``approval.json``, and the report's outcome until verify writes the final one."""
    f = ctx.folder
    f.save_approval(decision)
    rep = f.load_report(partitions=False)  # the decision changes the outcome, never the rows
    if rep is not None and rep.outcome in reportmod.APPROVAL_OUTCOMES:
        rep.outcome, rep.approval = rules.OUTCOMES[decision.status], decision.as_dict()
        publish_outcome(ctx, rep)
    log.info("approval: %s", decision.describe())


def not_required(ctx: RunContext) -> rules.Decision:
    """Rule 1's opt-out, recorded like a decision (the report and apply's check read it)."""
    d = rules.Decision(rules.NOT_REQUIRED, current_hash(ctx), decided_at=now_iso())
    ctx.folder.save_approval(d)
    log.warning("no approval asked for this run's plan (require_approval=false): %s", d.describe())
    return d


def approved_plan(ctx: RunContext, record: planmod.PlanRecord) -> rules.Decision:
    """Rule 5, before apply's first write: the decision that lets it write ``record`` - the plan apply is about to
    write, checked by the hash of the bytes it was parsed from (a plan replaced after it was read is never written
    on another plan's approval)."""
    return rules.check(ctx.folder.load_approval(), record.plan_hash)
