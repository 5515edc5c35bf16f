"""Stage 5, plan: built once per run from the snapshot, the checkpoints and the exact translations (the rules:
:mod:`mm2_failover.rules.plan`; its files: :meth:`mm2_failover.adapters.runfolder.RunFolder.save_plan`)."""

from __future__ import annotations

import logging
from datetime import datetime

from mm2_failover.adapters.runfolder import now_iso
from mm2_failover.rules import plan as planmod
from mm2_failover.rules.report import estimate_reread
from mm2_failover.rules.report import plan_lines as lines
from mm2_failover.rules.values import age_seconds, to_ms
from mm2_failover.stages.compute_checkpoints import checkpoint_times, selected_checkpoints
from mm2_failover.stages.context import RunContext
from mm2_failover.stages.failback import home_translations
from mm2_failover.stages.snapshot import archived_commits, source_commits, source_positions
from mm2_failover.stages.translation import exact_translations

log = logging.getLogger(__name__)


def make_plan(ctx: RunContext) -> planmod.Plan:
    """Build the plan once per run (a retry reloads it, so 'current' keeps meaning 'before this run')."""
    return plan_record(ctx).plan


def plan_record(ctx: RunContext) -> planmod.PlanRecord:
    """:func:`make_plan`'s record: the plan with the hash of the ``plan.json`` it was written as or read from."""
    f, p = ctx.folder, ctx.params
    if f.has_plan():
        log.info("plan already built for this run: reusing %s", f.plan_json)
        return f.load_plan()
    summary = f.load_summary()
    refusal = planmod.quarantine_refusal(summary.raw if summary else None, p.max_quarantined_records)
    if refusal:
        raise planmod.PlanError(refusal)
    snap = f.load_snapshot()
    cps = selected_checkpoints(ctx)
    src = source_commits(ctx, snap)
    taken, taken_notes = positions_of_lost_sources(ctx, snap, cps)
    for g, cs in taken.items():
        src.setdefault(g, {}).update(cs)
    groups = sorted({c.group for c in cps} | set(src))
    current = ctx.target.commits_many(groups, p.apply_concurrency)
    bounds = {tp: planmod.PartitionBounds(snap.replica_start[tp], snap.replica_end[tp]) for tp in snap.replica_end}
    exact, notes, at_least, below = exact_translations(ctx, snap, cps, src)
    home, home_notes = home_translations(ctx, snap, src)
    exact, notes = {**exact, **home}, taken_notes + notes + home_notes
    src_meta = {(g, rt, part): c.metadata for g, cs in src.items() for (_a, rt, part), c in cs.items()}
    plan = planmod.build_plan(
        cps,
        bounds,
        {g: {tp: c.offset for tp, c in cs.items()} for g, cs in current.items()},
        snap.replica_partitions,
        on_existing_target_offsets=p.on_existing_target_offsets,
        allow_rewind=p.allow_rewind,
        source_commits={g: {k: c.offset for k, c in cs.items()} for g, cs in src.items()},
        accept_groups_without_checkpoints=p.accept_groups_without_checkpoints,
        exact={k: planmod.Proven(e.offset, e.rule, e.source_position, src_meta.get(k, "")) for k, e in exact.items()},
        positions_at_least=at_least,
        replica_floors=below,
    )
    built = now_iso()
    record = planmod.PlanRecord(
        plan, built, p.as_dict(), notes, snap.captured_at, age_seconds(snap.captured_at, to_ms(built))
    )
    f.save_plan(record)
    log.info(
        "plan: %d group(s), %s, offsets by rule %s; written to %s and %s",
        len(plan.groups()),
        plan.counts(),
        plan.rules(),
        f.plan_json,
        f.plan_csv,
    )
    return record


def positions_of_lost_sources(ctx: RunContext, snap, cps: list) -> tuple[dict, list[str]]:
    """Plan rule 1a: the archived commits of lost sources that are the groups' positions (group -> {(alias, replica
    topic, partition): commit}), and what the report says of them."""
    archived = archived_commits(ctx, snap)
    if not archived:
        return {}, []
    read = {
        a: (
            datetime.fromisoformat(s.archived_read["read_from"]).timestamp(),
            datetime.fromisoformat(s.archived_read["read_to"]).timestamp(),
        )
        for a, s in snap.sources.items()
        if s.archived_read
    }
    times = checkpoint_times(ctx)
    info = {}
    for c in cps:
        k = (c.source_alias, c.group, c.topic, c.partition)
        info[k] = (c.upstream_offset, times.get(k))
    taken = planmod.archived_positions_taken(archived, read, info)
    notes = []
    for a in sorted(read):
        n_archived = sum(1 for cs in archived.values() for k in cs if k[0] == a)
        n_taken = sum(1 for cs in taken.values() for k in cs if k[0] == a)
        notes.append(
            f"alias {a} (source lost): the archive read the groups' source commits at "
            f"{snap.sources[a].archived_read['read_from']} ({age_text(snap.sources[a].archived_read['read_to'], snap)} "
            f"before the snapshot); {n_taken} of their {n_archived} partition(s) are the groups' positions (plan rule "
            "1a: below MM2's checkpoint - reset backwards after it -, or MM2 has none); the others are MM2's "
            "checkpoints, never a reading above them (a reset after the reading to MM2's checkpoint or above is one "
            "MM2 never checkpoints). A group MM2 never checkpointed is placed as of the reading: a reset after it is "
            "known to nobody."
        )
    return taken, notes


def age_text(iso: str, snap) -> str:
    age = age_seconds(iso, to_ms(snap.captured_at))
    return "an unknown time" if age is None else f"{age:.0f} s"


def plan_lines(ctx: RunContext, plan: planmod.Plan) -> list[dict]:
    """The plan per partition with the re-read figures the report gives (:func:`mm2_failover.rules.report.plan_lines`):
    what the command line prints after ``plan`` and before ``apply --execute``."""
    rows = plan.as_dicts()
    return lines(
        rows,
        estimate_reread(
            [r for r in rows if r["planned_offset"] is not None], source_positions(ctx, ctx.folder.load_snapshot())
        ),
    )
