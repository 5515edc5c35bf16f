"""Spark connection checks (the Spark provider silently falls back to master ``yarn`` without one)."""

from __future__ import annotations


class SparkConnectionMissing(RuntimeError):
    pass


def check_spark_connection(conn_id: str) -> str:
    """Return the master of ``conn_id``, or fail naming the connection and how to set it."""
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as e:
        raise SparkConnectionMissing(
            f"Airflow connection {conn_id!r} is not defined, and the Spark provider would silently submit to "
            f"master 'yarn'. Define it, e.g. AIRFLOW_CONN_{conn_id.upper()}='{{\"conn_type\": \"spark\", "
            f"\"host\": \"local[2]\"}}' (or host spark://<master>, port 7077), or "
            f"'airflow connections add {conn_id} --conn-type spark --conn-host \"local[2]\"'.") from e
    master = conn.host or ""
    if conn.port:
        master = f"{master}:{conn.port}"
    return master


def job_submission(params, art, snapshot: dict, target_conf: dict) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """The latest-checkpoints job's arguments, environment and Spark conf for one run: the same for the
    Airflow operator and the CLI. The Kafka client settings go in the environment (secrets stay off the
    command line)."""
    import json
    import sys

    from mm2_failover.config import PLUGINS_DIR, java_client_options, spark_conf

    kafka = java_client_options(target_conf)
    topics = snapshot["checkpoints_topics"]
    args = ["--bootstrap-servers", kafka.pop("bootstrap.servers")]
    for t in topics:
        args += ["--checkpoints-topic", t]
    args += [
        "--end-offsets", json.dumps({t: snapshot["checkpoints_end_offsets"].get(t, {}) for t in topics}),
        "--policy", params.checkpoint_policy,
        "--output", str(art.checkpoints),
        "--summary", str(art.checkpoints_summary),
        "--groups-regex", params.groups_regex,
        "--max-quarantined", str(params.max_quarantined_records),
    ]
    if params.groups_exclude_regex:
        args += ["--groups-exclude-regex", params.groups_exclude_regex]
    env = {"PYTHONPATH": str(PLUGINS_DIR), "PYSPARK_PYTHON": sys.executable,
           "MM2_FAILOVER_SPARK_KAFKA_OPTIONS": json.dumps(kafka)}
    conf = {"spark.pyspark.python": sys.executable, **spark_conf()}
    return args, env, conf


def quarantine_failure(summary: dict | None, max_quarantined: int) -> str | None:
    """The operator-facing message when too many checkpoint records were unusable, else None."""
    if not summary or summary["quarantined"] <= max_quarantined:
        return None
    return (f"{summary['quarantined']} checkpoint record(s) are not usable ({summary['quarantined_by_reason']}), "
            f"more than max_quarantined_records={max_quarantined}. They are listed in {summary['quarantine_output']}. "
            "Inspect them; if the remaining checkpoints are enough, re-run with a higher max_quarantined_records.")


def spark_submit_cmd(master: str, conf: dict[str, str], args: list[str], job=None,
                     name: str = "mm2-failover-latest-checkpoints", driver_memory: str | None = None) -> list[str]:
    """The venv's spark-submit command line for the job (default ``spark_jobs/latest_checkpoints.py``) with the
    Maven-fetched Kafka source jars: one place for the CLI and the benchmarks."""
    import sys
    from pathlib import Path

    from mm2_failover.config import SPARK_JOB, spark_jars

    cmd = [str(Path(sys.executable).with_name("spark-submit")), "--master", master, "--jars", ",".join(spark_jars()),
           "--name", name]
    if driver_memory:
        cmd += ["--driver-memory", driver_memory]
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    return cmd + [str(job or SPARK_JOB), *args]


def spark_submit(master: str, args: list[str], env: dict[str, str], conf: dict[str, str]) -> int:
    """Run the job with the venv's spark-submit (the CLI path; Airflow uses SparkSubmitOperator)."""
    import os
    import subprocess

    return subprocess.run(spark_submit_cmd(master, conf, args), env={**os.environ, **env}).returncode
