"""``refresh_latest_state``: keep the latest-checkpoint state up to date (the ``mm2_sync_archive`` DAG).

A thin subclass of the Spark provider's ``SparkSubmitOperator``, like :mod:`mm2_failover.operators.latest_checkpoints`:
at run time it names every alias's checkpoints topic and submits the latest-checkpoints job in refresh mode
(``--refresh-state``): it reads only what MM2 wrote since the newest state version and publishes the next one under
``<archive>/latest-state`` (:mod:`mm2_failover.state`), so that a failover reads only the tail. Credentials go into a
private file, never on the command line (:mod:`mm2_failover.spark`).
"""

from __future__ import annotations

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from mm2_failover.config import SPARK_CONN_ID, SPARK_JOB, TARGET_CONN_ID


class LatestStateRefreshOperator(SparkSubmitOperator):
    """
    :param run_params: the parameters naming the aliases and their MM2 topics (templated)
    :param target_conn_id: Kafka connection of the target cluster (templated)
    :param conn_id: Spark connection (``spark_default``)
    """

    ui_color = "#e8f3ff"
    template_fields = (*SparkSubmitOperator.template_fields, "run_params", "target_conn_id")

    def __init__(self, *, run_params: dict | None = None, target_conn_id: str = TARGET_CONN_ID,
                 conn_id: str = SPARK_CONN_ID, **kwargs):
        kwargs.setdefault("name", "mm2-failover-refresh-latest-state")
        super().__init__(application=str(SPARK_JOB), conn_id=conn_id, **kwargs)
        self.run_params = run_params or {}
        self.target_conn_id = target_conn_id
        self.spark_conn_id = conn_id

    def execute(self, context):
        import json

        from mm2_failover import config
        from mm2_failover.run import RunContext
        from mm2_failover.spark import check_spark_connection, refresh_submission

        check_spark_connection(self.spark_conn_id)
        ctx = RunContext.from_airflow(context, target_conn_id=self.target_conn_id, params=self.run_params)
        topics = {a: ctx.policies[a].checkpoints_topic for a in ctx.aliases}
        with refresh_submission(topics, ctx.target.conf) as sub:
            self.application_args = sub.args
            self.jars = ",".join(config.spark_jars())
            self.conf = {**sub.conf, **(self.conf or {})}
            self.env_vars = {**(self.env_vars or {}), **sub.env}
            super().execute(context)
        summary = json.loads((config.state_root() / "last-refresh.json").read_text())
        self.log.info("latest-checkpoint state %s: %s record(s) covered, %s key(s), a tail of %s offset(s) read "
                      "in %.1f s (%s)", summary.get("state_version"), summary.get("records_read"),
                      summary.get("keys"), summary.get("tail_offsets"), summary.get("seconds") or 0,
                      summary.get("state", {}).get("aliases"))
        return summary
