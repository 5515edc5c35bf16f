"""``refresh_latest_state``: keep the latest-checkpoint state up to date (the ``mm2_sync_archive`` DAG).

Like :mod:`mm2_failover.operators.checkpoint_job`, on the warm Spark Connect server when there is one (which
keeps that server warm with the job's real plans, the Kafka source included), else through spark-submit
(:mod:`mm2_failover.operators.spark_job`). At run time it names every alias's checkpoints topic and submits the latest-checkpoints job in refresh mode
(``--refresh-state``): it reads only what MM2 wrote since the newest state version and publishes the next one under
``<archive>/latest-state`` (:mod:`mm2_failover.adapters.state`), so that a failover reads only the tail. Credentials go into a
private file, never on the command line (:mod:`mm2_failover.adapters.spark`).
"""

from __future__ import annotations

import json

from mm2_failover.adapters import config
from mm2_failover.adapters.config import TARGET_CONN_ID
from mm2_failover.operators.spark_job import LatestCheckpointsJobOperator


class LatestStateRefreshOperator(LatestCheckpointsJobOperator):
    """
    :param run_params: the parameters naming the aliases and their MM2 topics (templated)
    :param target_conn_id: Kafka connection of the target cluster (templated)
    :param conn_id: Spark connection (``spark_default``): spark-submit, when there is no warm server
    :param connect_conn_id: Spark Connect connection (``spark_connect_default``): the warm server, when it answers
    """

    ui_color = "#e8f3ff"
    template_fields = (*LatestCheckpointsJobOperator.template_fields, "run_params", "target_conn_id")

    def __init__(self, *, run_params: dict | None = None, target_conn_id: str = TARGET_CONN_ID, **kwargs):
        kwargs.setdefault("name", "mm2-failover-refresh-latest-state")
        super().__init__(**kwargs)
        self.run_params = run_params or {}
        self.target_conn_id = target_conn_id

    def execute(self, context):
        from mm2_failover.adapters.spark import push_state, refresh_submission  # lazy: not at DAG parse
        from mm2_failover.stages.context import RunContext

        remote = self.choose_route()
        ctx = RunContext.from_airflow(context, target_conn_id=self.target_conn_id, params=self.run_params)
        topics = {a: ctx.policies[a].checkpoints_topic for a in ctx.aliases}
        with refresh_submission(topics, ctx.target.conf) as sub:
            rc = self.run_job(context, sub, remote)
        if rc:  # decided by the one outcome table, as stage 3's job is
            from mm2_failover.airflow_errors import raise_for_airflow  # lazy: not at DAG parse
            from mm2_failover.stages.compute_checkpoints import job_error

            raise_for_airflow(job_error(rc, "the state refresh", "its messages are in the log above"))
        uploaded = push_state(sub)  # the archive in an object store: the new version there too
        if uploaded:
            self.log.info("latest-checkpoint state uploaded to the object store: %s", ", ".join(uploaded))
        summary = json.loads((config.state_root() / "last-refresh.json").read_text())
        self.log.info(
            "latest-checkpoint state %s (%s): %s record(s) covered, %s key(s), a tail of %s offset(s) "
            "read in %.1f s (%s)",
            summary.get("state_version"),
            (summary.get("spark") or {}).get("route"),
            summary.get("records_read"),
            summary.get("keys"),
            summary.get("tail_offsets"),
            summary.get("seconds") or 0,
            summary.get("state", {}).get("aliases"),
        )
        return summary
