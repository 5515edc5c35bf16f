"""spark_default must exist: the Spark provider's hook would otherwise submit to master 'yarn' without a word."""

from __future__ import annotations

import pytest

from mm2_failover.adapters.spark import SparkConnectionMissing, check_spark_connection
from testbed.localenv import spark_conn, spark_connect_conn


def test_missing_spark_default_fails_naming_the_connection_and_how_to_set_it(monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_DEFAULT", raising=False)
    with pytest.raises(SparkConnectionMissing) as e:
        check_spark_connection("spark_default")
    assert "isn't defined" in str(e.value.__cause__)  # Airflow's own lookup failed, not something else
    msg = str(e.value)
    assert "'spark_default' is not defined" in msg
    assert "'yarn'" in msg  # says what the provider would have done instead
    assert "AIRFLOW_CONN_SPARK_DEFAULT=" in msg and '"conn_type": "spark"' in msg
    assert "airflow connections add spark_default --conn-type spark" in msg


@pytest.mark.parametrize("master", ["local[2]", "spark://127.0.0.1:7077"])
def test_spark_default_from_the_environment_gives_the_master(monkeypatch, master):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", spark_conn(master))
    assert check_spark_connection("spark_default") == master


# the warm Spark Connect route: taken only when its connection is defined and its server answers


def test_no_spark_connect_connection_falls_back_to_spark_submit(monkeypatch):
    from mm2_failover.adapters.spark import spark_connect_url

    monkeypatch.delenv("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", raising=False)
    url, why = spark_connect_url("spark_connect_default")
    assert url is None and "no Airflow connection 'spark_connect_default'" in why and why.endswith("spark-submit")


def test_a_spark_connect_server_that_does_not_answer_falls_back_naming_it(monkeypatch):
    import json
    import socket

    from mm2_failover.adapters.spark import spark_connect_url

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_CONNECT_DEFAULT",
        json.dumps({"conn_type": "spark_connect", "host": "127.0.0.1", "port": port, "password": "s3cr3t-token"}),
    )
    url, why = spark_connect_url("spark_connect_default", timeout=1)
    assert url is None and f"127.0.0.1:{port}" in why and "does not answer" in why and "s3cr3t" not in why


def test_a_spark_connect_server_that_answers_is_used_its_token_never_said(monkeypatch):
    import json
    import socket

    from mm2_failover.adapters.spark import spark_connect_url

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        monkeypatch.setenv(
            "AIRFLOW_CONN_SPARK_CONNECT_DEFAULT",
            json.dumps({"conn_type": "spark_connect", "host": "127.0.0.1", "port": port, "password": "s3cr3t-token"}),
        )
        url, why = spark_connect_url("spark_connect_default", timeout=1)
    assert url.startswith(f"sc://127.0.0.1:{port}") and "s3cr3t-token" in url  # the client needs it
    assert "s3cr3t" not in why and f"127.0.0.1:{port}" in why


# the CLI's route: --spark-remote first (a URL or 'none'), else the DAG's rule on AIRFLOW_CONN_SPARK_CONNECT_DEFAULT


def _listening():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s, s.getsockname()[1]


def test_cli_without_option_or_connection_uses_spark_submit_without_asking_airflow(monkeypatch):
    from mm2_failover.adapters.spark import cli_spark_route

    monkeypatch.delenv("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", raising=False)
    url, why = cli_spark_route(None, "spark_connect_default")
    assert url is None and "AIRFLOW_CONN_SPARK_CONNECT_DEFAULT" in why and why.endswith("spark-submit")


def test_cli_follows_the_connection_like_the_dag(monkeypatch):
    from mm2_failover.adapters.spark import cli_spark_route

    s, port = _listening()
    with s:
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", spark_connect_conn(port))
        url, why = cli_spark_route(None, "spark_connect_default")
    assert url.startswith(f"sc://127.0.0.1:{port}") and "'spark_connect_default'" in why


def test_cli_option_overrides_the_connection_and_none_forces_spark_submit(monkeypatch):
    from mm2_failover.adapters.spark import cli_spark_route

    s, port = _listening()
    with s:
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", spark_connect_conn(port))
        assert cli_spark_route("none", "spark_connect_default") == (None, "--spark-remote none: spark-submit")
        url, why = cli_spark_route(f"sc://127.0.0.1:{port}/;token=s3cr3t", "spark_connect_default")
    assert url == f"sc://127.0.0.1:{port}/;token=s3cr3t" and "--spark-remote" in why and "s3cr3t" not in why


def test_cli_option_whose_server_does_not_answer_falls_back_saying_so(monkeypatch):
    from mm2_failover.adapters.spark import cli_spark_route

    s, port = _listening()
    s.close()  # nobody listens any more
    url, why = cli_spark_route(f"sc://127.0.0.1:{port}", "spark_connect_default")
    assert url is None and f"127.0.0.1:{port}" in why and "does not answer" in why and why.endswith("spark-submit")


@pytest.mark.parametrize("bad", ["http://127.0.0.1:15002", "127.0.0.1:15002", "sc://"])
def test_cli_option_that_is_not_a_connect_url_is_refused_naming_it(bad):
    from mm2_failover.adapters.spark import cli_spark_route

    with pytest.raises(ValueError) as e:
        cli_spark_route(bad, "spark_connect_default")
    assert "--spark-remote" in str(e.value) and "sc://host:port" in str(e.value)
