"""The bodies of the DAGs' TaskFlow tasks: resolve the run once (:class:`~mm2_failover.stages.context.RunContext`), call the
stages in :mod:`mm2_failover.stages`, and turn their outcomes into Airflow's (a deterministic refusal fails the task
without retries). Nothing here decides anything a step does not.
"""

from __future__ import annotations

import functools
import logging

from airflow.configuration import conf as airflow_conf
from airflow.sdk import Asset
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from mm2_failover import metrics, notifications
from mm2_failover.adapters.config import TARGET_CONN_ID, run_dir, setting
from mm2_failover.adapters.runfolder import (
    ANNOUNCEMENTS,
    APPLY,
    ROLLBACK,
    announcement_part_name,
    head_text,
    load_backup,
)
from mm2_failover.airflow_errors import by_outcome
from mm2_failover.metrics import emit_metrics
from mm2_failover.notifications import base_url, tell
from mm2_failover.rules import assets, notify
from mm2_failover.rules.notify import rollback_message, verified_message
from mm2_failover.rules.words import listed
from mm2_failover.stages import archive as archive_stage
from mm2_failover.stages import drill_report as drill_report_stage
from mm2_failover.stages import preflight as preflight_stage
from mm2_failover.stages import roll_back as rollback_stage
from mm2_failover.stages.apply import backup_and_apply, writer_lock
from mm2_failover.stages.approve_plan import approved_plan, current_hash, plan_and_preview
from mm2_failover.stages.assess_readiness import assess_readiness as assess
from mm2_failover.stages.build_plan import make_plan, plan_record
from mm2_failover.stages.context import RunContext
from mm2_failover.stages.drill_report import drill_lag, drill_plan
from mm2_failover.stages.roll_back import backup_path_of, rollback
from mm2_failover.stages.snapshot import capture_snapshot
from mm2_failover.stages.verify import verify_run

log = logging.getLogger(__name__)


def _ctx(context, **kw):
    """The run, bound; told whether it asks before writing by the DAG (the TaskFlow task's ``asks_before_writing``
    argument, which Airflow passes in the context)."""
    return RunContext.from_airflow(context, asks_before_writing=bool(context.get("asks_before_writing")), **kw).bind()


def _outcomes(task):
    """A task body whose stages' errors mean what the one table says (:mod:`mm2_failover.stages.outcomes`): a
    refusal, a bad parameter or setting, a required source that never answered fail the task at once (a retry would
    not help); everything else propagates, for Airflow's retries (another writer's lock, an unreachable cluster)."""

    @functools.wraps(task)
    def run(context):
        return by_outcome(lambda: task(context))

    return run


@_outcomes
def capture_end_offsets(context) -> dict:
    ctx = _ctx(context)
    snap = capture_snapshot(ctx)
    return {
        "snapshot": str(ctx.folder.snapshot),
        "captured_at": snap.captured_at,
        "disaster_aliases": snap.disaster_aliases,
    }


@_outcomes
def build_plan(context) -> dict:
    """The plan, once per run, and the report of it before anything is written (a dry run's, or the approver's)."""
    ctx = _ctx(context)
    plan, rep = plan_and_preview(ctx)
    if rep is not None:
        log.info("report of the plan before any write: %s (%s)", ctx.folder.report_md, rep.outcome)
    return {
        "plan": str(ctx.folder.plan_json),
        "plan_csv": str(ctx.folder.plan_csv),
        "plan_hash": current_hash(ctx),
        "counts": plan.counts(),
        "rules": plan.rules(),
    }


@_outcomes
def apply_group_offsets(context) -> dict:
    ctx = _ctx(context)
    record = plan_record(ctx)  # one read of plan.json: what is checked is what is written
    plan = record.plan
    counts = plan.counts()
    if ctx.params.dry_run:
        raise AirflowSkipException(
            f"dry run: plan written to {ctx.folder.plan_json} and {ctx.folder.plan_csv} "
            f"({counts}); nothing was written to the target."
        )
    decision = approved_plan(ctx, record)  # exactly the approved plan, or nothing (approval rule 5)
    log.info("writing the plan: %s", decision.describe())
    res = backup_and_apply(ctx, plan)  # another writer's lock: retried, the other writer may be done by then
    if res.refused:
        raise RuntimeError(
            f"{len(res.refused)} group(s) were NOT moved: "
            + "; ".join(f"{g}: {why}" for g, why in sorted(res.refused.items()))
            + ". All other groups were moved. Stop the consumers of these groups on the target; a retry of this "
            "task moves only what is still missing."
        )
    return {"plan": str(ctx.folder.plan_json), "counts": counts, **res.as_dict()}


@_outcomes
def verify_group_offsets(context) -> dict:
    ctx = _ctx(context)
    plan = make_plan(ctx)
    applied = ctx.folder.load(APPLY, {})
    rep = verify_run(ctx, plan, refused=applied.get("refused"))
    published = rep.view()  # read only: the metrics and the Asset events (Report.view)
    emit_metrics(published)
    t = rep.totals
    log.info("report: %s (%s)\n%s", ctx.folder.report_md, ctx.folder.report_json, head_text(ctx.folder.report_md))
    if rep.mismatches:
        raise AirflowFailException(
            f"{t['mismatches']} partition(s) do not hold the planned offset after apply: "
            + listed(
                (
                    f"{m['group']} {m['topic']}[{m['partition']}] planned {m['planned']} got {m['committed']}"
                    for m in rep.mismatches
                ),
                sep="; ",
            )
            + f". See {ctx.folder.report_md}. A consumer may have committed since; check the group before re-running."
        )
    if rep.outcome == "succeeded":  # notify rule 7: on-call hears that it is done, and how it went
        tell(verified_message(ctx.dag_id, ctx.run_id, ctx.folder.dir.name, t, base_url()))
    moved = len(assets.events(published, target_cluster_id=ctx.target.cluster_id(), target_conn_id=TARGET_CONN_ID))
    return {"report": str(ctx.folder.report_json), "outcome": rep.outcome, "totals": t, "asset_events": moved}


def announcement_parts(context) -> list[dict]:
    """The Asset events of the verified report's moved groups (:mod:`mm2_failover.rules.assets`), written once to
    ``announcements.json``, and the parts ``announce_moved_groups`` is mapped over (rule 4). Skipped when no group
    moved: no event then, not even the one naming them all (rule 6)."""

    ctx = _ctx(context)
    rep = ctx.folder.load_report()
    if rep is None:
        raise AirflowFailException(f"no verified report in {ctx.folder.dir}: clear verify_group_offsets")
    events = assets.events(rep.view(), target_cluster_id=ctx.target.cluster_id(), target_conn_id=TARGET_CONN_ID)
    ctx.folder.save(ANNOUNCEMENTS, [list(e) for e in events])
    if not events:
        raise AirflowSkipException("no group moved: nothing to announce (assets.py rule 2)")
    try:
        size = assets.part_size(metadata_db_url(), setting("asset_events_per_part"))
    except ValueError as e:
        raise AirflowFailException(str(e)) from None  # a setting to fix: a retry would not help
    out = assets.parts(len(events), size)
    for arg in out:  # each part reads its own events: all 10k decoded per part took 0.33 s of each part (py-spy)
        ctx.folder.save(announcement_part_name(arg), [list(e) for e in assets.part(events, arg)])
    log.info(
        "%d moved group(s): each group's own event (for the groups a DAG listens to) in %d part(s) of at most %d, %d "
        "at a time, from %s",
        len(events),
        len(out),
        size,
        assets.PARTS_AT_ONCE,
        ctx.folder.dir / ANNOUNCEMENTS,
    )
    return out


def metadata_db_url() -> str | None:
    """The metadata database's SQLAlchemy URL as this worker's Airflow configuration says (``[database]
    sql_alchemy_conn``), for the size of the Asset events' parts (assets.py rule 4); None where it is not readable."""
    try:
        return airflow_conf.get("database", "sql_alchemy_conn", fallback=None)
    except Exception:  # noqa: BLE001 - a worker without it gets the smaller parts
        return None


def group_outlets(events: list[tuple[str, str, dict]]) -> tuple[list[tuple[Asset, dict]], list[tuple[str, str]]]:
    """Rule 5's outlets: ``(Asset, extra)`` of each event whose Asset Airflow accepts, and ``(group, reason)`` of each
    it would refuse (a name or URI over 1,500 characters, Airflow's own check: a Kafka group id may be longer; a NUL
    character, which Kafka allows in a group id and the metadata database refuses in the request that ends the
    task), so that one group cannot cost its part's others their events."""
    sent, refused = [], []
    for name, uri, extra in events:
        if "\x00" in name:
            refused.append((extra["group"], "the group id has a NUL character, which Airflow's database cannot store"))
            continue
        try:
            sent.append((Asset(name=name, uri=uri), extra))
        except ValueError as e:
            refused.append((extra["group"], str(e)))
    return sent, refused


def announce_moved_groups(context, arg: dict) -> int:
    """The Asset event of each verified moved group of part ``arg`` (rule 4), from the run folder's
    ``announcements.json``: each group's Asset added to the task's outlets, its extra on the outlet's event. Airflow
    stores the events of the Assets a DAG declares, and only those (rule 5)."""

    ctx = _ctx(context)
    own = ctx.folder.load(announcement_part_name(arg), None)
    if own is None:  # a run folder older than the part files
        own = assets.part(ctx.folder.load(ANNOUNCEMENTS), arg)
    sent, refused = group_outlets([tuple(e) for e in own])
    for group, why in refused:
        log.warning("no Asset event for group %r: Airflow refuses its Asset (%s)", group, why)
    context["task"].add_outlets([a for a, _ in sent])
    for asset, extra in sent:
        context["outlet_events"][asset].extra = extra
    log.info(
        "the Asset events of %d moved group(s) (part %d of %d), e.g. %s: Airflow stores those of the groups a DAG "
        "listens to (assets.py rule 5)",
        len(sent),
        arg["index"] + 1,
        arg["of"],
        sent[0][0].uri if sent else "none",
    )
    return len(sent)


def announce_all_moved_groups(context) -> int:
    """The one Asset event naming every verified moved group (rule 6), on this task's declared outlet
    (:data:`~mm2_failover.rules.assets.MOVED_GROUPS`), from the run folder's ``announcements.json``."""

    ctx = _ctx(context)
    summary = assets.summary([tuple(e) for e in ctx.folder.load(ANNOUNCEMENTS)])
    if summary is None:  # announcement_parts skips first, unless its announcements.json was replaced since
        raise AirflowSkipException("no group moved: nothing to announce (assets.py rule 2)")
    name, uri = assets.MOVED_GROUPS
    context["outlet_events"][Asset(name=name, uri=uri)].extra = summary
    log.info("one Asset event on %s naming the %d moved group(s)", uri, summary["moved_groups"])
    return summary["moved_groups"]


@_outcomes
def preflight_audit(context) -> list[dict]:
    """The pre-flight audit: warnings only (logged, in audit.json and the report); an unreadable mm2_config fails."""
    return preflight_stage.preflight_audit(_ctx(context)).as_dict()["findings"]


@_outcomes
def archive_offset_syncs(context) -> dict:
    """The archive DAG's task: no run folder (it runs every few minutes); the result is the task's XCom."""
    return archive_stage.archive_offset_syncs(RunContext.from_airflow(context))


# ------------------------------------------------------------------------------------------ rollback


@_outcomes
def rollback_group_offsets(context) -> dict:
    p = dict(context["params"])
    ctx = RunContext.from_airflow(context)
    path = backup_path_of(p.get("backup_path"), p.get("failover_run_id"))
    backup = load_backup(path)
    log.info("restoring %d group(s) to the state saved at %s (%s)", len(backup.groups), backup.taken_at, path)
    with writer_lock(ctx, "rollback", float(p.get("lock_wait_seconds") or 120)) as held:
        res = rollback(
            ctx.target,
            backup,
            int(p.get("apply_concurrency") or 32),
            force=bool(p.get("force")),
            backup_path=str(path),
            held=held,
        )
    ctx.folder.save(ROLLBACK, {"backup": str(path), **res.as_dict()})
    if res.refused:
        raise RuntimeError(
            f"{len(res.refused)} group(s) were NOT rolled back: "
            + "; ".join(f"{g}: {w}" for g, w in sorted(res.refused.items()))
            + ". Stop their consumers on the target and retry this task (it resumes from its journal)."
        )
    return {"backup": str(path), **res.as_dict()}


@_outcomes
def verify_rollback(context) -> dict:
    p = dict(context["params"])
    path = rollback_stage.backup_path_of(p.get("backup_path"), p.get("failover_run_id"))
    backup = load_backup(path)
    left = rollback_stage.verify_rollback(RunContext.from_airflow(context).target, backup)
    if left:
        raise AirflowFailException("rollback incomplete: " + "; ".join(left))
    log.info("every group holds exactly the commits saved in %s", path)
    ti = context["ti"]
    tell(
        rollback_message(
            ti.dag_id, ti.run_id, run_dir(ti.dag_id, ti.run_id).name, str(path), len(backup.groups), base_url()
        )
    )
    return {"backup": str(path), "verified": True}


# ------------------------------------------------------------------------------------------ readiness


@_outcomes
def assess_readiness(context) -> dict:
    """What a failover would do now (:mod:`mm2_failover.rules.readiness`), kept for the Readiness page, sent as gauges,
    and what got worse since the previous interval told through the notifiers (the task succeeds: it measured)."""
    from mm2_failover.dag_defaults import INTERVAL_SECONDS  # lazy: dag_defaults reads the environment at import

    ctx = _ctx(context)
    stale = int(dict(context["params"]).get("archive_stale_intervals") or 3)
    r, worse = assess(ctx, interval_seconds=INTERVAL_SECONDS, archive_stale_intervals=stale)
    metrics.emit_readiness_metrics(r.summary, ctx.dag_id)
    told = 0
    if worse:
        for d in worse:
            log.warning("readiness degraded (%s): %s", d.what, d.text)
        told = notifications.deliver(
            notify.readiness_message(ctx.dag_id, ctx.run_id, [d.text for d in worse], base_url()), context
        )
    return {
        "readiness": str(ctx.folder.readiness),
        "summary": r.summary,
        "degraded": [d.what for d in worse],
        "notified": told,
    }


# ------------------------------------------------------------------------------------------ DR drill


@_outcomes
def measure_replication_lag(context) -> dict:
    return drill_lag(_ctx(context))


@_outcomes
def plan_group_offsets(context) -> dict:
    return drill_plan(_ctx(context), dict(context["params"]).get("allow_drill_writes_for_prefix"))


@_outcomes
def drill_report(context) -> dict:
    ctx = _ctx(context)
    d = drill_report_stage.drill_report(ctx)
    metrics.emit_drill_metrics(d.as_dict())
    return {"drill": str(ctx.folder.drill_json), "totals": d.totals, "findings": d.findings}
