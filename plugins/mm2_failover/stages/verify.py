"""Stage 7, verify: every planned group read back and compared with the plan; the report is then built and published
by :mod:`mm2_failover.stages.run_report`."""

from __future__ import annotations

from mm2_failover.rules import plan as planmod
from mm2_failover.rules import report as reportmod
from mm2_failover.stages.apply import befores
from mm2_failover.stages.context import RunContext
from mm2_failover.stages.run_report import report_run


def verify_run(
    ctx: RunContext,
    plan: planmod.Plan,
    dry_run: bool | None = None,
    refused: dict[str, str] | None = None,
    warnings: list[str] | None = None,
) -> reportmod.Report:
    """Read every planned group back, compare with the plan, and publish the report (report.json, report.md and
    summary.json). A dry run compares nothing: its report is the plan's."""
    f, p = ctx.folder, ctx.params
    dry_run = p.dry_run if dry_run is None else dry_run
    committed = ctx.target.commits_many(plan.groups(), p.apply_concurrency)
    backup = None if dry_run else f.load_backup()
    planned = plan.commits()  # once: each rule below needs it (0.15 s at 100k rows)
    since = {} if backup is None else planmod.moved_since(plan, committed, befores(backup), planned)
    mismatches = (
        []
        if dry_run
        else [
            m for m in planmod.verify(plan, committed, planned) if (m.topic, m.partition) not in since.get(m.group, {})
        ]
    )
    return report_run(
        ctx, plan, committed, dry_run=dry_run, mismatches=mismatches, since=since, refused=refused, warnings=warnings
    )
