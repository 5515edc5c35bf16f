"""``compute_latest_checkpoints``: run the latest-checkpoints Spark job on the warm Spark Connect server, or through
``spark_default`` (:mod:`mm2_failover.operators.spark_job` chooses).

At run time (never at parse time) it reads the
run's snapshot for the offsets to read between, ships Spark's Kafka source as the Maven-fetched jars
(``spark.jars``, nothing resolved at run time), points executors at this Python, and hands the target's Kafka client
settings to the job in a private file (never on the command line or in the environment: see
:mod:`mm2_failover.adapters.spark`), deleted when the job ends.
"""

from __future__ import annotations

from mm2_failover.adapters.config import TARGET_CONN_ID
from mm2_failover.operators.spark_job import LatestCheckpointsJobOperator


class LatestCheckpointsOperator(LatestCheckpointsJobOperator):
    """
    :param run_params: the run's parameters (templated; the DAGs pass ``{{ params.<name> }}`` for each)
    :param target_conn_id: Kafka connection of the target cluster (templated)
    :param asks_before_writing: the run asks a human before it writes (the failover DAG says so: reachability rule 3a)
    :param conn_id: Spark connection (``spark_default``): spark-submit, when there is no warm server
    :param connect_conn_id: Spark Connect connection (conn type ``spark_connect``; ``spark_connect_default``): when
        it is defined and its server answers, the job runs on that warm server, in this task's process (a client)
    """

    ui_color = "#fff3d6"
    template_fields = (*LatestCheckpointsJobOperator.template_fields, "run_params", "target_conn_id")

    def __init__(
        self,
        *,
        run_params: dict | None = None,
        target_conn_id: str = TARGET_CONN_ID,
        asks_before_writing: bool = False,
        **kwargs,
    ):
        kwargs.setdefault("name", "mm2-failover-latest-checkpoints")
        kwargs.setdefault("retries", 2)
        super().__init__(**kwargs)
        self.run_params = run_params or {}
        self.target_conn_id = target_conn_id
        self.asks_before_writing = asks_before_writing

    def execute(self, context):
        from mm2_failover.airflow_errors import by_outcome  # lazy: not at DAG parse
        from mm2_failover.rules.report import state_lines
        from mm2_failover.stages.compute_checkpoints import compute
        from mm2_failover.stages.context import RunContext

        remote = self.choose_route()
        ctx = RunContext.from_airflow(
            context,
            target_conn_id=self.target_conn_id,
            params=self.run_params,
            asks_before_writing=self.asks_before_writing,
        )
        # stage 3's one route (the CLI's too): its errors decided by the one outcome table (fail, or retry)
        summary = by_outcome(lambda: compute(ctx, lambda sub: self.run_job(context, sub, remote)))
        self.log.info(
            "latest checkpoints (%s): %d record(s) read, %d checkpoint(s) for %d group(s), "
            "%d tombstone(s), %d quarantined %s -> %s",
            (summary.raw.get("spark") or {}).get("route"),
            summary["records_read"],
            summary["checkpoints"],
            summary["groups"],
            summary["tombstones"],
            summary["quarantined"],
            summary["quarantined_by_reason"],
            ctx.folder.checkpoints,
        )
        for line in state_lines(summary.raw):
            self.log.info("%s", line)
        return summary.raw
