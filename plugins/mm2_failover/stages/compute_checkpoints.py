"""Stage 3, checkpoints: the latest-checkpoints Spark job run by one route for the CLI and the operator
(:func:`compute`), and its answers, read only once its summary says it finished."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timezone
from pathlib import Path

from mm2_failover.adapters import spark, store
from mm2_failover.adapters.answers import checkpoint_rows, group_names, parts_problems
from mm2_failover.adapters.runfolder import RunFolderError
from mm2_failover.rules.checkpoints import Checkpoint
from mm2_failover.rules.plan import PlanError, quarantine_refusal
from mm2_failover.stages.context import RunContext
from mm2_failover.stages.errors import ConfigurationError, JobFailed, JobUnreachable, QuarantineRefused
from mm2_failover.stages.outcomes import (
    JOB_BAD_ARGS,
    JOB_LOST_SINCE_SNAPSHOT,
    JOB_TOO_MANY_QUARANTINED,
    JOB_UNREACHABLE,
)

log = logging.getLogger(__name__)


def compute(ctx: RunContext, run_job: Callable, reuse: bool = False, said: list[str] | None = None):
    """Stage 3's one route (the CLI's ``compute_latest_checkpoints`` and the DAG's operator alike): the job of this
    run's submission (:func:`mm2_failover.adapters.spark.job_submission`) run by ``run_job(sub) -> exit code`` - the caller's
    route: a warm Spark Connect server or spark-submit - and its exit classified once, by the job's exit codes
    (:mod:`mm2_failover.stages.outcomes`): too many unusable records - or a summary that says so - is the plan's
    quarantine refusal (:class:`~mm2_failover.rules.plan.PlanError`); arguments, settings or permissions refused, a
    configuration error (no retry helps); the target unreachable, :class:`JobUnreachable`; checkpoints deleted since
    the snapshot, a refusal (a new run takes a new snapshot); anything else :class:`JobFailed`. ``reuse``: a run
    folder whose answers are whole already keeps them (the CLI continuing a run; a task's retry or clear runs the job
    again). ``said``: the job's own messages, for the error. Returns the job's summary."""
    f = ctx.folder
    if reuse and f.checkpoints_summary.exists() and f.checkpoints.exists():
        log.info("latest checkpoints already computed for this run: %s", f.checkpoints)
        return f.load_summary()
    with spark.job_submission(ctx.params, f, f.load_snapshot(), ctx.target.conf) as sub:
        rc = run_job(sub)
        if rc:
            sub.publish()  # a run folder in an object store: the quarantine's summary is read from there
    if not rc:
        return f.load_summary()
    summary = f.load_summary()
    refusal = quarantine_refusal(summary.raw if summary else None, ctx.params.max_quarantined_records)
    told = " ".join(said or []) or "its messages are in the log above"
    if refusal or rc == JOB_TOO_MANY_QUARANTINED:
        raise QuarantineRefused(
            refusal
            or f"the latest-checkpoints job found more unusable records than "
            f"max_quarantined_records={ctx.params.max_quarantined_records} ({told})"
        )
    if rc == JOB_LOST_SINCE_SNAPSHOT:
        raise PlanError(
            f"checkpoints were deleted from MM2's topic since the snapshot (exit code {rc}: {told}): "
            "trigger a new run, which takes a new snapshot"
        )
    raise job_error(rc, "the latest-checkpoints job", told)


def job_error(rc: int, what: str, told: str) -> Exception:
    """A Spark job's failing exit code as the error the outcome table decides (the latest-checkpoints job's and the
    state refresh's shared codes): arguments, settings or permissions refused - a configuration error; the target
    unreachable - :class:`JobUnreachable`; anything else :class:`JobFailed`."""
    if rc == JOB_BAD_ARGS:
        return ConfigurationError(
            f"{what} refused its arguments, settings or permissions (exit code {rc}: {told}): a "
            "retry would not help - fix them, then run it again"
        )
    if rc == JOB_UNREACHABLE:
        return JobUnreachable(
            f"{what} could not reach the target cluster (exit code {rc}: {told}); check its "
            "bootstrap servers and the network, then run it again"
        )
    return JobFailed(f"{what} failed with exit code {rc} ({told})")


def load_latest_checkpoints(path: Path) -> list[Checkpoint]:
    """Every answer of the Spark job (all groups: the job does not select)."""
    return [
        Checkpoint(**r)
        for r in checkpoint_rows(
            path, ["source_alias", "group", "topic", "partition", "upstream_offset", "downstream_offset", "metadata"]
        )
    ]


def whole_answers(ctx: RunContext):
    """The run's answers folder, only once the job's summary, which it writes last and atomically (and which every
    submission deletes first), says it finished (a job killed while writing may leave answers that are partial:
    never read)."""
    f = ctx.folder
    if not f.checkpoints.exists():
        raise RunFolderError(f"no latest checkpoints at {f.checkpoints}: compute_latest_checkpoints must run first")
    summary = f.load_summary()
    if summary is None:
        raise RunFolderError(
            f"the latest checkpoints at {f.checkpoints} have no summary ({f.checkpoints_summary}): "
            "the Spark job did not finish (killed or failed while writing), so they may be partial "
            "and are not read. Run compute_latest_checkpoints again (clear the task, or the CLI's "
            "checkpoints step): it rewrites them."
        )
    named = summary.raw.get("output_files")
    if named is not None:  # in an object store: the parts the summary names, and no others (answers rule 6)
        bad = parts_problems(store.listing(f.checkpoints), named)
        if bad:
            raise RunFolderError(
                f"the latest checkpoints at {store.url_of(f.checkpoints)} are not the ones their "
                f"summary names: {'; '.join(bad[:5])}. They are not read: run "
                "compute_latest_checkpoints again (clear the task, or the CLI's checkpoints step)."
            )
    return f.checkpoints


def selected_checkpoints(ctx: RunContext) -> list[Checkpoint]:
    """The latest checkpoints of the run's selected groups and aliases (from :func:`whole_answers` only)."""
    aliases = set(ctx.aliases)
    return [
        c
        for c in load_latest_checkpoints(whole_answers(ctx))
        if c.source_alias in aliases and ctx.selection.selects(c.group)
    ]


def selected_checkpoint_groups(ctx: RunContext) -> set[str]:
    """The groups of :func:`selected_checkpoints`, from the answers' two name columns, each (alias, group) once: what
    the gate needs (at 10k groups x 10 partitions, 0.05 s against 0.7 s for the 100k checkpoints)."""
    aliases = set(ctx.aliases)
    return {g for a, g in group_names(whole_answers(ctx)) if a in aliases and ctx.selection.selects(g)}


def checkpoint_times(ctx: RunContext) -> dict[tuple[str, str, str, int], float | None]:
    """(alias, group, replica topic, partition) -> when MM2 wrote the answering checkpoint (epoch seconds; None where
    the answers do not say: an older job's, or a test's), for the selected answers (plan rule 1a)."""

    aliases = set(ctx.aliases)
    out = {}
    for r in checkpoint_rows(
        whole_answers(ctx), ["source_alias", "group", "topic", "partition", "checkpoint_timestamp"]
    ):
        if r["source_alias"] in aliases and ctx.selection.selects(r["group"]):
            ts = r.get("checkpoint_timestamp")
            if ts is not None and ts.tzinfo is None:
                ts = ts.replace(tzinfo=timezone.utc)  # Spark writes UTC instants
            out[(r["source_alias"], r["group"], r["topic"], int(r["partition"]))] = (
                None if ts is None else ts.timestamp()
            )
    return out
