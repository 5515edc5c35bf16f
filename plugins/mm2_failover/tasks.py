"""The bodies of the DAGs' TaskFlow tasks: resolve the run once (:class:`~mm2_failover.run.RunContext`), call the
steps in :mod:`mm2_failover.steps`, and turn their outcomes into Airflow's (a deterministic refusal fails the task
without retries). Nothing here decides anything a step does not.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

log = logging.getLogger(__name__)


def _ctx(context, **kw):
    from mm2_failover.run import RunContext

    ctx = RunContext.from_airflow(context, **kw)
    ctx.folder.bind_params(ctx.dag_id, ctx.params.result_params(), list(ctx.params.RESULT_PARAMS))
    return ctx


def _fail_fast(e: Exception):
    """A refusal or a configuration error: retrying would not help."""
    from airflow.sdk.exceptions import AirflowFailException

    return AirflowFailException(str(e))


def capture_end_offsets(context) -> dict:
    from mm2_failover import steps
    from mm2_failover.kafka_io import KafkaConfigError

    ctx = _ctx(context)
    try:
        snap = steps.capture_snapshot(ctx)
    except (steps.ConfigurationError, KafkaConfigError, ValueError) as e:
        raise _fail_fast(e) from None
    return {"snapshot": str(ctx.folder.snapshot), "captured_at": snap.captured_at,
            "disaster_aliases": snap.disaster_aliases}


def apply_group_offsets(context) -> dict:
    from airflow.sdk.exceptions import AirflowSkipException

    from mm2_failover import steps
    from mm2_failover.locks import Locked
    from mm2_failover.plan import PlanError

    ctx = _ctx(context)
    try:
        plan = steps.make_plan(ctx)
    except (PlanError, ValueError) as e:
        raise _fail_fast(e) from None
    counts = plan.counts()
    if ctx.params.dry_run:
        raise AirflowSkipException(f"dry run: plan written to {ctx.folder.plan_json} and {ctx.folder.plan_csv} "
                                   f"({counts}); nothing was written to the target.")
    try:
        res = steps.backup_and_apply(ctx, plan)
    except Locked as e:
        raise RuntimeError(str(e)) from None  # retried: the other writer may be done by then
    if res.refused:
        raise RuntimeError(
            f"{len(res.refused)} group(s) were NOT moved: "
            + "; ".join(f"{g}: {why}" for g, why in sorted(res.refused.items()))
            + ". All other groups were moved. Stop the consumers of these groups on the target; a retry of this "
            "task moves only what is still missing.")
    return {"plan": str(ctx.folder.plan_json), "counts": counts, **res.as_dict()}


def verify_group_offsets(context) -> dict:
    from airflow.sdk.exceptions import AirflowFailException

    from mm2_failover import steps
    from mm2_failover.metrics import emit_metrics

    ctx = _ctx(context)
    plan = steps.make_plan(ctx)
    applied = ctx.folder.load("apply.json", {})
    rep = steps.verify_run(ctx, plan, refused=applied.get("refused"))
    emit_metrics(rep)
    t = rep["totals"]
    log.info("report: %s (%s)\n%s", ctx.folder.report_md, ctx.folder.report_json, ctx.folder.report_md.read_text())
    if rep["mismatches"]:
        raise AirflowFailException(
            f"{t['mismatches']} partition(s) do not hold the planned offset after apply: "
            + "; ".join(f"{m['group']} {m['topic']}[{m['partition']}] planned {m['planned']} got {m['committed']}"
                        for m in rep["mismatches"][:20])
            + f". See {ctx.folder.report_md}. A consumer may have committed since; check the group before re-running.")
    return {"report": str(ctx.folder.report_json), "outcome": rep["outcome"], "totals": t}


def preflight_audit(context) -> list[dict]:
    """The pre-flight audit: warnings only (logged, in audit.json and the report); an unreadable mm2_config fails."""
    from mm2_failover import steps
    from mm2_failover.kafka_io import KafkaConfigError

    ctx = _ctx(context)
    try:
        return steps.preflight_audit(ctx)
    except (steps.ConfigurationError, KafkaConfigError, ValueError) as e:
        raise _fail_fast(e) from None


def archive_offset_syncs(context) -> dict:
    """The archive DAG's task: no run folder (it runs every few minutes); the result is the task's XCom."""
    from mm2_failover import steps
    from mm2_failover.kafka_io import KafkaConfigError
    from mm2_failover.run import RunContext

    ctx = RunContext.from_airflow(context)
    try:
        return steps.archive_offset_syncs(ctx)
    except (steps.ConfigurationError, KafkaConfigError, ValueError) as e:
        raise _fail_fast(e) from None


# ------------------------------------------------------------------------------------------ rollback


def rollback_group_offsets(context) -> dict:
    from mm2_failover import steps
    from mm2_failover.kafka_io import KafkaConfigError
    from mm2_failover.locks import Locked
    from mm2_failover.run import RunContext
    from mm2_failover.runfolder import RunFolderError, load_backup

    p = dict(context["params"])
    ctx = RunContext.from_airflow(context)
    try:
        path = steps.backup_path_of(p.get("backup_path"), p.get("failover_run_id"))
        backup = load_backup(path)
    except (RunFolderError, ValueError) as e:
        raise _fail_fast(e) from None
    log.info("restoring %d group(s) to the state saved at %s (%s)", len(backup.groups), backup.taken_at, path)
    try:
        with steps.writer_lock(ctx, "rollback", float(p.get("lock_wait_seconds") or 120)):
            res = steps.rollback(ctx.target, backup, int(p.get("apply_concurrency") or 32), force=bool(p.get("force")),
                                 backup_path=str(path))
    except (steps.RollbackRefused, KafkaConfigError) as e:
        raise _fail_fast(e) from None
    except Locked as e:
        raise RuntimeError(str(e)) from None
    ctx.folder.save("rollback.json", {"backup": str(path), **res.as_dict()})
    if res.refused:
        raise RuntimeError(f"{len(res.refused)} group(s) were NOT rolled back: "
                           + "; ".join(f"{g}: {w}" for g, w in sorted(res.refused.items()))
                           + ". Stop their consumers on the target and retry this task (it resumes from its journal).")
    return {"backup": str(path), **res.as_dict()}


def verify_rollback(context) -> dict:
    from airflow.sdk.exceptions import AirflowFailException

    from mm2_failover import steps
    from mm2_failover.run import RunContext
    from mm2_failover.runfolder import load_backup

    p = dict(context["params"])
    path = steps.backup_path_of(p.get("backup_path"), p.get("failover_run_id"))
    left = steps.verify_rollback(RunContext.from_airflow(context).target, load_backup(path))
    if left:
        raise AirflowFailException("rollback incomplete: " + "; ".join(left))
    log.info("every group holds exactly the commits saved in %s", path)
    return {"backup": str(path), "verified": True}


# ------------------------------------------------------------------------------------------ DR drill


def measure_replication_lag(context) -> dict:
    return drill_lag(_ctx(context))


def plan_group_offsets(context) -> dict:
    return drill_plan(_ctx(context), dict(context["params"]).get("allow_drill_writes_for_prefix"))


def drill_report(context) -> dict:
    return drill_report_of(_ctx(context))


def drill_lag(ctx) -> dict:
    """One drain observation (no waiting for a drain): the replication lag at drill time, kept in drain.json."""
    from mm2_failover import drill, steps

    v = steps.drain_status(ctx)
    ctx.folder.save("drain.json", v.as_dict())
    lag = drill.replication_lag(v.rows)
    if v.rows:
        log.info("replication at drill time (%d partition(s)):\n%s", len(v.rows), v.table())
    return {"partitions": len(lag), "lag_records": sum(x["lag_records"] or 0 for x in lag), "disaster": v.disaster}


def drill_plan(ctx, prefix) -> dict:
    """Build the plan like a failover would; write offsets ONLY for groups starting with a non-empty
    ``allow_drill_writes_for_prefix`` (backup first, live groups left alone, read back after)."""
    from mm2_failover import drill, steps
    from mm2_failover import plan as planmod

    ctx.params = replace(ctx.params, dry_run=True)
    prefix = drill.normalize_prefix(prefix)
    refusal = None
    try:
        plan = steps.make_plan(ctx)
    except planmod.PlanError as e:
        refusal = str(e)
        log.warning("a real failover would refuse this plan: %s", refusal)
        ctx.params = replace(ctx.params, on_existing_target_offsets="skip", accept_groups_without_checkpoints=True,
                             max_quarantined_records=10**12)
        plan = steps.make_plan(ctx)
    ctx.folder.save("plan_refusal.json", {"refusal": refusal})
    writes: dict[str, Any] = {"prefix": prefix, "applied": {}, "unchanged": [], "refused": {}, "skipped_live": [],
                              "mismatches": []}
    sub = drill.writable_plan(plan, prefix)
    if not prefix:
        log.info("drill: plan of %d group(s) built (%s); nothing written (allow_drill_writes_for_prefix is empty)",
                 len(plan.groups()), plan.counts())
    elif sub.writes():
        live = {s.group for s in steps.live_groups(ctx.target, sub.groups())}
        writes["skipped_live"] = sorted(live)
        sub = planmod.Plan([r for r in sub.rows if r.group not in live])
        if sub.writes():
            res = steps.backup_and_apply(ctx, sub)
            writes.update(res.as_dict())
            committed = ctx.target.commits_many(sub.groups(), ctx.params.apply_concurrency)
            writes["mismatches"] = [m.__dict__ for m in planmod.verify(sub, committed) if m.group not in res.refused]
            log.warning("drill WROTE offsets for %d group(s) starting with %r (backup: %s)", len(res.applied), prefix,
                        ctx.folder.backup)
    else:
        log.info("drill: no planned commit for groups starting with %r: nothing written", prefix)
    ctx.folder.save("drill_writes.json", writes)
    return {"plan": str(ctx.folder.plan_json), "counts": plan.counts(), "refused_plan": bool(refusal),
            "groups_written": sorted(writes["applied"])}


def drill_report_of(ctx) -> dict:
    from mm2_failover import drill, metrics, steps
    from mm2_failover import plan as planmod
    from mm2_failover.report import run_summary
    from mm2_failover.answers import checkpoint_rows
    from mm2_failover.runfolder import now_iso, write_json, write_text

    ctx.params = replace(ctx.params, dry_run=True)
    f = ctx.folder
    plan = planmod.Plan.from_dicts(f.load("plan.json")["rows"])
    refusal = f.load("plan_refusal.json", {}).get("refusal")
    writes = f.load("drill_writes.json", {})
    rep = steps.verify_run(ctx, plan, dry_run=True,
                           warnings=[f"plan refused by a safety rule: {refusal}"] if refusal else None)
    snap = f.load_snapshot()
    src = steps.source_commits(ctx, snap)
    live = sorted(s.group for s in steps.live_groups(ctx.target, plan.groups()))
    d = drill.build_drill_report(
        dag_id=ctx.dag_id, run_id=ctx.run_id, params={**ctx.params.as_dict(), "allow_drill_writes_for_prefix":
                                                      writes.get("prefix", "")},
        snapshot=snap.as_dict(), plan_rows=plan.as_dicts(), checkpoints=checkpoint_rows(f.checkpoints, [
            "source_alias", "group", "topic", "partition", "upstream_offset", "downstream_offset",
            "checkpoint_timestamp"]),
        drain_rows=f.load_drain().get("rows"), live_target_groups=live,
        source_commits={(g, rt, p): c.offset for g, cs in src.items() for (_a, rt, p), c in cs.items()},
        selected_source_groups=sorted({g for s in snap.sources.values() for g in (s.group_commits or {})
                                       if ctx.selection.selects(g)}) if any(s.reachable for s in snap.sources.values())
        else None,
        plan_refusal=refusal, writes=writes,
        report_warnings=[w for w in rep.get("warnings", []) if not w.startswith("plan refused")],
        finished_at=now_iso(), source_aliases=ctx.aliases)
    write_json(f.drill_json, d)
    write_text(f.drill_md, drill.render_drill_markdown(d))
    f.save("summary.json", run_summary(ctx.dag_id, ctx.run_id, rep, d, now_iso()))
    metrics.emit_drill_metrics(d)
    log.info("drill report: %s\n%s", f.drill_md, f.drill_md.read_text())
    return {"drill": str(f.drill_json), "totals": d["totals"], "findings": d["findings"]}
