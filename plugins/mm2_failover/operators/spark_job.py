"""The latest-checkpoints job's two routes, in one place for the operators that run it (``compute_latest_checkpoints``
and ``refresh_latest_state``).

A thin subclass of the Spark provider's ``SparkSubmitOperator``: when the Spark Connect connection (conn type
``spark_connect``, ``spark_connect_default``) is defined and its server answers, the job runs on that warm server
with this task's process as its client; otherwise it is submitted through ``spark_default`` (spark-submit). Either
way the same arguments, the Maven-fetched Kafka source jars and the private options file (:mod:`mm2_failover.adapters.spark`);
the route is logged and the job's summary records it.
"""

from __future__ import annotations

import re

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException

from mm2_failover.adapters import config
from mm2_failover.adapters.config import SPARK_CONN_ID, SPARK_CONNECT_CONN_ID, SPARK_JOB


class LatestCheckpointsJobOperator(SparkSubmitOperator):
    """
    :param conn_id: Spark connection (``spark_default``): spark-submit, when there is no warm server
    :param connect_conn_id: Spark Connect connection (conn type ``spark_connect``; ``spark_connect_default``): when
        it is defined and its server answers, the job runs on that warm server, in this task's process (a client)
    """

    template_fields = (*SparkSubmitOperator.template_fields, "connect_conn_id")

    def __init__(self, *, conn_id: str = SPARK_CONN_ID, connect_conn_id: str = SPARK_CONNECT_CONN_ID, **kwargs):
        super().__init__(application=str(SPARK_JOB), conn_id=conn_id, **kwargs)
        self.spark_conn_id = conn_id
        self.connect_conn_id = connect_conn_id

    def choose_route(self) -> str | None:
        """The warm server's URL, or None for spark-submit (whose connection is then checked)."""
        from mm2_failover.adapters.spark import check_spark_connection, spark_connect_url  # lazy: not at DAG parse

        remote, why = spark_connect_url(self.connect_conn_id)
        self.log.info("latest-checkpoints job route: %s", why)
        if remote is None:
            check_spark_connection(self.spark_conn_id)
        return remote

    def run_job(self, context, sub, remote: str | None) -> int:
        """Run the job of submission ``sub`` (:class:`mm2_failover.adapters.spark.JobSubmission`) on ``remote`` or through
        spark-submit (the provider's hook); its exit code - what the stage classifies
        (:func:`mm2_failover.stages.compute_checkpoints.compute`). A failure with no exit code (spark-submit not started)
        propagates."""

        # the same arguments on every try of the run (the options file's path included)
        self.application_args = sub.args
        self.jars = ",".join(config.spark_jars())
        self.conf = {**sub.conf, **(self.conf or {})}
        self.env_vars = {**(self.env_vars or {}), **sub.env}
        if remote is None:
            try:
                super().execute(context)
            except AirflowException as e:  # the provider's "Cannot execute: ... Error code is: N."
                m = re.search(r"Error code is: (\d+)\.", str(e))
                if m is None:
                    raise
                return int(m.group(1))
            return 0
        from mm2_failover.jobs.checkpoint_pass.driver import main as job_main  # lazy: not at DAG parse

        return job_main(sub.args, remote=remote)  # this process is the server's client
