"""Wire a local Airflow to the local bed: environment variables for connections and settings, the
metadata DB, and running a DAG for real with ``dag.test()``. Used by ``make demo`` and the tests.

Connections are given as ``AIRFLOW_CONN_*`` environment variables, which every Airflow process and the CLI
see (connections stored in the DB are invisible to plain scripts).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def kafka_conn(bootstrap: str, **librdkafka) -> str:
    return json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap, **librdkafka}})


def spark_conn(master: str = "local[2]") -> str:
    if master.startswith("spark://"):
        host, _, port = master.rpartition(":")
        return json.dumps({"conn_type": "spark", "host": host, "port": int(port)})
    return json.dumps({"conn_type": "spark", "host": master})


def spark_connect_conn(port: int, host: str = "127.0.0.1") -> str:
    """The ``spark_connect_default`` connection of a Spark Connect server (conn type ``spark_connect``)."""
    return json.dumps({"conn_type": "spark_connect", "host": host, "port": int(port)})


# Short-lived Spark JVMs on a small machine: C1 only and the serial GC. Opt-in extra conf for airflow_env(spark_conf=...)
# (not the default): the latest-checkpoints job on the standalone bed cluster took 35 s instead of 70 s with it on a
# loaded 2-core machine. Long or heavy jobs want the default JIT (C2) instead.
QUICK_JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
QUICK_JVM_CONF = {
    "spark.driver.extraJavaOptions": QUICK_JVM_OPTIONS,
    "spark.executor.extraJavaOptions": QUICK_JVM_OPTIONS,
}


SQLITE_BUSY_TIMEOUT_S = 120  # the bed's metadata DB: how long a writer waits for another (see airflow_env)


def airflow_env(
    home: Path,
    source_bootstrap: str,
    target_bootstrap: str,
    spark_master: str = "local[2]",
    artifacts: Path | None = None,
    spark_conf: dict | None = None,
) -> dict[str, str]:
    """Everything a local Airflow needs to run the project's DAGs against the bed. ``spark_conf`` is added to
    (and overrides) the job's default Spark conf, e.g. a standalone cluster's ``SparkCluster.app_conf``."""
    from mm2_failover.adapters.config import preload_settings

    home = Path(home)
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO_ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        # SQLite writers wait for each other up to 5 s by default (Python's sqlite3): a task that moved 10k groups
        # stores 10k Asset events in one transaction of the API server, longer than that on this machine, and the
        # scheduler's next write died with "database is locked" (bench/rto_bench.py at 10k groups, three runs)
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db?timeout={SQLITE_BUSY_TIMEOUT_S}",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        "AIRFLOW_CONN_KAFKA_SOURCE": kafka_conn(source_bootstrap),
        "AIRFLOW_CONN_KAFKA_TARGET": kafka_conn(target_bootstrap),
        "AIRFLOW_CONN_SPARK_DEFAULT": spark_conn(spark_master),
        "MM2_FAILOVER_ARTIFACTS": str(artifacts or home / "artifacts"),
        # Spark on loopback: the driver must not bind a non-loopback address
        "SPARK_LOCAL_IP": "127.0.0.1",
        "MM2_FAILOVER_SPARK_CONF": json.dumps(
            {
                "spark.driver.host": "127.0.0.1",
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "4",
                **(spark_conf or {}),
            }
        ),
        # the venv's spark-submit (from pyspark) is what SparkSubmitOperator runs
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "plugins"), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
        # the executors' workers import the heavy modules once, not each task (mm2_failover.preload)
        **preload_settings(),
    }


def migrate_db(env: dict[str, str]) -> None:
    """Create/upgrade the metadata DB (idempotent)."""
    airflow = Path(sys.executable).with_name("airflow")
    r = subprocess.run([str(airflow), "db", "migrate"], env={**os.environ, **env}, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"airflow db migrate failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")


def load_dag(dag_id: str):
    """Load a DAG from the project's dags/ folder with Airflow's own DagBag (as the dag-processor does)."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO_ROOT / "dags"))
    if bag.import_errors:
        raise RuntimeError(f"DAG import errors: {bag.import_errors}")
    return bag.get_dag(dag_id)


#: the DAGs whose runs wait for a human's approval before they write (mm2_failover.rules.approval)
ASKS_APPROVAL = ("mm2_failover",)


#: the retry delay of every task in a ``run_dag`` run: the DAGs' own (15-30 s) only waited here - ``dag.test()``
#: runs a try once its delay has passed - and the tests check the retries, not how long Airflow waits between them
#: (the real scheduler's delays are kept in tests/e2e/test_ui.py)
TEST_RETRY_DELAY = timedelta(seconds=2)


def run_dag(dag_id: str, conf: dict | None = None, retry_delay: timedelta = TEST_RETRY_DELAY):
    """Run the DAG for real in this process (``dag.test()``: every task executes, sensors reschedule);
    returns the DagRun. Its run id names the artifacts folder: ``config.run_dir(dag_id, dagrun.run_id)``.
    Every task keeps its retries, each after ``retry_delay`` instead of the DAG's own delay.

    ``dag.test()`` has no api-server, so nobody could answer an approval: a run here opts out of it
    (``require_approval=false``, as an automation does) unless ``conf`` says otherwise. The approval itself is
    exercised on a real scheduler and api-server (tests/e2e/test_ui.py)."""
    conf = dict(conf or {})
    if dag_id in ASKS_APPROVAL:
        conf.setdefault("require_approval", False)
    dag = load_dag(dag_id)
    # Airflow 3.3.2's dag.test() fails when a run with a deadline alert ends ("'dict' object has no attribute 'hex'":
    # it looks the DAG's alerts up by the id a DAG synced by the dag-processor has, and a DAG serialized in process has
    # none). The deadline alerts are tested on a real scheduler (tests/e2e/test_ui.py); docs/reference.md, "Deadline alerts".
    dag.deadline = None
    for task in dag.tasks:
        task.retry_delay = retry_delay
    return dag.test(run_conf=conf)


def task_states(dag_id: str, run_id: str) -> dict[str, str]:
    """task_id -> final state of one DAG run's task instances (from the metadata DB)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as s:
        tis = s.query(TaskInstance).filter(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id).all()
        return {ti.task_id: str(ti.state.value if hasattr(ti.state, "value") else ti.state) for ti in tis}


QUIET_COMMANDS = (
    "plan",
    "apply",
    "drain",
    "snapshot",
    "drill",
    "readiness",
)  # the commands that wait a drain's quiet window


def run_cli(
    *args: str, bed=None, env: dict | None = None, timeout: float = 600, quiet_s: int | None = 1, popen: bool = False
):
    """The CLI (``python -m mm2_failover``) in a process of its own, as an operator runs it: the package on
    ``PYTHONPATH``, Airflow's Kafka connections left out of its environment (its flags say which clusters), on
    ``bed``'s clusters when given, ``env`` added; a drain's quiet window of ``quiet_s`` seconds unless the arguments
    set one (None: the CLI's default). Returns the CompletedProcess, or with ``popen`` the running Popen (its output
    thrown away)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_KAFKA_")}
    e.update({"PYTHONPATH": str(REPO_ROOT / "plugins"), **(env or {})})
    argv = list(args)
    if bed is not None:
        argv = ["--source-bootstrap", bed.source_bootstrap, "--target-bootstrap", bed.target_bootstrap, *argv]
    cmd = next((i for i, a in enumerate(argv) if a in QUIET_COMMANDS), None)
    if quiet_s is not None and cmd is not None and "--drain-quiet-seconds" not in argv:
        argv[cmd + 1 : cmd + 1] = ["--drain-quiet-seconds", str(quiet_s)]
    full = [sys.executable, "-m", "mm2_failover", *argv]
    if popen:
        return subprocess.Popen(full, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return subprocess.run(full, capture_output=True, text=True, env=e, timeout=timeout)
