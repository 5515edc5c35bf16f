"""spark_default must exist: the Spark provider's hook would otherwise submit to master 'yarn' without a word."""

from __future__ import annotations

import pytest

from testbed.localenv import spark_conn
from mm2_failover.spark import SparkConnectionMissing, check_spark_connection


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
