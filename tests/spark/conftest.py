"""One local Spark session for every Spark test (a JVM start costs ~10 s on 2 cores)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def spark():
    saved = os.environ.get("SPARK_LOCAL_IP")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master("local[1]").appName("mm2-failover-spark-tests")
         .config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "1")
         .config("spark.ui.showConsoleProgress", "false")
         # a short-lived test JVM: the C1 compiler only starts Spark about twice as fast on a busy machine
         .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
         .getOrCreate())
    try:
        yield s
    finally:
        s.stop()
        if saved is None:
            os.environ.pop("SPARK_LOCAL_IP", None)
        else:
            os.environ["SPARK_LOCAL_IP"] = saved
