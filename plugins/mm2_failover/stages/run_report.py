"""The run's report, built and published in one place (issue 51): for a dry run's report and the plan's preview
the approver reads (before anything is written), for the drill, and for verify after the commits were read back -
report.json, report.md and the index's summary.json, with what retention took counted where it can be."""

from __future__ import annotations

from mm2_failover.adapters.kafka.cluster import Cluster
from mm2_failover.adapters.runfolder import SUMMARY, Snapshot, now_iso, write_text
from mm2_failover.rules import drain as drainmod
from mm2_failover.rules import plan as planmod
from mm2_failover.rules import report as reportmod
from mm2_failover.rules.translate import REPLICA_START
from mm2_failover.stages.apply import describe_moved
from mm2_failover.stages.context import RunContext
from mm2_failover.stages.snapshot import source_commits, source_positions


def lost_to_retention_exact(ctx: RunContext, plan: planmod.Plan, snap: Snapshot, scan: int = 2000) -> dict:
    """For partitions clamped to the replica's log start, or resuming there below every offset sync (rule
    ``replica_start``: behind the source's retention, never checkpointed), where the group's source commit U is
    known: find the source offset u of the replica's first record (same key, value and timestamp on the source) and
    count the offsets [U, u) the group had not read and that are gone: exactly what was lost. Partitions where the
    record is not found within ``scan`` records of its timestamp keep the upper bound (clamped) or say nothing."""
    src = source_commits(ctx, snap)
    out = {}
    for r in plan.rows:
        if not ((r.reason == planmod.RETENTION_GAP and r.retention_gap) or (r.writes and r.rule == REPLICA_START)):
            continue
        commit = src.get(r.group, {}).get((r.source_alias, r.topic, r.partition))
        source = ctx.source(r.source_alias) if r.source_alias in ctx.aliases else None
        if commit is None or source is None:
            continue
        u = find_source_offset(
            ctx.target,
            source,
            ctx.policies[r.source_alias].source_topic(r.topic),
            r.topic,
            r.partition,
            r.log_start,
            scan,
        )
        if u is not None:
            out[(r.group, r.topic, r.partition)] = max(0, u - commit.offset)
    return out


def find_source_offset(
    target: Cluster, source: Cluster, source_topic: str, replica_topic: str, partition: int, downstream: int, scan: int
) -> int | None:
    """The source offset of the record MM2 copied to ``replica_topic[partition]@downstream`` (None: not found): the
    same record (:meth:`~mm2_failover.rules.evidence.Record.same_content`) within ``scan`` records of its timestamp."""
    rtp, stp = (replica_topic, partition), (source_topic, partition)
    got = target.records({rtp: (downstream, downstream + 1)})[rtp]
    if not got:
        return None
    start = source.offset_for_time(stp, got[0].timestamp_ms)
    if start is None:
        return None
    end = source.offsets([stp])[stp]
    return next(
        (r.offset for r in source.records({stp: (start, min(end, start + scan))})[stp] if r.same_content(got[0])), None
    )


def report_run(
    ctx: RunContext,
    plan: planmod.Plan,
    committed: dict,
    *,
    dry_run: bool,
    mismatches: list | None = None,
    since: dict | None = None,
    refused: dict[str, str] | None = None,
    warnings: list[str] | None = None,
    outcome: str | None = None,
) -> reportmod.Report:
    """Build and publish the run's report from ``committed`` (the target's commits as read): a dry run's or a
    preview's (nothing written; ``outcome``: the approval's state while the plan waits), or, from verify, a run that
    wrote - its ``mismatches`` and the partitions its consumers moved ``since`` the backup."""
    f, p = ctx.folder, ctx.params
    mismatches = list(mismatches or [])
    moved = describe_moved(since or {}, plan)  # the plan's commits computed only when a group moved since
    tps = sorted({(r.topic, r.partition) for r in plan.rows})
    log_end = ctx.target.offsets(tps) if tps else {}
    summary = f.load_summary()
    snap = f.load_snapshot()
    drain = f.load_drain()
    rpo = drain.rpo if drain else None
    warnings = list(warnings or [])
    if snap.disaster_aliases:
        warnings.append(
            f"DISASTER MODE for source alias(es) {', '.join(snap.disaster_aliases)}: their clusters were "
            "not reachable (or declared lost); producer and source-group checks were skipped for them. "
            f"Data-loss window: {drainmod.loss_window_text(rpo)}."
        )
    unconfirmed = ctx.unconfirmed_disaster_aliases() if snap.disaster_aliases else []
    if unconfirmed:
        warnings.append(
            f"DISASTER MODE NOT CONFIRMED for source alias(es) {', '.join(unconfirmed)}: they did not "
            "answer under source_reachable=detect and nobody declared them lost - a wrong address looks "
            "the same. Nothing is written until a human approves this plan."
        )
    built = f.load_plan() if f.has_plan() else None
    warnings += built.translation_notes if built else []
    warnings += [
        f"group {g} moved since this run's backup, NOT rewritten (its consumers committed on the target "
        f"after the first apply; a retry never rewinds them): {'; '.join(what)}"
        for g, what in moved.items()
    ]
    audited = f.load_audit()
    warnings += [
        f"pre-flight audit, alias {a.alias}, {a.rule}: {a.message}" for a in (audited.warnings() if audited else [])
    ]
    src = source_positions(ctx, snap)
    lost = (
        {}
        if dry_run and not any(r.retention_gap or r.rule == REPLICA_START for r in plan.rows)
        else lost_to_retention_exact(ctx, plan, snap)
    )
    rep = reportmod.build_report(
        dag_id=ctx.dag_id,
        run_id=ctx.run_id,
        params=p.as_dict(),
        plan=plan,
        committed=committed,
        log_end=log_end,
        mismatches=mismatches,
        refused=refused,
        dry_run=dry_run,
        checkpoints_summary=summary.raw if summary else {},
        warnings=warnings,
        source_commits=src,
        lost_exact=lost,
        snapshot={
            "captured_at": snap.captured_at,
            "age_seconds": built.snapshot_age_seconds if built else None,
            "disaster_aliases": snap.disaster_aliases,
        },
        outcome=outcome,
    )
    decision = f.load_approval()
    rep.artifacts, rep.rpo, rep.moved_since = str(f.dir), rpo, moved
    rep.approval = decision.as_dict() if decision else None
    publish_report(ctx, rep)
    return rep


def publish_report(ctx: RunContext, rep: reportmod.Report) -> None:
    """A failover's report in its three forms: report.json, report.md and the index's summary.json."""
    f = ctx.folder
    d = rep.view()  # read only below: not copied (Report.view)
    f.save_report(d)
    write_text(f.report_md, reportmod.render_markdown(d))
    f.save(SUMMARY, reportmod.run_summary(ctx.dag_id, ctx.run_id, d, None, now_iso()))


def publish_outcome(ctx: RunContext, rep: reportmod.Report) -> None:
    """The published report with a new outcome (the approval's decision) and the same rows: ``rep`` was loaded
    without its rows, which stay as written (report.json, report.md's outcome line and summary.json are rewritten:
    ~0.1 s at 10k groups x 10 partitions, against ~2 s to load and publish the rows again)."""
    f = ctx.folder
    d = rep.as_dict()
    f.save_report(d, rows=False)
    try:
        text = reportmod.restate_outcome(f.report_md.read_text(), d)
    except (FileNotFoundError, ValueError):  # no report.md, or not one render_markdown wrote: whole, with its rows
        text = reportmod.render_markdown(f.load_report())
    write_text(f.report_md, text)
    f.save(SUMMARY, reportmod.run_summary(ctx.dag_id, ctx.run_id, d, None, now_iso()))
