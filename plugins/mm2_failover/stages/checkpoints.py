"""Stage 3, checkpoints: the Spark job's answers, read only once its summary says it finished."""

from __future__ import annotations

from pathlib import Path

from mm2_failover.checkpoints import Checkpoint
from mm2_failover.run import RunContext
from mm2_failover.runfolder import RunFolderError


def load_latest_checkpoints(path: Path) -> list[Checkpoint]:
    """Every answer of the Spark job (all groups: the job does not select)."""
    from mm2_failover.answers import checkpoint_rows

    return [Checkpoint(**r) for r in checkpoint_rows(path, [
        "source_alias", "group", "topic", "partition", "upstream_offset", "downstream_offset", "metadata"])]


def whole_answers(ctx: RunContext):
    """The run's answers folder, only once the job's summary, which it writes last and atomically (and which every
    submission deletes first), says it finished (a job killed while writing may leave answers that are partial:
    never read)."""
    f = ctx.folder
    if not f.checkpoints.exists():
        raise RunFolderError(f"no latest checkpoints at {f.checkpoints}: compute_latest_checkpoints must run first")
    summary = f.load_summary()
    if summary is None:
        raise RunFolderError(f"the latest checkpoints at {f.checkpoints} have no summary ({f.checkpoints_summary}): "
                             "the Spark job did not finish (killed or failed while writing), so they may be partial "
                             "and are not read. Run compute_latest_checkpoints again (clear the task, or the CLI's "
                             "checkpoints step): it rewrites them.")
    named = summary.raw.get("output_files")
    if named is not None:  # in an object store: the parts the summary names, and no others (answers rule 6)
        from mm2_failover import store
        from mm2_failover.answers import parts_problems

        bad = parts_problems(store.listing(f.checkpoints), named)
        if bad:
            raise RunFolderError(f"the latest checkpoints at {store.url_of(f.checkpoints)} are not the ones their "
                                 f"summary names: {'; '.join(bad[:5])}. They are not read: run "
                                 "compute_latest_checkpoints again (clear the task, or the CLI's checkpoints step).")
    return f.checkpoints


def selected_checkpoints(ctx: RunContext) -> list[Checkpoint]:
    """The latest checkpoints of the run's selected groups and aliases (from :func:`whole_answers` only)."""
    aliases = set(ctx.aliases)
    return [c for c in load_latest_checkpoints(whole_answers(ctx))
            if c.source_alias in aliases and ctx.selection.selects(c.group)]


def selected_checkpoint_groups(ctx: RunContext) -> set[str]:
    """The groups of :func:`selected_checkpoints`, from the answers' two name columns, each (alias, group) once: what
    the gate needs (at 10k groups x 10 partitions, 0.05 s against 0.7 s for the 100k checkpoints)."""
    from mm2_failover.answers import group_names

    aliases = set(ctx.aliases)
    return {g for a, g in group_names(whole_answers(ctx)) if a in aliases and ctx.selection.selects(g)}


def checkpoint_times(ctx: RunContext) -> dict[tuple[str, str, str, int], float | None]:
    """(alias, group, replica topic, partition) -> when MM2 wrote the answering checkpoint (epoch seconds; None where
    the answers do not say: an older job's, or a test's), for the selected answers (plan rule 1a)."""
    from datetime import timezone

    from mm2_failover.answers import checkpoint_rows

    aliases = set(ctx.aliases)
    out = {}
    for r in checkpoint_rows(whole_answers(ctx), ["source_alias", "group", "topic", "partition",
                                                  "checkpoint_timestamp"]):
        if r["source_alias"] in aliases and ctx.selection.selects(r["group"]):
            ts = r.get("checkpoint_timestamp")
            if ts is not None and ts.tzinfo is None:
                ts = ts.replace(tzinfo=timezone.utc)  # Spark writes UTC instants
            out[(r["source_alias"], r["group"], r["topic"], int(r["partition"]))] = None if ts is None \
                else ts.timestamp()
    return out
