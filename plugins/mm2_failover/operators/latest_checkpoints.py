"""``compute_latest_checkpoints``: submit the latest-checkpoints Spark job through ``spark_default``.

A thin subclass of the Spark provider's ``SparkSubmitOperator``: at run time (never at parse time) it reads the
run's snapshot for the offsets to read between, ships Spark's Kafka source as the Maven-fetched jars
(``spark.jars``, nothing resolved at run time), points executors at this Python, and hands the target's Kafka client
settings to the job in a private file (never on the command line or in the environment: see
:mod:`mm2_failover.spark`), deleted when the job ends.
"""

from __future__ import annotations

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from mm2_failover.config import SPARK_CONN_ID, SPARK_CONNECT_CONN_ID, SPARK_JOB, TARGET_CONN_ID


class LatestCheckpointsOperator(SparkSubmitOperator):
    """
    :param run_params: the run's parameters (templated; the DAGs pass ``{{ params.<name> }}`` for each)
    :param target_conn_id: Kafka connection of the target cluster (templated)
    :param conn_id: Spark connection (``spark_default``): spark-submit, when there is no warm server
    :param connect_conn_id: Spark Connect connection (conn type ``spark_connect``; ``spark_connect_default``): when
        it is defined and its server answers, the job runs on that warm server, in this task's process (a client)
    """

    ui_color = "#fff3d6"
    template_fields = (*SparkSubmitOperator.template_fields, "run_params", "target_conn_id", "connect_conn_id")

    def __init__(self, *, run_params: dict | None = None, target_conn_id: str = TARGET_CONN_ID,
                 conn_id: str = SPARK_CONN_ID, connect_conn_id: str = SPARK_CONNECT_CONN_ID, **kwargs):
        kwargs.setdefault("name", "mm2-failover-latest-checkpoints")
        kwargs.setdefault("retries", 2)
        super().__init__(application=str(SPARK_JOB), conn_id=conn_id, **kwargs)
        self.run_params = run_params or {}
        self.target_conn_id = target_conn_id
        self.spark_conn_id = conn_id
        self.connect_conn_id = connect_conn_id

    def execute(self, context):
        from airflow.sdk.exceptions import AirflowFailException

        from mm2_failover import config
        from mm2_failover.run import RunContext
        from mm2_failover.plan import quarantine_refusal
        from mm2_failover.report import state_lines
        from mm2_failover.spark import check_spark_connection, job_submission, spark_connect_url

        remote, why = spark_connect_url(self.connect_conn_id)
        self.log.info("latest-checkpoints job route: %s", why)
        if remote is None:
            check_spark_connection(self.spark_conn_id)
        ctx = RunContext.from_airflow(context, target_conn_id=self.target_conn_id, params=self.run_params)
        f = ctx.folder
        try:
            snap = f.load_snapshot()
        except ValueError as e:
            raise AirflowFailException(str(e)) from None
        f.checkpoints_summary.unlink(missing_ok=True)
        with job_submission(ctx.params, f, snap, ctx.target.conf) as sub:
            # the same arguments on every try of the run (the options file's path included)
            self.application_args = sub.args
            self.jars = ",".join(config.spark_jars())
            self.conf = {**sub.conf, **(self.conf or {})}
            self.env_vars = {**(self.env_vars or {}), **sub.env}
            try:
                if remote is None:
                    super().execute(context)
                else:
                    from mm2_failover.jobs.latest_checkpoints import main as job_main

                    rc = job_main(sub.args, remote=remote)  # this process is the server's client
                    if rc:
                        raise RuntimeError(f"the latest-checkpoints job failed on Spark Connect with exit code {rc} "
                                           "(see the log above)")
            except Exception as e:
                summary = f.load_summary()
                msg = quarantine_refusal(summary.raw if summary else None, ctx.params.max_quarantined_records)
                if msg:
                    raise AirflowFailException(msg) from e  # deterministic: a retry would not help
                raise
        summary = f.load_summary()
        self.log.info("latest checkpoints (%s): %d record(s) read, %d checkpoint(s) for %d group(s), "
                      "%d tombstone(s), %d quarantined %s -> %s", (summary.raw.get("spark") or {}).get("route"),
                      summary["records_read"], summary["checkpoints"], summary["groups"], summary["tombstones"], summary["quarantined"], summary["quarantined_by_reason"], f.checkpoints)
        for line in state_lines(summary.raw):
            self.log.info("%s", line)
        return summary.raw
