"""One local Spark session per Spark test module (a JVM start costs ~10 s on 2 cores), stopped when the module
ends: under `make test` a worker process may run integration tests after these, and those start a Spark Connect
client in the same process, which Spark refuses while a regular session is alive (SESSION_ALREADY_EXIST)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def spark():
    saved = os.environ.get("SPARK_LOCAL_IP")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    s = (
        SparkSession.builder.master("local[1]")
        .appName("mm2-failover-spark-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.ui.showConsoleProgress", "false")
        # a short-lived test JVM: the C1 compiler only starts Spark about twice as fast on a busy machine
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    try:
        yield s
    finally:
        s.stop()
        if saved is None:
            os.environ.pop("SPARK_LOCAL_IP", None)
        else:
            os.environ["SPARK_LOCAL_IP"] = saved
