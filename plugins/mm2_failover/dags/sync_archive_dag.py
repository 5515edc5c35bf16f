"""mm2_sync_archive: keep MirrorMaker 2's offset syncs on the target side, every 5 minutes.

MM2's offset-sync topic is compacted (the history exact translation needs survives only until its segments roll)
and by default lives on the SOURCE cluster, the one a disaster takes away. This DAG appends every new sync record (and
every new checkpoint record, read from the target) to the archive, with the groups' source commits as it read them
(plan rule 1a: with the source lost, they place the groups MM2 did not checkpoint again after they moved)
(``$MM2_FAILOVER_ARCHIVE``, default ``$MM2_FAILOVER_ARTIFACTS/archive``; a shared filesystem), which the failover reads
when the source is gone. A retry or a crashed run never duplicates or skips a record; a recreated topic or records
gone before they were archived are said in the log and the archive's manifest. Beside it, ``refresh_latest_state``
folds what MM2 checkpointed since the last run into the latest-checkpoint state (``<archive>/latest-state``), so that
a failover's Spark job reads only the tail. Paused on creation (like the drill; the on-demand DAGs are not): unpause
it together with MM2. See docs/architecture.md, "Exact failover".
"""

from __future__ import annotations

from airflow.sdk import DAG

from mm2_failover.dag_defaults import INTERVAL_SCHEDULE, apply_task_defaults
from mm2_failover.dags.taskflow import pipeline_dag, step
from mm2_failover.operators.latest_state import LatestStateRefreshOperator
from mm2_failover.params import archive_params, run_params_template


def sync_archive_dag(dag_id: str = "mm2_sync_archive") -> DAG:
    """The archive DAG, every 5 minutes (:data:`mm2_failover.dag_defaults.INTERVAL_SCHEDULE`)."""
    params = archive_params()
    with pipeline_dag(
        dag_id,
        kind="mm2_sync_archive",
        schedule=INTERVAL_SCHEDULE,
        params=params,
        doc=__doc__,
        tag="archive",
        retry_seconds=30,
    ) as dag:
        step("archive_offset_syncs")
        # independent of the archive (the checkpoints live on the target, the syncs by default on the source)
        LatestStateRefreshOperator(task_id="refresh_latest_state", run_params=run_params_template(params))

    # every task's time limit and failure notifier: mm2_failover/dag_defaults.py
    apply_task_defaults(dag, "mm2_sync_archive")
    return dag
