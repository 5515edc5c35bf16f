"""A real Spark standalone cluster (one master, one worker) from the pinned pyspark, for ``make demo
SPARK=cluster`` and the tests that prove the DAG's Spark job runs on a cluster and not only in local mode.

* SPARK_HOME is the installed ``pyspark`` package (it ships ``bin/spark-class`` and the jars, but no
  ``sbin/start-master.sh``): the master and the worker run ``spark-class`` in the foreground, which execs the
  JVM, so each is stopped by its own PID (:class:`testbed.bed.Process`: log file, PR_SET_PDEATHSIG).
* Everything listens on 127.0.0.1 on free ports (``SPARK_LOCAL_IP=127.0.0.1``).
* Readiness is observed, never slept for: the master answers ``GET /json/`` with status ALIVE, then the
  worker is started and the cluster is ready when the master lists one ALIVE worker.
* Sized for a 2-core machine: the worker offers 1 core and 1 GB; applications ask for 512 MB executors
  (:attr:`SparkCluster.app_conf`, passed through ``MM2_FAILOVER_SPARK_CONF``). Master, worker and executors run
  short-lived-JVM options (C1 only, serial GC): a bed cluster, not a production one.
* The worker's work dir is ``<run_dir>/work``: one folder per application, one per executor, holding the
  executor's ``stdout`` and ``stderr`` (:meth:`SparkCluster.executor_logs`).

``with SparkCluster(run_dir) as cluster: ...`` starts it and always stops it (worker, its executors, master).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import shutil
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

from testbed.bed import BedError, Process, StartedInContext, _install_sigterm, free_port, run_until_interrupted, tail

log = logging.getLogger(__name__)

APP_NAME = "mm2-failover-latest-checkpoints"


class SparkClusterError(BedError):
    """The cluster could not start; the message includes the master's and the worker's log tails."""


def spark_home() -> Path:
    """The installed pyspark package: its ``bin/spark-class`` and ``jars/`` are a complete Spark."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").is_file():
        raise SparkClusterError(f"{home}/bin/spark-class not found: is pyspark installed from the wheel?")
    return home


class SparkCluster(StartedInContext):
    """One standalone master and one worker on loopback."""

    def __init__(
        self,
        run_dir: Path | str,
        cores: int = 1,
        memory: str = "1g",
        executor_memory: str = "512m",
        daemon_memory: str = "512m",
        timeout: float = 120.0,
    ):
        self.run_dir = Path(run_dir)
        self.work_dir = self.run_dir / "work"
        self.cores, self.memory, self.executor_memory = cores, memory, executor_memory
        self.daemon_memory = daemon_memory
        self.timeout = timeout
        self.port = free_port()
        self.webui_port = free_port()
        self.worker_webui_port = free_port()
        self.master: Process | None = None
        self.worker: Process | None = None
        self._atexit = False
        self._stopped: set[int] = set()
        self._t0 = time.monotonic()

    # -- addresses ----------------------------------------------------------------------------------
    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def webui_url(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}"

    @property
    def app_conf(self) -> dict[str, str]:
        """Spark conf an application needs to fit on this cluster (merge into ``MM2_FAILOVER_SPARK_CONF``):
        executor size, and short-lived JVMs for the driver and the executor (C1 only, serial GC; see
        :data:`testbed.localenv.QUICK_JVM_CONF`)."""
        from testbed.localenv import QUICK_JVM_CONF

        return {**QUICK_JVM_CONF, "spark.executor.memory": self.executor_memory, "spark.cores.max": str(self.cores)}

    def json(self, timeout: float = 5.0) -> dict:
        """The master's ``/json/`` document: status, workers, aliveworkers, activeapps, completedapps..."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=timeout) as r:
            return json.loads(r.read().decode())

    def info(self) -> dict:
        return {
            "master_url": self.master_url,
            "webui": self.webui_url,
            "work_dir": str(self.work_dir),
            "master_log": str(self.run_dir / "master.log"),
            "worker_log": str(self.run_dir / "worker.log"),
        }

    # -- lifecycle ----------------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        from testbed.localenv import QUICK_JVM_OPTIONS

        home = spark_home()
        conf_dir = self.run_dir / "conf"  # empty: no spark-env.sh or spark-defaults.conf from anywhere else
        conf_dir.mkdir(parents=True, exist_ok=True)
        return {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_CONF_DIR": str(conf_dir),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            # a taken port fails the start (and shows in the log) instead of moving silently to the next one
            "SPARK_DAEMON_JAVA_OPTS": f"{QUICK_JVM_OPTIONS} -Djava.awt.headless=true -Dspark.port.maxRetries=0",
            "SPARK_WORKER_DIR": str(self.work_dir),
        }

    def start(self) -> "SparkCluster":
        """Start the master and the worker and wait until the worker is ALIVE."""
        self.launch()
        return self.wait_ready()

    def launch(self) -> "SparkCluster":
        """Start the master's JVM and return at once (e.g. to let it start while the Kafka bed starts);
        :meth:`wait_ready` completes the start."""
        if not shutil.which("java"):
            raise SparkClusterError("java not found on PATH: Spark needs Java 17+")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if not self._atexit:
            atexit.register(self.stop)
            self._atexit = True
        _install_sigterm()
        self._t0 = time.monotonic()
        self.master = Process(
            "Spark master",
            [
                self._spark_class(),
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.webui_port),
            ],
            self.run_dir / "master.log",
        )
        self.master.start(self.env())
        return self

    def wait_ready(self) -> "SparkCluster":
        """Wait for the master (launched by :meth:`launch`), then start the worker and wait until it is ALIVE."""
        if self.master is None:
            self.launch()
        if self.worker is not None and self.worker.alive and self.alive_workers():
            return self
        self._wait(
            lambda: (self._json_or_none() or {}).get("status") == "ALIVE",
            self.master,
            "did not answer GET /json/ with status ALIVE",
        )
        log.info(
            "Spark master ready in %.1fs: %s (web UI %s)", time.monotonic() - self._t0, self.master_url, self.webui_url
        )
        t1 = time.monotonic()
        # started once the master answers: a worker that cannot register retries only after 5-15 s
        self.worker = Process(
            "Spark worker",
            [
                self._spark_class(),
                "org.apache.spark.deploy.worker.Worker",
                self.master_url,
                "--host",
                "127.0.0.1",
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--work-dir",
                str(self.work_dir),
                "--webui-port",
                str(self.worker_webui_port),
            ],
            self.run_dir / "worker.log",
        )
        self.worker.start(self.env())
        self._wait(lambda: len(self.alive_workers()) == 1, self.worker, "did not register with the master as ALIVE")
        log.info("Spark worker ready in %.1fs (%d core, %s)", time.monotonic() - t1, self.cores, self.memory)
        return self

    @staticmethod
    def _spark_class() -> str:
        return str(spark_home() / "bin" / "spark-class")

    def alive_workers(self) -> list[dict]:
        doc = self._json_or_none() or {}
        return [w for w in doc.get("workers", []) if w.get("state") == "ALIVE"]

    def stop(self) -> None:
        """Stop the worker (it kills its executors), then the master; then anything left in their process
        groups (executors the worker launched), which only this cluster started."""
        for p in (self.worker, self.master):
            if p is None or p.popen is None or p.popen.pid in self._stopped:
                continue
            with contextlib.suppress(Exception):
                p.stop()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.popen.pid, signal.SIGKILL)  # own group (bed._pdeathsig): leftovers only
            self._stopped.add(p.popen.pid)

    # -- applications -------------------------------------------------------------------------------
    def completed_app(self, name: str = APP_NAME, after: set[str] | None = None) -> dict | None:
        """The newest completed application called ``name`` whose id is not in ``after``."""
        doc = self._json_or_none() or {}
        apps = [
            a for a in doc.get("completedapps", []) if a.get("name") == name and a.get("id") not in (after or set())
        ]
        return max(apps, key=lambda a: a.get("starttime", 0)) if apps else None

    def wait_completed_app(self, name: str = APP_NAME, after: set[str] | None = None, timeout: float = 60.0) -> dict:
        """Wait until the master lists a completed application ``name`` (the driver unregisters asynchronously)."""
        deadline = time.monotonic() + timeout
        delay = 0.2
        while True:
            app = self.completed_app(name, after)
            if app:
                return app
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no completed application {name!r} on {self.webui_url} within {timeout:.0f}s: "
                    f"{json.dumps(self._json_or_none(), default=str)[:2000]}"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    def app_ids(self) -> set[str]:
        doc = self._json_or_none() or {}
        return {a["id"] for a in doc.get("activeapps", []) + doc.get("completedapps", []) if "id" in a}

    def executor_logs(self, app_id: str, stream: str = "stderr") -> dict[str, Path]:
        """executor id -> ``<work_dir>/<app_id>/<executor_id>/<stream>`` (written by the worker)."""
        d = self.work_dir / app_id
        return {p.parent.name: p for p in sorted(d.glob(f"*/{stream}"))} if d.is_dir() else {}

    # -- helpers ------------------------------------------------------------------------------------
    def _json_or_none(self) -> dict | None:
        try:
            return self.json(timeout=2.0)
        except (OSError, ValueError, urllib.error.URLError):
            return None

    def _wait(self, ready, process: Process, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        delay = 0.2
        while time.monotonic() < deadline:
            if not process.alive:
                raise self._fail(process, f"exited with {process.popen.returncode} before it was ready")
            if ready():
                return
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)
        raise self._fail(process, f"{what} within {self.timeout:.0f}s")

    def _fail(self, process: Process, why: str) -> SparkClusterError:
        logs = [process] + [p for p in (self.master, self.worker) if p is not None and p is not process]
        text = "\n".join(f"--- {p.log_path} (tail) ---\n{tail(p.log_path)}" for p in logs)
        return SparkClusterError(f"{process.name} {why}. Command: {' '.join(process.cmd)}\n{text}")


def main(argv: list[str] | None = None) -> int:
    """``python -m testbed.spark_cluster``: start a standalone cluster, print its master URL, run until Ctrl-C."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m testbed.spark_cluster", description=main.__doc__)
    ap.add_argument(
        "--run-dir",
        type=Path,
        default=Path(__file__).resolve().parents[2] / "var" / "spark-cluster" / time.strftime("%Y%m%d-%H%M%S"),
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    from testbed.localenv import spark_conn

    with SparkCluster(args.run_dir) as cluster:
        print(json.dumps(cluster.info(), indent=2))
        print(f"export AIRFLOW_CONN_SPARK_DEFAULT='{spark_conn(cluster.master_url)}'")
        print(f"export MM2_FAILOVER_SPARK_CONF='{json.dumps(cluster.app_conf)}'  # merge with your other conf")
        return run_until_interrupted("Spark cluster", lambda: cluster.master.alive and cluster.worker.alive)


if __name__ == "__main__":
    import sys

    sys.exit(main())
