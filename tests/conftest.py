"""Shared fixtures. The bed (two real KRaft brokers + real MirrorMaker 2) is started once per session, only
when a test asks for it, and always stopped. Tests on the bed isolate themselves by topic and group names."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# `make test` spreads the test files over worker processes (pytest-xdist, --dist loadfile). Each worker is a session
# of its own: its own bed, Spark Connect server, Airflow home and artifacts, under one folder per run. The workers
# inherit the controller's environment, so a default this file set in the controller is set again per worker; a
# value the user set stays.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_OURS = set(filter(None, os.environ.get("MM2_FAILOVER_TEST_DEFAULTS", "").split(",")))


def _default(key: str, value: str) -> None:
    if key not in os.environ or key in _OURS:
        os.environ[key] = value
        _OURS.add(key)
    os.environ["MM2_FAILOVER_TEST_DEFAULTS"] = ",".join(sorted(_OURS))


# the run's folder: named by the controller, inherited by its workers
os.environ.setdefault("MM2_FAILOVER_TEST_RUN", str(REPO / "var" / "test" / time.strftime("%Y%m%d-%H%M%S")))
RUN = Path(os.environ["MM2_FAILOVER_TEST_RUN"]) / (WORKER or "main")

# Airflow reads AIRFLOW_HOME when it is first imported: set it before any test module imports airflow.
_default("AIRFLOW_HOME", str(RUN / "airflow"))
_default("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
# ... and so are its folders (settings.DAGS_FOLDER, the dags-folder bundle): a unit test that imports airflow before
# the bed fixture sets them would otherwise leave ~/airflow/dags in place, and a later dag.test() of a DAG from
# dags/ fails with "the dag is not serialized" (tests/unit/test_spark_connection.py, then test_latest_state.py).
_default("AIRFLOW__CORE__DAGS_FOLDER", str(REPO / "dags"))
_default("AIRFLOW__CORE__PLUGINS_FOLDER", str(REPO / "plugins"))
# the bed's JVMs C1 only: the suite's loads are small, and it is CPU-bound (testbed.bed.QUICK_JIT_ENV)
_default("MM2_FAILOVER_BED_QUICK_JIT", "1")
# py4j logs "Closing down clientserver connection" at INFO from __del__ at interpreter exit, after pytest has
# closed the streams: a "--- Logging error ---" traceback at the end of every run that means nothing.
logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(autouse=True)
def _fatal_signals_reported(request):
    """Airflow's DAG importer (every dag.test() or DagBag in this process) installs a Python-level SIGSEGV handler and
    leaves it: a segfault in the main thread would then spin on the faulting instruction forever, silently, until
    CI's time limit - not crash with faulthandler's dump of every thread. Before each test, faulthandler is armed
    again over the default action. (A fault in a librdkafka thread, which blocks every signal, reaches no handler at
    all: the process just dies of SIGSEGV; a core file and gdb show where.)"""
    import faulthandler
    import signal

    if callable(signal.getsignal(signal.SIGSEGV)):
        from _pytest.faulthandler import fault_handler_stderr_fd_key

        fd = request.config.stash.get(fault_handler_stderr_fd_key, None)
        faulthandler.disable()
        signal.signal(signal.SIGSEGV, signal.SIG_DFL)
        if fd is not None:
            faulthandler.enable(file=fd, all_threads=True)


@pytest.fixture(scope="session")
def run_root() -> Path:
    RUN.mkdir(parents=True, exist_ok=True)
    return RUN


# The DAG runs and CLI runs of the tests run the Spark job on one warm Spark Connect server per session (the
# route a deployment with spark_connect_default takes: seconds per job instead of a JVM of its own each time).
# MM2_FAILOVER_TEST_SPARK=submit runs them all through spark-submit instead; tests of the spark-submit route
# itself (the fallback, the standalone cluster, the event log, ACLs) take it whatever this says (spark_submit_route).
SPARK_ROUTE = os.environ.get("MM2_FAILOVER_TEST_SPARK", "connect")


_CONNECT_START: dict = {}


def _start_connect_server(run_root: Path):
    """The session's Spark Connect server, started (JVM, then its warm-up) in a thread of its own, once; returns the
    future of the started server. (Started beside the brokers it measured slower, not faster: the first bed test's
    setup took 307 s and 133 s on the two workers against 176 s and 89 s one after the other - four JVMs and a Spark
    warm-up at once on 2 cores. So the bed fixture asks for it after the brokers are up.)"""
    if "future" not in _CONNECT_START:
        from concurrent.futures import ThreadPoolExecutor

        from testbed.bed import free_port
        from testbed.spark_connect import SparkConnectServer

        pool = ThreadPoolExecutor(1, thread_name_prefix="spark-connect-start")
        from testbed.localenv import QUICK_JVM_OPTIONS

        _CONNECT_START["future"] = pool.submit(
            SparkConnectServer.start, run_root / "spark-connect", free_port(), java_options=QUICK_JVM_OPTIONS
        )  # the suite's jobs are small
        pool.shutdown(wait=False)
    return _CONNECT_START["future"]


@pytest.fixture(scope="session")
def connect_server(run_root):
    """One warm Spark Connect server for the session (started on first use, stopped at the end)."""
    server = _start_connect_server(run_root).result()
    try:
        # the warm-up (a child process) must not switch this process, or what it starts later, to Connect mode
        assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ
        assert set(server.warmup_steps or {}) == {"full_pass", "refresh", "state_and_tail"}, server.warmup_steps
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def bed(run_root, request):
    """The local bed, wired to a local Airflow (connections as AIRFLOW_CONN_* env vars, metadata DB migrated); the
    Spark job's route: the session's warm Spark Connect server (``spark_connect_default``) unless
    ``MM2_FAILOVER_TEST_SPARK=submit``."""
    from testbed import localenv
    from testbed.bed import Bed

    b = Bed(run_dir=run_root / "bed")
    try:
        b.start()
    except BaseException:
        b.stop()
        raise
    # short-lived Spark JVMs: C1 + serial GC halve each job on 2 cores (localenv.QUICK_JVM_CONF)
    env = localenv.airflow_env(
        Path(os.environ["AIRFLOW_HOME"]),
        b.source_bootstrap,
        b.target_bootstrap,
        artifacts=run_root / "artifacts",
        spark_conf=localenv.QUICK_JVM_CONF,
    )
    if SPARK_ROUTE == "connect":
        try:
            server = request.getfixturevalue("connect_server")
        except BaseException:
            b.stop()
            raise
        env["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"] = localenv.spark_connect_conn(server.port)
    os.environ.update(env)
    localenv.migrate_db(env)
    yield b
    b.stop()


@pytest.fixture(scope="module", autouse=True)
def _groups_left_on_the_bed(request):
    """A module that runs on the session's bed leaves it without the consumer groups it made: each one it leaves
    costs every later module CPU, not only its own. The bed's MM2 lists and reads every source group's offsets every
    second (``refresh.groups`` and ``emit.checkpoints`` at 1 s: a bed's checkpoints come quickly), so 300 groups
    took an idle bed from 5.4 to 11.3 CPU-s a minute on this machine, and 3.8 once they were deleted - on 2 cores
    shared by three workers' beds, where the suite is CPU-bound. Groups still in use (a member left) are left as they
    are. Modules without the bed start nothing here."""
    if not any(i.module is request.module and "bed" in getattr(i, "fixturenames", ()) for i in request.session.items):
        yield
        return
    bed = request.getfixturevalue("bed")
    clusters = {role: bed.client(role) for role in ("source", "target")}  # held: a dropped client drops its requests
    before = {}
    for role, c in clusters.items():
        with contextlib.suppress(Exception):  # a cluster an earlier module left stopped: nothing to clean there
            before[role] = set(c.group_states())
    yield
    for role, had in before.items():
        c = clusters[role]
        with contextlib.suppress(Exception):  # a cluster this module left stopped: the same
            new = sorted(set(c.group_states()) - had)
            if new:
                for fut in c.admin.delete_consumer_groups(new, request_timeout=30).values():
                    with contextlib.suppress(Exception):  # not empty (a member left): it stays
                        fut.result(60)


@pytest.fixture
def spark_submit_route(monkeypatch):
    """This test's Spark jobs go through spark-submit (``spark_default``), whatever the session's route."""
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", raising=False)


@pytest.fixture
def names(request):
    """Unique topic/group names for one test on the shared bed."""
    tag = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:30] + "-" + uuid.uuid4().hex[:6]
    return {"topic": f"t-{tag}", "group": f"g-{tag}"}


@pytest.fixture
def source(bed):
    return bed.client("source")


@pytest.fixture
def target(bed):
    return bed.client("target")


def pytest_sessionfinish(session, exitstatus):
    if "future" in _CONNECT_START:  # started for a bed that then failed to start: never left running
        with contextlib.suppress(Exception):
            _CONNECT_START["future"].result(timeout=300).stop()
    # keep the run folder (logs, artifacts) only when something failed
    if exitstatus == 0 and RUN.exists() and not os.environ.get("MM2_FAILOVER_KEEP_TEST_RUNS"):
        shutil.rmtree(RUN, ignore_errors=True)
    if not WORKER:  # the controller (or a run without workers), last: the run's folder once its workers left none
        with contextlib.suppress(OSError):
            RUN.parent.rmdir()


# Where the suite's time goes, per worker and per file (the budget is the slowest worker's): printed at the end of
# every run of more than one file, from the reports the workers send the controller.
_FILE_SECONDS: dict[tuple[str, str], float] = {}


def pytest_runtest_logreport(report):
    node = getattr(report, "node", None)
    worker = getattr(getattr(node, "gateway", None), "id", None) or getattr(report, "worker_id", None) or "main"
    key = (worker, report.nodeid.split("::", 1)[0])
    _FILE_SECONDS[key] = _FILE_SECONDS.get(key, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if len({f for _, f in _FILE_SECONDS}) < 2:
        return
    per_worker: dict[str, float] = {}
    for (w, _f), s in _FILE_SECONDS.items():
        per_worker[w] = per_worker.get(w, 0.0) + s
    tr = terminalreporter
    tr.section("time per worker and file (setup + call + teardown)")
    for w in sorted(per_worker):
        tr.write_line(f"{w}: {per_worker[w]:.0f}s")
        for (ww, f), s in sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1]):
            if ww == w and s >= 5:
                tr.write_line(f"    {s:7.1f}s  {f}")
