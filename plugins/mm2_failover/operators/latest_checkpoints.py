"""``compute_latest_checkpoints``: submit ``spark_jobs/latest_checkpoints.py`` through ``spark_default``.

A thin subclass of the Spark provider's ``SparkSubmitOperator``: at run time (never at parse time) it reads
the run's snapshot for the end offsets to read up to, ships Spark's Kafka source as the Maven-fetched jars
(``spark.jars``, nothing resolved at run time), points executors at this Python, and hands the target's
Kafka client settings to the job through an environment variable (never on the command line).
"""

from __future__ import annotations

import json

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from mm2_failover.config import SPARK_CONN_ID, SPARK_JOB, TARGET_CONN_ID


class LatestCheckpointsOperator(SparkSubmitOperator):
    ui_color = "#fff3d6"

    def __init__(self, *, target_conn_id: str = TARGET_CONN_ID, conn_id: str = SPARK_CONN_ID, **kwargs):
        kwargs.setdefault("name", "mm2-failover-latest-checkpoints")
        kwargs.setdefault("retries", 2)
        super().__init__(application=str(SPARK_JOB), conn_id=conn_id, **kwargs)
        self.target_conn_id = target_conn_id

    def execute(self, context):
        from airflow.sdk.exceptions import AirflowFailException

        from mm2_failover import config, steps
        from mm2_failover.hooks.kafka_cluster import KafkaClusterHook
        from mm2_failover.spark import check_spark_connection, job_submission, quarantine_failure

        check_spark_connection(self._conn_id)
        params = config.RunParams.from_mapping(dict(context["params"]))
        art = steps.RunArtifacts(config.run_dir(context["dag"].dag_id, context["run_id"]))
        if not art.snapshot.exists():
            raise AirflowFailException(f"no end-offset snapshot at {art.snapshot}: capture_end_offsets must run first")
        snap = json.loads(art.snapshot.read_text())
        target_conf = KafkaClusterHook(self.target_conn_id, "target").client_config()
        args, env, conf = job_submission(params, art, snap, target_conf)
        art.checkpoints_summary.unlink(missing_ok=True)
        self.application_args = args
        self.jars = ",".join(config.spark_jars())
        self.conf = {**conf, **(self.conf or {})}
        self.env_vars = {**(self.env_vars or {}), **env}
        self._hook = None  # built from the attributes set above
        try:
            super().execute(context)
        except Exception as e:
            summary = json.loads(art.checkpoints_summary.read_text()) if art.checkpoints_summary.exists() else None
            msg = quarantine_failure(summary, params.max_quarantined_records)
            if msg:
                raise AirflowFailException(msg) from e  # deterministic: a retry would not help
            raise
        summary = json.loads(art.checkpoints_summary.read_text())
        self.log.info("latest checkpoints: %d record(s) read, %d checkpoint(s) for %d group(s), %d tombstone(s), "
                      "%d quarantined %s -> %s", summary["records_read"], summary["checkpoints"], summary["groups"],
                      summary["tombstones"], summary["quarantined"], summary["quarantined_by_reason"], art.checkpoints)
        return summary
