"""A real Airflow for the end-to-end test and the recovery-time benchmark: api-server, scheduler, dag-processor and,
on demand, the triggerer, started here with their own AIRFLOW_HOME and SQLite DB (or ``db_url``: PostgreSQL,
:mod:`testbed.postgres`), real logins, the REST API and
Airflow's human-in-the-loop API (tests/e2e/test_ui.py, bench/rto_bench.py).

The executor is the LocalExecutor, or (``executor="celery"``, issue 34) the CeleryExecutor with a Redis of its own
(Debian's ``redis-server`` on a free loopback port: broker and result backend) and workers started by
:meth:`AirflowStack.start_workers`, each in its own working directory (AIRFLOW_HOME, logs, temporary folder, Spark
staging, latest-checkpoint state: no local disk shared between them) consuming its own queues."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

SIMPLE_AUTH = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"


def with_application_dags(folder: Path) -> dict[str, str]:
    """The environment that adds ``folder`` as a second DAG bundle (``applications``) next to the project's dags
    folder: an application team's own DAGs, e.g. one scheduled on its group's Asset (docs/runbook.md, "Telling the
    applications"). For :class:`AirflowStack`'s ``extra_env`` (every process's: the dag-processor reads it)."""
    local = "airflow.dag_processing.bundles.local.LocalDagBundle"
    bundles = [
        {"name": "dags-folder", "classpath": local, "kwargs": {}},
        {"name": "applications", "classpath": local, "kwargs": {"path": str(folder)}},
    ]
    return {"AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundles)}


def log_tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


class AirflowStack:
    """api-server + scheduler + dag-processor (+ triggerer on demand) with their own AIRFLOW_HOME and SQLite DB; each
    process in its own process group, all stopped by :meth:`stop`. ``auth``: (auth manager class, the folder its
    module is in) - default Airflow's simple auth manager; users ``admin`` (admin) and ``outsider`` (viewer)."""

    def __init__(
        self,
        home: Path,
        artifacts,
        auth: tuple[str, Path] | None = None,
        extra_env: dict[str, str] | None = None,
        executor: str = "local",
        db_url: str | None = None,
    ):
        from testbed.bed import free_port

        self.db_url = db_url  # Airflow's metadata database (testbed.postgres); None: SQLite in the home folder
        self.home, self.artifacts = home, artifacts  # artifacts: a folder, or an object store's URL (UPath)
        self.executor = executor
        self.redis_port = free_port() if executor == "celery" else None
        self.workers: dict[str, dict] = {}  # name -> {"queues", "home", "log_port"}
        self.auth = auth
        self.extra_env = dict(extra_env or {})  # every process's (the dag-processor's too: read at parse time)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen] = {}
        self.airflow = str(Path(sys.executable).with_name("airflow"))
        self.secrets = {
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
            "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
        }
        self.passwords = {"admin": secrets.token_urlsafe(12), "outsider": secrets.token_urlsafe(12)}
        self.token: str | None = None  # the admin's JWT, for the REST calls
        self._booted = threading.Event()
        self._release = threading.Event()
        self._boot: dict = {}
        self._spawner: threading.Thread | None = None

    def env(self, source_bootstrap: str, target_bootstrap: str) -> dict[str, str]:
        from mm2_failover.adapters.store import url_of
        from testbed import localenv

        env = localenv.airflow_env(self.home, source_bootstrap, target_bootstrap, artifacts=url_of(self.artifacts))
        celery = (
            {}
            if self.executor != "celery"
            else {
                "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                "AIRFLOW__CELERY__BROKER_URL": f"redis://127.0.0.1:{self.redis_port}/0",
                "AIRFLOW__CELERY__RESULT_BACKEND": f"redis://127.0.0.1:{self.redis_port}/1",
                "AIRFLOW__CELERY__WORKER_CONCURRENCY": "2",
                "AIRFLOW__OPERATORS__DEFAULT_QUEUE": "default",
            }
        )
        return {
            # a deployment's processes write bytecode (pip compiles a wheel's at install): without it every task
            # process compiled the plugins' modules again (py-spy: ~7 s of CPU over a 10k-group bench's tasks)
            **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
            **env,
            **({"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.db_url} if self.db_url else {}),
            **self.secrets,
            "AIRFLOW__API__BASE_URL": self.base,
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base}/execution/",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            **celery,
            # real logins: Airflow's simple auth manager, one DAG hidden from `outsider`
            "AIRFLOW__CORE__AUTH_MANAGER": self.auth[0] if self.auth else SIMPLE_AUTH,
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,outsider:viewer",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.home / "passwords.json"),
            "PYTHONPATH": os.pathsep.join([*([str(self.auth[1])] if self.auth else []), env["PYTHONPATH"]]),
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
            "AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC": "2",
            # how often the scheduler resolves approvals past their deadline (default 15 s)
            "AIRFLOW__SCHEDULER__TRIGGER_TIMEOUT_CHECK_INTERVAL": "2",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
            **self.extra_env,
        }

    def migrate(self) -> float:
        """The separate metadata DB (no cluster needed: runs while the bed starts)."""
        from testbed import localenv

        t0 = time.monotonic()
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "passwords.json").write_text(json.dumps(self.passwords))
        localenv.migrate_db(self.env("unused:1", "unused:1"))
        return time.monotonic() - t0

    def _spawn(
        self, name: str, args: list[str], env: dict[str, str], exe: str | None = None, cwd: Path | None = None
    ) -> None:
        from testbed.bed import _pdeathsig  # own process group + SIGTERM if pytest dies

        out = open(self.home / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen(
            [exe or self.airflow, *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_pdeathsig,
            cwd=cwd,
        )
        out.close()

    def start_redis(self) -> None:
        """The Celery broker and result backend: Debian's redis-server on loopback, nothing kept on disk."""
        import shutil

        exe = shutil.which("redis-server")
        if exe is None:
            raise AssertionError(
                "redis-server is not installed: run `make setup` (Debian: apt-get install redis-server)"
            )
        self._spawn(
            "redis",
            [
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.redis_port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.home),
            ],
            {**os.environ},
            exe=exe,
        )

    def start_workers(
        self, source_bootstrap: str, target_bootstrap: str, queues: dict[str, str], extra: dict | None = None
    ) -> None:
        """One Celery worker per ``name -> "queue,queue"``, each in its own working directory (AIRFLOW_HOME, logs,
        TMPDIR - so the Spark job's staging and the private options files -, latest-checkpoint state) with its own
        log server port: the task processes inherit the bed's connections (and ``extra``) from their worker."""
        from testbed.bed import free_port

        base = {**self.env(source_bootstrap, target_bootstrap), **(extra or {})}
        for name, qs in queues.items():
            wh = self.home / f"worker-{name}"
            (wh / "tmp").mkdir(parents=True, exist_ok=True)
            port = free_port()
            self.workers[name] = {"queues": qs, "home": wh, "log_port": port}
            env = {
                **base,
                "AIRFLOW_HOME": str(wh),
                "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(wh / "logs"),
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(port),
                "TMPDIR": str(wh / "tmp"),
                "MM2_FAILOVER_STATE": str(wh / "state"),
                "HOME": str(wh),
            }
            self._spawn(
                f"worker-{name}",
                ["celery", "worker", "--queues", qs, "--concurrency", "2", "--celery-hostname", f"{name}@%h"],
                env,
                cwd=wh,
            )

    def kill_worker(self, name: str) -> None:
        """SIGKILL a worker and everything it started, as a lost host. Its process group is not enough: Airflow's
        supervisor puts each task process in a process group of its own. So the group is stopped first (no new
        task starts), then every descendant is killed, then the group."""
        import psutil

        p = self.procs.pop(f"worker-{name}")
        try:
            os.killpg(p.pid, signal.SIGSTOP)
            tree = psutil.Process(p.pid).children(recursive=True)
        except (ProcessLookupError, psutil.NoSuchProcess):
            tree = []
        for q in tree:
            try:
                q.kill()  # psutil checks that the pid is still that process
            except psutil.NoSuchProcess:
                pass
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(10)

    def worker_of(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str | None:
        """The worker that ran (or runs) that try: the one whose own log folder has its log (None: none yet)."""
        for name, w in self.workers.items():
            d = w["home"] / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
            if (d / f"attempt={try_number}.log").exists():
                return name
        return None

    def start_server_side(self) -> None:
        """api-server and dag-processor: they need no cluster (tasks find the connections in their own
        environment first), so they boot while the bed starts. No AIRFLOW_CONN_* in their environment."""
        env = {k: v for k, v in self.env("unused:1", "unused:1").items() if not k.startswith("AIRFLOW_CONN_")}
        self._spawn("api-server", ["api-server", "-H", "127.0.0.1", "-p", str(self.port), "-w", "1"], env)
        self._spawn("dag-processor", ["dag-processor"], env)

    def boot_server_side_async(self) -> None:
        """Migrate and start the server side in a thread that stays alive until :meth:`stop`: the children get
        PR_SET_PDEATHSIG, which fires when the *thread* that forked them ends."""

        def run():
            try:
                self._boot["migrate_s"] = self.migrate()
                self.start_server_side()
            except BaseException as exc:  # noqa: BLE001 - reported by wait_server_side
                self._boot["error"] = exc
            finally:
                self._booted.set()
            self._release.wait()

        self._spawner = threading.Thread(target=run, name="airflow-spawner", daemon=True)
        self._spawner.start()

    def wait_server_side(self, timeout: float = 180.0) -> float:
        if not self._booted.wait(timeout):
            raise AssertionError(f"airflow db migrate did not finish in {timeout:.0f}s")
        if "error" in self._boot:
            raise self._boot["error"]
        return self._boot["migrate_s"]

    def start_scheduler(self, source_bootstrap: str, target_bootstrap: str, extra: dict | None = None) -> None:
        """The scheduler (LocalExecutor): its task processes inherit the bed's connections (and ``extra``) from it."""
        self._spawn("scheduler", ["scheduler"], {**self.env(source_bootstrap, target_bootstrap), **(extra or {})})

    def start_triggerer(self, source_bootstrap: str, target_bootstrap: str, extra: dict | None = None) -> None:
        """The triggerer (deferrable operators, deadline callbacks)."""
        self._spawn("triggerer", ["triggerer"], {**self.env(source_bootstrap, target_bootstrap), **(extra or {})})

    def check_alive(self, names: tuple[str, ...] | None = None) -> None:
        for name, p in self.procs.items():
            if names is not None and name not in names:
                continue
            if p.poll() is not None:
                raise AssertionError(
                    f"airflow {name} exited with {p.returncode}:\n{log_tail(self.home / f'{name}.log')}"
                )

    def stop(self, grace: float = 8.0) -> None:
        for p in self.procs.values():  # each was started in its own process group (id = its pid)
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace
        for p in self.procs.values():
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in self.procs.values():  # whatever is left of each group (workers, task runners, spark-submit)
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if p.poll() is None:
                p.wait(5)
        self._release.set()
        if self._spawner is not None:
            self._spawner.join(5)

    def login(self, user: str) -> str:
        """A JWT for ``user`` from Airflow's own token endpoint (what the login form gets)."""
        req = urllib.request.Request(
            self.base + "/auth/token",
            method="POST",
            data=json.dumps({"username": user, "password": self.passwords[user]}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=15) as r:
            return json.loads(r.read())["access_token"]

    def get(self, path: str, token: str | None = None, timeout: float = 15.0) -> tuple[int, str]:
        """(status, body) of a plain GET, as ``token``'s holder (None: anonymous)."""
        req = urllib.request.Request(self.base + path, headers={"Authorization": f"Bearer {token}"} if token else {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")

    def api(self, method: str, path: str, body: dict | None = None, timeout: float = 15.0):
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(
            self.base + path, method=method, data=None if body is None else json.dumps(body).encode(), headers=headers
        )
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"null")

    def wait(self, cond, timeout: float, what: str, interval: float = 1.0):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                v = cond()
                if v:
                    return v
            except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError) as e:
                last = e
            time.sleep(interval)
        raise AssertionError(
            f"timed out after {timeout:.0f}s waiting for {what} (last error: {last})\n"
            + "\n".join(f"--- {n} ---\n{log_tail(self.home / f'{n}.log', 25)}" for n in self.procs)
        )


# ------------------------------------------------------------------------------------------ mm2_failover's runs


def run_path(run_id: str) -> str:
    return f"/api/v2/dags/mm2_failover/dagRuns/{quote(run_id, safe='')}"


def hitl_path(run_id: str) -> str:
    return run_path(run_id) + "/taskInstances/approve_plan/-1/hitlDetails"


def answer(af: AirflowStack, run_id: str, option: str) -> dict:
    """Answer the run's approval through Airflow's human-in-the-loop REST API, as the admin; returns the request
    as it was shown (subject, body, options) before the answer."""
    asked = af.api("GET", hitl_path(run_id))
    af.api("PATCH", hitl_path(run_id), {"chosen_options": [option], "params_input": {}})
    return asked


# Airflow 3.3.2 fails the approval task when the answer lands before the scheduler has processed the exit of the
# task process that parked it: the executor's "success" for that try then meets a TI already queued to resume ("state
# changed externally"). That exit came 0.5 s after the park on an idle machine and 5 s after it on a busy one, so a
# fixed delay is not enough: like a person, who never answers that fast, this test answers once the scheduler has
# logged the parked try as finished.
def parked_try_processed(af: AirflowStack, run_id: str) -> bool:
    line = f"TaskInstance Finished: dag_id=mm2_failover, task_id=approve_plan, run_id={run_id},"
    return any(
        line in x and "state=awaiting_input" in x
        for x in (af.home / "scheduler.log").read_text(errors="replace").splitlines()
    )


def ready_to_answer(af: AirflowStack, run_id: str) -> bool:
    return task_states(af, run_id).get("approve_plan", (None,))[0] == "awaiting_input" and parked_try_processed(
        af, run_id
    )


def wait_for_approval_request(af: AirflowStack, run_id: str, timeout: float) -> None:
    af.wait(lambda: ready_to_answer(af, run_id), timeout, f"run {run_id} to wait for its approval", interval=1)


def task_states(af: AirflowStack, run_id: str) -> dict[str, tuple[str, int]]:
    tis = af.api("GET", run_path(run_id) + "/taskInstances")
    return {ti["task_id"]: (ti["state"], ti["try_number"]) for ti in tis["task_instances"]}
