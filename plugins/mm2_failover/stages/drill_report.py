"""The DR drill (DAG ``mm2_failover_drill``, CLI ``drill``): the replication lag now, the plan a failover would make
(writing only for the groups of ``allow_drill_writes_for_prefix``), and the findings (the rules:
:mod:`mm2_failover.rules.drill`)."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from mm2_failover.adapters.answers import checkpoint_rows
from mm2_failover.adapters.runfolder import DRILL_WRITES, PLAN_REFUSAL, SUMMARY, now_iso, write_text
from mm2_failover.rules import drill
from mm2_failover.rules import plan as planmod
from mm2_failover.rules.report import run_summary
from mm2_failover.stages.apply import backup_and_apply
from mm2_failover.stages.build_plan import make_plan
from mm2_failover.stages.drain_check import drain_status
from mm2_failover.stages.gate import live_groups
from mm2_failover.stages.snapshot import source_positions
from mm2_failover.stages.verify import verify_run

if TYPE_CHECKING:
    from mm2_failover.rules.drill import DrillReport

log = logging.getLogger(__name__)


def drill_lag(ctx) -> dict:
    """One drain observation (no waiting for a drain): the replication lag at drill time, kept in drain.json."""
    v = drain_status(ctx)
    ctx.folder.save_drain(v)
    lag = drill.replication_lag(v.rows)
    if v.rows:
        log.info("replication at drill time (%d partition(s)):\n%s", len(v.rows), v.table())
    return {"partitions": len(lag), "lag_records": sum(x["lag_records"] or 0 for x in lag), "disaster": v.disaster}


def plan_read_only(ctx):
    """(the plan a failover would build now, the safety rule's refusal or None), as a dry run: a plan a real failover
    would refuse is built again with the refusing rules relaxed (existing target commits skipped, groups without
    checkpoints accepted, any quarantine), so that everything else is still seen; the refusal is kept in
    ``plan_refusal.json``. The drill's and the readiness assessment's plan."""
    ctx.params = replace(ctx.params, dry_run=True)
    refusal = None
    try:
        plan = make_plan(ctx)
    except planmod.PlanError as e:
        refusal = str(e)
        log.warning("a real failover would refuse this plan: %s", refusal)
        ctx.params = replace(
            ctx.params,
            on_existing_target_offsets="skip",
            accept_groups_without_checkpoints=True,
            max_quarantined_records=10**12,
        )
        plan = make_plan(ctx)
    ctx.folder.save(PLAN_REFUSAL, {"refusal": refusal})
    return plan, refusal


def drill_plan(ctx, prefix) -> dict:
    """Build the plan like a failover would; write offsets ONLY for groups starting with a non-empty
    ``allow_drill_writes_for_prefix`` (backup first, live groups left alone, read back after)."""
    prefix = drill.normalize_prefix(prefix)
    plan, refusal = plan_read_only(ctx)
    writes: dict[str, Any] = {
        "prefix": prefix,
        "applied": {},
        "unchanged": [],
        "refused": {},
        "skipped_live": [],
        "mismatches": [],
    }
    sub = drill.writable_plan(plan, prefix)
    if not prefix:
        log.info(
            "drill: plan of %d group(s) built (%s); nothing written (allow_drill_writes_for_prefix is empty)",
            len(plan.groups()),
            plan.counts(),
        )
    elif sub.writes():
        live = {s.group for s in live_groups(ctx.target, sub.groups())}
        writes["skipped_live"] = sorted(live)
        sub = planmod.Plan([r for r in sub.rows if r.group not in live])
        if sub.writes():
            res = backup_and_apply(ctx, sub)
            writes.update(res.as_dict())
            committed = ctx.target.commits_many(sub.groups(), ctx.params.apply_concurrency)
            writes["mismatches"] = [m.__dict__ for m in planmod.verify(sub, committed) if m.group not in res.refused]
            log.warning(
                "drill WROTE offsets for %d group(s) starting with %r (backup: %s)",
                len(res.applied),
                prefix,
                ctx.folder.backup,
            )
    else:
        log.info("drill: no planned commit for groups starting with %r: nothing written", prefix)
    ctx.folder.save(DRILL_WRITES, writes)
    return {
        "plan": str(ctx.folder.plan_json),
        "counts": plan.counts(),
        "refused_plan": bool(refusal),
        "groups_written": sorted(writes["applied"]),
    }


def drill_report(ctx) -> DrillReport:
    """The drill's findings (``drill.json``, ``drill.md``, the UI's summary) from what its tasks kept; returns them."""
    ctx.params = replace(ctx.params, dry_run=True)
    f = ctx.folder
    plan = f.load_plan().plan
    refusal = f.load(PLAN_REFUSAL, {}).get("refusal")
    writes = f.load(DRILL_WRITES, {})
    rep = verify_run(
        ctx, plan, dry_run=True, warnings=[f"plan refused by a safety rule: {refusal}"] if refusal else None
    )
    snap = f.load_snapshot()
    drained = f.load_drain()
    live = sorted(s.group for s in live_groups(ctx.target, plan.groups()))
    d = drill.build_drill_report(
        dag_id=ctx.dag_id,
        run_id=ctx.run_id,
        params={**ctx.params.as_dict(), "allow_drill_writes_for_prefix": writes.get("prefix", "")},
        snapshot=snap.as_dict(),
        plan_rows=plan.as_dicts(),
        checkpoints=checkpoint_rows(
            f.checkpoints,
            [
                "source_alias",
                "group",
                "topic",
                "partition",
                "upstream_offset",
                "downstream_offset",
                "checkpoint_timestamp",
            ],
        ),
        drain_rows=drained.rows if drained else None,
        live_target_groups=live,
        source_commits=source_positions(ctx, snap),
        selected_source_groups=sorted(
            {g for s in snap.sources.values() for g in (s.group_commits or {}) if ctx.selection.selects(g)}
        )
        if any(s.reachable for s in snap.sources.values())
        else None,
        plan_refusal=refusal,
        writes=writes,
        report_warnings=[w for w in rep.warnings if not w.startswith("plan refused")],
        finished_at=now_iso(),
        source_aliases=ctx.aliases,
    )
    f.save_drill(d)
    write_text(f.drill_md, drill.render_drill_markdown(d))
    f.save(SUMMARY, run_summary(ctx.dag_id, ctx.run_id, rep.view(), d.as_dict(), now_iso()))
    log.info("drill report: %s\n%s", f.drill_md, f.drill_md.read_text())
    return d
