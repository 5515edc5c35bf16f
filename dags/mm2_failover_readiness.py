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

from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG, Param, task

from mm2_failover.dag_defaults import INTERVAL_SCHEDULE, apply_task_defaults, run_deadline
from mm2_failover.operators.checkpoint_job import LatestCheckpointsOperator
from mm2_failover.params import readiness_params, run_params_template

PARAMS = readiness_params()
PARAMS["archive_stale_intervals"] = Param(
    3,
    type="integer",
    minimum=1,
    maximum=1000,
    title="Archive stale after (intervals)",
    section="Safety",
    description="Tell the notifiers when the offset-sync archive has not been written for this many archive "
    "intervals (mm2_sync_archive not succeeding).",
)
RUN = run_params_template(PARAMS)

with DAG(
    dag_id="mm2_failover_readiness",
    deadline=run_deadline("mm2_failover_readiness"),  # on-call hears of a run that has not ended in time
    schedule=INTERVAL_SCHEDULE,
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    is_paused_upon_creation=True,  # unpause it together with mm2_sync_archive (docs/runbook.md, "Readiness")
    max_active_runs=1,
    params=PARAMS,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=30)},
    doc_md=__doc__,
    tags=["kafka", "mirrormaker2", "failover", "readiness"],
) as dag:

    @task(task_id="preflight_audit")
    def preflight_audit(**context):
        from mm2_failover import tasks

        return tasks.preflight_audit(context)

    @task(task_id="measure_replication_lag")
    def measure_replication_lag(**context):
        from mm2_failover import tasks

        return tasks.measure_replication_lag(context)

    @task(task_id="capture_end_offsets")
    def capture_end_offsets(**context):
        from mm2_failover import tasks

        return tasks.capture_end_offsets(context)

    latest = LatestCheckpointsOperator(task_id="compute_latest_checkpoints", run_params=RUN)

    @task(task_id="assess_readiness")
    def assess_readiness(**context):
        from mm2_failover import tasks

        return tasks.assess_readiness(context)

    preflight_audit() >> measure_replication_lag() >> capture_end_offsets() >> latest >> assess_readiness()

apply_task_defaults(dag)  # every task's time limit and failure notifier: mm2_failover/dag_defaults.py
