"""mm2_failover: move consumer groups from a lost (or drilled) source cluster to its MirrorMaker 2 replica.

Retryable tasks (a pre-flight audit of MM2's settings first); the waits are sensors in reschedule mode; the plan waits
for a human's approval (``approve_plan``: Airflow's ApprovalOperator; off with ``require_approval=false``) and apply
writes exactly the approved plan. Connections: ``kafka_source``,
``kafka_target`` (type kafka, librdkafka settings in the extra) and ``spark_default``. Every run keeps its
artifacts (snapshot, latest checkpoints, plan JSON/CSV, backup, report) under
``$MM2_FAILOVER_ARTIFACTS/mm2_failover/<run_id>/``. See docs/runbook.md, "Failing over during an incident".
"""

from __future__ import annotations

from airflow.sdk import DAG, Asset, task

from mm2_failover.dag_defaults import apply_task_defaults
from mm2_failover.dags.taskflow import pipeline_dag, step
from mm2_failover.operators.checkpoint_job import LatestCheckpointsOperator
from mm2_failover.operators.plan_approval import PlanApprovalOperator
from mm2_failover.params import failover_params, run_params_template
from mm2_failover.rules.assets import MOVED_GROUPS, PARTS_AT_ONCE, PRIORITY_WEIGHT
from mm2_failover.sensors.groups_empty import GroupsEmptySensor
from mm2_failover.sensors.producers_drained import ProducersDrainedSensor


def failover_dag(dag_id: str = "mm2_failover") -> DAG:
    """The failover DAG. Every task that resolves the run is told that it asks before writing (``approve_plan``)."""
    params = failover_params()
    run = run_params_template(params)  # {{ params.<name> }} for each: the operators' templated run_params
    asks = {"asks_before_writing": True}
    with pipeline_dag(dag_id, kind="mm2_failover", schedule=None, params=params, doc=__doc__, tag="") as dag:
        drained = ProducersDrainedSensor(
            task_id="verify_producers_drained", run_params=run, poke_interval=10, timeout=1800, **asks
        )
        latest = LatestCheckpointsOperator(task_id="compute_latest_checkpoints", run_params=run, **asks)
        empty = GroupsEmptySensor(task_id="check_groups_empty", run_params=run, poke_interval=10, timeout=1800, **asks)
        approve = PlanApprovalOperator(task_id="approve_plan", run_params=run)
        verified = step("verify_group_offsets", **asks)
        (
            step("preflight_audit", **asks)
            >> drained
            >> step("capture_end_offsets", **asks)
            >> latest
            >> empty
            >> step("build_plan", **asks)
            >> approve
            >> step("apply_group_offsets", **asks)
            >> verified
        )

        # for the applications' own DAGs, after verify: each group's own event in parts, each a mapped task instance
        # whose outlets are its groups' Assets, added when it runs, and one event naming every moved group, a leaf of
        # its own (an outlet Airflow refuses fails only that task) (mm2_failover/rules/assets.py, rules 4-6)
        first = {"priority_weight": PRIORITY_WEIGHT, "weight_rule": "absolute"}  # ahead of the listeners' runs

        @task(task_id="announce_moved_groups", max_active_tis_per_dagrun=PARTS_AT_ONCE, **first)
        def announce_moved_groups(part: dict, **context):
            from mm2_failover import tasks  # lazy: not at DAG parse

            return tasks.announce_moved_groups(context, part)

        parts = step("announcement_parts", **asks)
        verified >> parts
        announce_moved_groups.partial(**asks).expand(part=parts)
        named = [Asset(name=MOVED_GROUPS[0], uri=MOVED_GROUPS[1])]
        parts >> step("announce_all_moved_groups", outlets=named, **first, **asks)

    # every task's time limit and failure notifier: mm2_failover/dag_defaults.py
    apply_task_defaults(dag, "mm2_failover")
    return dag
