"""Credentials of the Kafka connections never leave memory and the files the job owner can read: not on a command
line, also when the Spark provider would turn environment variables into ``--conf`` for YARN/Kubernetes. (The run
over SASL that checks process command lines, task logs, XComs and artifacts for the password is
tests/integration/test_e2e_failover.py.)"""

from __future__ import annotations

import json

PASSWORD = "S3cret-Pw-0f-The-Target"


def target_conf(bootstrap: str, password: str = PASSWORD) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "failover",
        "sasl.password": password,
    }


def test_yarn_and_kubernetes_submissions_carry_no_secret_on_the_command_line(monkeypatch, tmp_path):
    """Item 9: the provider puts env_vars on spark-submit's command line for YARN and Kubernetes masters."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    from mm2_failover.adapters import config
    from mm2_failover.adapters.runfolder import RunFolder, Snapshot
    from mm2_failover.adapters.spark import job_submission
    from mm2_failover.rules.run_params import RunParams

    cp = "primary.checkpoints.internal"
    snap = Snapshot("t", {"primary": cp}, {(cp, 0): 10}, {(cp, 0): 0}, {}, {}, {}, {})
    with job_submission(RunParams(), RunFolder(tmp_path / "run"), snap, target_conf("kafka:9093")) as sub:
        # YARN; Kubernetes turns the same env_vars into spark.kubernetes.driverEnv.* (its hook needs the kubernetes
        # package, not installed here): the environment carries no secret, so neither command line can
        assert not any(PASSWORD in v for v in sub.env.values())
        monkeypatch.setenv(
            "AIRFLOW_CONN_SPARK_TEST",
            json.dumps({"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "client"}}),
        )
        hook = SparkSubmitHook(conn_id="spark_test", conf=sub.conf, env_vars=sub.env, application_args=sub.args)
        cmd = " ".join(hook._build_spark_submit_command(str(config.SPARK_JOB)))
        assert "spark.yarn.appMasterEnv.PYSPARK_PYTHON" in cmd  # the route that exposed the old secret variable
        assert PASSWORD not in cmd
        # the credentials are in a file only this user can read, outside the run folder, gone after the job
        assert PASSWORD in sub.options_file.read_text()
        assert oct(sub.options_file.stat().st_mode & 0o777) == "0o600"
        assert not sub.options_file.is_relative_to(tmp_path)
    assert not sub.options_file.exists()
