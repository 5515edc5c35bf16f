"""mm2_failover: move consumer groups from a lost (or drilled) source cluster to its MirrorMaker 2 replica.

Retryable tasks (a pre-flight audit of MM2's settings first); the waits are sensors in reschedule mode; the plan waits
for a human's approval (``approve_plan``: Airflow's ApprovalOperator; off with ``require_approval=false``) and apply
writes exactly the approved plan. Connections: ``kafka_source``,
``kafka_target`` (type kafka, librdkafka settings in the extra) and ``spark_default``. Every run keeps its
artifacts (snapshot, latest checkpoints, plan JSON/CSV, backup, report) under
``$MM2_FAILOVER_ARTIFACTS/mm2_failover/<run_id>/``. See docs/runbook.md, "Failing over during an incident".
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, AssetAlias, task

from mm2_failover.dag_defaults import apply_task_defaults, run_deadline
from mm2_failover.operators.checkpoint_job import LatestCheckpointsOperator
from mm2_failover.operators.plan_approval import PlanApprovalOperator
from mm2_failover.params import failover_params, run_params_template
from mm2_failover.rules.assets import ALIAS as MOVED_GROUPS
from mm2_failover.rules.assets import PARTS_AT_ONCE
from mm2_failover.sensors.groups_empty import GroupsEmptySensor
from mm2_failover.sensors.producers_drained import ProducersDrainedSensor

PARAMS = failover_params()
RUN = run_params_template(PARAMS)  # {{ params.<name> }} for each: the operators' templated run_params

with DAG(
    dag_id="mm2_failover",
    deadline=run_deadline("mm2_failover"),  # on-call hears of a run that has not ended in time
    schedule=None,
    is_paused_upon_creation=False,  # on demand: a trigger (UI, REST API, automation) must run at once
    catchup=False,
    max_active_runs=1,
    params=PARAMS,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=15)},
    doc_md=__doc__,
    tags=["kafka", "mirrormaker2", "failover"],
) as dag:

    @task(task_id="preflight_audit")
    def preflight_audit(**context):
        from mm2_failover import tasks

        return tasks.preflight_audit(context)

    drained = ProducersDrainedSensor(task_id="verify_producers_drained", run_params=RUN, poke_interval=10, timeout=1800)

    @task(task_id="capture_end_offsets")
    def capture_end_offsets(**context):
        from mm2_failover import tasks

        return tasks.capture_end_offsets(context)

    latest = LatestCheckpointsOperator(task_id="compute_latest_checkpoints", run_params=RUN)
    empty = GroupsEmptySensor(task_id="check_groups_empty", run_params=RUN, poke_interval=10, timeout=1800)

    @task(task_id="build_plan")
    def build_plan(**context):
        from mm2_failover import tasks

        return tasks.build_plan(context)

    approve = PlanApprovalOperator(task_id="approve_plan", run_params=RUN)

    @task(task_id="apply_group_offsets")
    def apply_group_offsets(**context):
        from mm2_failover import tasks

        return tasks.apply_group_offsets(context)

    @task(task_id="verify_group_offsets")
    def verify_group_offsets(**context):
        from mm2_failover import tasks

        return tasks.verify_group_offsets(context)

    # one Asset event per verified moved group, for the applications' own DAGs, after verify and in parts of at most
    # assets.PART_SIZE (100) groups, each part a mapped task instance, one at a time (mm2_failover/rules/assets.py, rule 4)
    @task(task_id="announcement_parts")
    def announcement_parts(**context):
        from mm2_failover import tasks

        return tasks.announcement_parts(context)

    @task(task_id="announce_moved_groups", outlets=[AssetAlias(MOVED_GROUPS)], max_active_tis_per_dagrun=PARTS_AT_ONCE)
    def announce_moved_groups(part: dict, **context):
        from mm2_failover import tasks

        return tasks.announce_moved_groups(context, part)

    verified = verify_group_offsets()
    (
        preflight_audit()
        >> drained
        >> capture_end_offsets()
        >> latest
        >> empty
        >> build_plan()
        >> approve
        >> apply_group_offsets()
        >> verified
    )
    parts = announcement_parts()
    verified >> parts
    announce_moved_groups.expand(part=parts)

apply_task_defaults(dag)  # every task's time limit and failure notifier: mm2_failover/dag_defaults.py
