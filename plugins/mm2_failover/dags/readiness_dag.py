"""mm2_failover_readiness: what a failover would do NOW, every 5 minutes, read-only.

Beside the archive (same interval), for every selected group and partition: the rule that would answer (exact: which
proof; the sync floor; MM2's checkpoint; none), the records it would re-read, the records MM2 has not replicated yet
(the exposure if the source were lost now, in records and seconds), the archive's age, each group's newest
checkpoint's age and the pre-flight audit's findings. Nothing is written to any cluster: the plan is built as a dry
run. Kept under ``$MM2_FAILOVER_ARTIFACTS/mm2_failover_readiness/`` (``readiness.json`` per interval, a history of
summaries); shown on the Readiness page of the report plugin (``/mm2/readiness``); sent as gauges
(``mm2_failover.readiness.*``); what got worse since the previous interval is told through the notifiers. Paused on
creation: unpause it together with mm2_sync_archive. See docs/runbook.md, "Readiness".
"""

from __future__ import annotations

from airflow.sdk import DAG, Param

from mm2_failover.dag_defaults import INTERVAL_SCHEDULE, apply_task_defaults
from mm2_failover.dags.taskflow import pipeline_dag, step
from mm2_failover.operators.checkpoint_job import LatestCheckpointsOperator
from mm2_failover.params import readiness_params, run_params_template


def readiness_dag(dag_id: str = "mm2_failover_readiness") -> DAG:
    """The readiness DAG, on the archive's interval (:data:`mm2_failover.dag_defaults.INTERVAL_SCHEDULE`)."""
    params = readiness_params()
    params["archive_stale_intervals"] = Param(
        3,
        type="integer",
        minimum=1,
        maximum=1000,
        title="Archive stale after (intervals)",
        section="Safety",
        description="Tell the notifiers when the offset-sync archive has not been written for this many archive "
        "intervals (mm2_sync_archive not succeeding).",
    )
    run = run_params_template(params)
    with pipeline_dag(
        dag_id,
        kind="mm2_failover_readiness",
        schedule=INTERVAL_SCHEDULE,
        params=params,
        doc=__doc__,
        tag="readiness",
        retries=1,
        retry_seconds=30,
    ) as dag:
        latest = LatestCheckpointsOperator(task_id="compute_latest_checkpoints", run_params=run)
        (
            step("preflight_audit")
            >> step("measure_replication_lag")
            >> step("capture_end_offsets")
            >> latest
            >> step("assess_readiness")
        )

    # every task's time limit and failure notifier: mm2_failover/dag_defaults.py
    apply_task_defaults(dag, "mm2_failover_readiness")
    return dag
