"""The bodies of the DAGs' TaskFlow tasks: resolve the run (params, artifacts folder, clusters) and call
the step in :mod:`mm2_failover.steps`. Nothing here decides anything a step does not."""

from __future__ import annotations

import json
import logging

from mm2_failover import config, steps
from mm2_failover.config import RunParams

log = logging.getLogger(__name__)


def run_context(context) -> tuple[RunParams, steps.RunArtifacts, str, str]:
    dag_id, run_id = context["dag"].dag_id, context["run_id"]
    return RunParams.from_mapping(dict(context["params"])), steps.RunArtifacts(config.run_dir(dag_id, run_id)), dag_id, run_id


def _cluster(conn_id: str, role: str, timeout: float = 15.0):
    from mm2_failover.hooks.kafka_cluster import KafkaClusterHook

    return KafkaClusterHook(conn_id, role).cluster(timeout)


def capture_end_offsets(context) -> dict:
    params, art, _, _ = run_context(context)
    target = _cluster(config.TARGET_CONN_ID, "target")
    source = steps.connect_source(_cluster(config.SOURCE_CONN_ID, "source", timeout=5.0), params)
    snap = steps.capture_snapshot(target, params, art, source)
    return {"snapshot": str(art.snapshot), "captured_at": snap["captured_at"],
            "checkpoints_end_offsets": snap["checkpoints_end_offsets"]}


def apply_group_offsets(context) -> dict:
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    from mm2_failover.plan import PlanError

    params, art, _, _ = run_context(context)
    target = _cluster(config.TARGET_CONN_ID, "target")
    snapshot = json.loads(art.snapshot.read_text())
    try:
        plan = steps.make_plan(target, params, art, snapshot)
    except PlanError as e:
        raise AirflowFailException(str(e)) from None  # deterministic: a retry would not help
    counts = plan.counts()
    if params.dry_run:
        raise AirflowSkipException(
            f"dry run: plan written to {art.plan_json} and {art.plan_csv} ({counts}); nothing was written to the target.")
    steps.take_backup(target, plan, art, params.apply_concurrency)
    log.info("backup of the target's commits before this run: %s (rollback restores exactly this)", art.backup)
    res = steps.apply_plan(target, plan, params.apply_concurrency)
    steps.write_json(art.apply_result, res.as_dict())
    log.info("applied: %d group(s) written, %d already as planned, %d refused", len(res.applied), len(res.unchanged),
             len(res.refused))
    if res.refused:
        raise RuntimeError(
            f"{len(res.refused)} group(s) were NOT moved: "
            + "; ".join(f"{g}: {why}" for g, why in sorted(res.refused.items()))
            + ". All other groups were moved. Stop the consumers of these groups on the target; a retry of this "
            "task moves only what is still missing.")
    return {"plan": str(art.plan_json), "counts": counts, **res.as_dict()}


def verify_group_offsets(context) -> dict:
    from airflow.sdk.exceptions import AirflowFailException

    params, art, dag_id, run_id = run_context(context)
    target = _cluster(config.TARGET_CONN_ID, "target")
    plan = steps.make_plan(target, params, art, json.loads(art.snapshot.read_text()))
    rep = steps.verify_run(target, plan, art, params, dag_id, run_id)
    from mm2_failover.metrics import emit_metrics  # issue 7: metrics (never raises)
    emit_metrics(rep)
    t = rep["totals"]
    log.info("report: %s (%s)\n%s", art.report_md, art.report_json, art.report_md.read_text())
    if rep["mismatches"]:
        raise AirflowFailException(
            f"{t['mismatches']} partition(s) do not hold the planned offset after apply: "
            + "; ".join(f"{m['group']} {m['topic']}[{m['partition']}] planned {m['planned']} got {m['committed']}"
                        for m in rep["mismatches"][:20])
            + f". See {art.report_md}. A consumer may have committed since; check the group before re-running.")
    return {"report": str(art.report_json), "outcome": rep["outcome"], "totals": t}


def rollback_backup_path(context):
    """The backup a rollback run restores: ``backup_path``, or the backup of run ``failover_run_id``."""
    from pathlib import Path

    p = dict(context["params"])
    if p.get("backup_path"):
        return Path(p["backup_path"])
    if p.get("failover_run_id"):
        return steps.RunArtifacts(config.run_dir("mm2_failover", p["failover_run_id"])).backup
    raise ValueError("give failover_run_id (the mm2_failover run to undo) or backup_path")


def rollback_group_offsets(context) -> dict:
    _, art, _, _ = run_context(context)
    path = rollback_backup_path(context)
    backup = steps.load_backup(path)
    target = _cluster(config.TARGET_CONN_ID, "target")
    log.info("restoring %d group(s) to the state saved at %s (%s)", len(backup["groups"]), backup["taken_at"], path)
    res = steps.rollback(target, backup, int(context["params"].get("apply_concurrency") or 8), art.dir)
    steps.write_json(art.dir / "rollback.json", {"backup": str(path), **res.as_dict()})
    if res.refused:
        raise RuntimeError(f"{len(res.refused)} group(s) were NOT rolled back: "
                           + "; ".join(f"{g}: {w}" for g, w in sorted(res.refused.items()))
                           + ". Stop their consumers on the target and retry this task.")
    return {"backup": str(path), **res.as_dict()}


def verify_rollback(context) -> dict:
    from airflow.sdk.exceptions import AirflowFailException

    path = rollback_backup_path(context)
    left = steps.verify_rollback(_cluster(config.TARGET_CONN_ID, "target"), steps.load_backup(path))
    if left:
        raise AirflowFailException("rollback incomplete: " + "; ".join(left))
    log.info("every group holds exactly the commits saved in %s", path)
    return {"backup": str(path), "verified": True}
