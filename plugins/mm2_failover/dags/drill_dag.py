"""mm2_failover_drill: a scheduled DR drill - the failover pipeline as a DRY RUN against the configured clusters.

Production keeps running: nothing is stopped and no offsets are written (unless ``allow_drill_writes_for_prefix``
is set, and then only for groups whose id starts with it). Each run records what a real failover would do and
how ready the replica is: groups covered, partitions without checkpoints, checkpoint age, replication lag,
estimated re-read per group/partition, clamp and retention findings. Results: ``report.json``/``report.md`` and
``drill.json``/``drill.md`` under ``$MM2_FAILOVER_ARTIFACTS/mm2_failover_drill/<run_id>/``; the "mm2-failover
reports" page in the UI shows the trend across drills. Paused on creation: unpause it to start the schedule.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param

from mm2_failover.dag_defaults import apply_task_defaults
from mm2_failover.dags.taskflow import pipeline_dag, step
from mm2_failover.operators.checkpoint_job import LatestCheckpointsOperator
from mm2_failover.params import failover_params, run_params_template
from mm2_failover.sensors.groups_empty import GroupsEmptySensor


def drill_params() -> dict:
    p = failover_params(scheduled=True)
    p.pop("dry_run")  # a drill is always a dry run
    p.pop("drain_timeout_seconds")  # a drill observes the replication lag once instead of waiting for a drain
    p["source_groups_must_be_empty"] = Param(
        False,
        type="boolean",
        title="Source groups must be stopped too",
        description="Off for a drill: the consumers keep running on the source. Turn on only to rehearse the "
        "full gate.",
    )
    p["groups_empty_timeout_seconds"] = Param(
        60,
        type="integer",
        minimum=10,
        maximum=86400,
        title="Empty-group wait (s)",
        description="How long the drill waits for live consumers of the selected groups on the TARGET. On timeout "
        "the drill goes on and reports them (a real failover would wait for them).",
    )
    p["allow_drill_writes_for_prefix"] = Param(
        None,
        type=["null", "string"],
        maxLength=249,
        title="Write offsets for groups starting with (drill)",
        description="Empty (default): the drill writes nothing. A non-empty prefix, e.g. 'drill-': the drill also "
        "commits the planned offsets on the target for groups whose id starts with it (test groups "
        "that exercise the write path), after a backup. Never for any other group.",
    )
    return p


def drill_dag(dag_id: str = "mm2_failover_drill", schedule: str | None = "0 3 1 * *") -> DAG:
    """The drill DAG; ``schedule``: 03:00 on the 1st of every month unless given."""
    params = drill_params()
    run = run_params_template(params)
    with pipeline_dag(
        dag_id, kind="mm2_failover_drill", schedule=schedule, params=params, doc=__doc__, tag="drill"
    ) as dag:
        latest = LatestCheckpointsOperator(task_id="compute_latest_checkpoints", run_params=run)
        # soft_fail: live consumers on the target are a finding of the drill, not a reason to stop it
        empty = GroupsEmptySensor(
            task_id="check_groups_empty", run_params=run, poke_interval=10, timeout=60, soft_fail=True
        )
        (
            step("preflight_audit")
            >> step("measure_replication_lag")
            >> step("capture_end_offsets")
            >> latest
            >> empty
            >> step("plan_group_offsets", trigger_rule="none_failed")
            >> step("drill_report", trigger_rule="none_failed")
        )

    # every task's time limit and failure notifier: mm2_failover/dag_defaults.py
    apply_task_defaults(dag, "mm2_failover_drill")
    return dag
