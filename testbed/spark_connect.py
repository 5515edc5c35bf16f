"""A warm Spark Connect server on loopback for the local bed (issue 17): the venv's pyspark ships the server
(``jars/spark-connect_2.13-*.jar``); it runs through ``spark-submit --class ...SparkConnectServer`` in local mode
with Spark's Kafka source jars, and is warmed by running the job's own plans once on made-up records (the first
query on a fresh JVM costs seconds, and the job's first run on it several more).

    server = SparkConnectServer.start(run_dir, port)   # returns when the warm-up ran
    server.url                                         # sc://127.0.0.1:<port>
    server.stop()
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def spark_home() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent)


@dataclass
class SparkConnectServer:
    proc: subprocess.Popen
    port: int
    log: Path
    started_seconds: float = 0.0
    warmup_seconds: float = 0.0
    warmup_steps: dict | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @classmethod
    def start(
        cls,
        run_dir: Path,
        port: int,
        master: str = "local[2]",
        timeout: float = 120.0,
        driver_memory: str = "1g",
        java_options: str = "",
    ) -> "SparkConnectServer":
        """``java_options``: the server JVM's (e.g. :data:`testbed.localenv.QUICK_JVM_OPTIONS` for the test suite's
        small jobs: measured, its start and warm-up took 21.9 CPU-s against 45.8, a second warm-up 7.5 against 14.8;
        the benchmarks keep the JIT's second tier, as a deployment does)."""
        from mm2_failover.adapters.config import spark_jars

        run_dir.mkdir(parents=True, exist_ok=True)
        log = run_dir / "spark-connect.log"
        cmd = [
            str(Path(sys.executable).with_name("spark-submit")),
            *(["--driver-java-options", java_options] if java_options else []),
            "--class",
            SERVER_CLASS,
            "--master",
            master,
            "--name",
            "mm2-failover-spark-connect",
            "--driver-memory",
            driver_memory,
            "--jars",
            ",".join(spark_jars(s3a=True)),  # and S3A: a run folder in S3 is written through it
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
            "--conf",
            "spark.driver.host=127.0.0.1",
            "--conf",
            "spark.driver.bindAddress=127.0.0.1",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.sql.shuffle.partitions=4",
            "--conf",
            "spark.redaction.regex=(?i)secret|password|token|access[.]?key|jaas|sasl|keystore|truststore",
        ]
        env = {
            **os.environ,
            "SPARK_HOME": spark_home(),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
        }
        t0 = time.monotonic()
        with open(log, "ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        server = cls(proc, port, log)
        deadline = t0 + timeout
        while not _open(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"the Spark Connect server did not start on 127.0.0.1:{port}; see {log}")
            time.sleep(0.3)
        server.started_seconds = round(time.monotonic() - t0, 2)
        try:
            server.warm_up()
        except BaseException:
            server.stop()  # a server that failed its warm-up is not left running
            raise
        return server

    def warm_up(self) -> None:
        """The job's own plans once, on made-up records (:mod:`mm2_failover.jobs.warm_up`: a full
        pass, a refresh, a state + tail answer): the JIT, the decoder's code generation and the first Parquet writes
        paid now instead of by the first failover. In a child process: a Connect session switches pyspark to remote
        mode for its whole process (and, through ``SPARK_CONNECT_MODE_ENABLED``, for every process started from it
        afterwards)."""
        import json

        from mm2_failover.adapters.config import PLUGINS_DIR

        t0 = time.monotonic()
        env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGINS_DIR), env.get("PYTHONPATH")]))
        p = subprocess.run(
            [sys.executable, "-m", "mm2_failover.jobs.warm_up", self.url],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if p.returncode:
            raise RuntimeError(f"the Spark Connect warm-up failed: {p.stderr[-2000:]}")
        self.warmup_steps = next(
            (json.loads(x.split(" ", 1)[1]) for x in p.stdout.splitlines() if x.startswith("WARM_UP ")), {}
        )
        self.warmup_seconds = round(time.monotonic() - t0, 2)

    def memory(self) -> dict:
        """The server JVM's resident memory (kB), from /proc."""
        try:
            status = dict(
                line.split(":", 1)
                for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines()
                if ":" in line
            )
            return {k: status[k].strip() for k in ("VmRSS", "VmHWM") if k in status}
        except OSError:
            return {}

    def stop(self) -> None:
        import signal

        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def _open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0
