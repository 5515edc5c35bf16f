"""mm2_failover_rollback: undo a failover run - restore the target's commits saved in its backup.

Give ``failover_run_id`` (the mm2_failover run) or ``backup_path``. Offsets that existed before the run are
committed again; offsets that did not exist are deleted - only on the partitions the failover wrote. The same
empty-group gate as the failover applies; a rollback refuses (listing them) partitions committed on the target
since the failover unless ``force``, and a backup of another cluster. It holds the target's writer lock.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, task

from mm2_failover.dag_defaults import apply_task_defaults, run_deadline
from mm2_failover.params import rollback_params
from mm2_failover.rules.run_params import text_template
from mm2_failover.sensors.groups_empty import GroupsEmptySensor

with DAG(
    dag_id="mm2_failover_rollback",
    deadline=run_deadline("mm2_failover_rollback"),  # on-call hears of a run that has not ended in time
    schedule=None,
    is_paused_upon_creation=False,  # on demand: a trigger (UI, REST API, automation) must run at once
    catchup=False,
    max_active_runs=1,
    params=rollback_params(),
    default_args={"retries": 2, "retry_delay": timedelta(seconds=15)},
    doc_md=__doc__,
    tags=["kafka", "mirrormaker2", "failover", "rollback"],
) as dag:
    empty = GroupsEmptySensor(
        task_id="check_groups_empty",
        groups_from="backup",
        poke_interval=10,
        timeout=1800,
        backup_path=text_template("backup_path"),
        failover_run_id=text_template("failover_run_id"),
        run_params={"groups_empty_timeout_seconds": "{{ params.groups_empty_timeout_seconds }}"},
    )

    @task(task_id="rollback_group_offsets")
    def rollback_group_offsets(**context):
        from mm2_failover import tasks

        return tasks.rollback_group_offsets(context)

    @task(task_id="verify_rollback")
    def verify_rollback(**context):
        from mm2_failover import tasks

        return tasks.verify_rollback(context)

    empty >> rollback_group_offsets() >> verify_rollback()

apply_task_defaults(dag)  # every task's time limit and failure notifier: mm2_failover/dag_defaults.py
