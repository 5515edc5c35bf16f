"""The end-to-end test's cluster policy (issue 34): Airflow imports ``airflow_local_settings`` from sys.path in every
process (this folder is on the stack's PYTHONPATH: tests/e2e/test_ui.py), and ``task_policy`` runs on every task at
parse time. With ``MM2_FAILOVER_TEST_ALTERNATE_QUEUES`` set, consecutive tasks of ``mm2_failover`` go to the two
Celery workers' own queues in turn, so a run's artifacts must travel between hosts through the object store; the
apply task goes to a queue both consume: the test SIGKILLs the worker running it and its retry must run on the other.
Nothing in the project depends on this file: it is the deployment's choice, made here by the test."""

from __future__ import annotations

import os

QUEUES = {
    "preflight_audit": "worker-a",
    "verify_producers_drained": "worker-b",
    "capture_end_offsets": "worker-a",
    "compute_latest_checkpoints": "worker-b",
    "check_groups_empty": "worker-a",
    "build_plan": "worker-b",
    "approve_plan": "worker-a",
    "apply_group_offsets": "either",
    "verify_group_offsets": "worker-b",
    "announcement_parts": "worker-a",
    "announce_all_moved_groups": "worker-b",
    # announce_moved_groups (mapped): the default queue, which both workers consume
}


def task_policy(task) -> None:
    if (
        os.environ.get("MM2_FAILOVER_TEST_ALTERNATE_QUEUES")
        and task.dag_id == "mm2_failover"
        and task.task_id in QUEUES
    ):
        task.queue = QUEUES[task.task_id]
