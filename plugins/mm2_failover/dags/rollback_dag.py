"""mm2_failover_rollback: undo a failover run - restore the target's commits saved in its backup.

Give ``failover_run_id`` (the mm2_failover run) or ``backup_path``. Offsets that existed before the run are
committed again; offsets that did not exist are deleted - only on the partitions the failover wrote. The same
empty-group gate as the failover applies; a rollback refuses (listing them) partitions committed on the target
since the failover unless ``force``, and a backup of another cluster. It holds the target's writer lock.
"""

from __future__ import annotations

from airflow.sdk import DAG

from mm2_failover.dag_defaults import apply_task_defaults
from mm2_failover.dags.taskflow import pipeline_dag, step
from mm2_failover.params import rollback_params
from mm2_failover.rules.run_params import text_template
from mm2_failover.sensors.groups_empty import GroupsEmptySensor


def rollback_dag(dag_id: str = "mm2_failover_rollback") -> DAG:
    """The rollback DAG (on demand)."""
    with pipeline_dag(
        dag_id, kind="mm2_failover_rollback", schedule=None, params=rollback_params(), doc=__doc__, tag="rollback"
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
        empty >> step("rollback_group_offsets") >> step("verify_rollback")

    # every task's time limit and failure notifier: mm2_failover/dag_defaults.py
    apply_task_defaults(dag, "mm2_failover_rollback")
    return dag
