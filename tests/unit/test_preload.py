"""The executors' workers import the heavy third-party modules once, before they fork tasks
(:mod:`mm2_failover.preload`): the LocalExecutor's through Airflow's own start-method setting, a Celery worker's
through its configuration (:mod:`mm2_failover.celery_config`) - each checked in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Airflow applies the settings (set_component_mp_start_method, as `airflow scheduler` does), then a process is
# started the way the LocalExecutor starts its workers (multiprocessing.Process): it reports what it has without
# importing anything itself. The parent imports none of it.
CHILD = """
import multiprocessing, os, sys
sys.path.insert(0, {plugins!r})
from mm2_failover.adapters import config
os.environ.update(config.preload_settings())
from airflow.utils.process_utils import set_component_mp_start_method
set_component_mp_start_method("scheduler")

def report(q):
    import sys
    q.put(sorted(m for m in {modules!r} if m in sys.modules))

if __name__ == "__main__":
    q = multiprocessing.Queue()
    p = multiprocessing.Process(target=report, args=(q,))
    p.start()
    print("child:", q.get(timeout=120))
    p.join()
    print("start method:", multiprocessing.get_start_method())
    print("parent:", sorted(m for m in {modules!r} if m in sys.modules))
"""


def test_the_scheduler_settings_make_its_workers_start_with_the_listed_modules(tmp_path):
    from mm2_failover import preload
    from mm2_failover.adapters import config

    assert config.preload_settings() == {
        "AIRFLOW__SCHEDULER__MP_START_METHOD": "forkserver",
        "AIRFLOW__SCHEDULER__MP_FORKSERVER_PRELOAD": preload.__name__,
        "AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS": "mm2_failover.celery_config.CELERY_CONFIG",
    }
    modules = ["pandas", "pyarrow.parquet", "confluent_kafka", "airflow.sdk.execution_time.task_runner"]
    assert set(modules) <= set(preload.MODULES)
    script = tmp_path / "child.py"  # a file: the forkserver's children re-import __main__ by path
    script.write_text(CHILD.format(plugins=str(REPO / "plugins"), modules=modules))
    env = {"PYTHONPATH": str(REPO / "plugins"), "AIRFLOW_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in out.stdout.strip().splitlines()[-3:])
    assert lines["start method"] == "forkserver"
    assert lines["child"] == str(sorted(modules))
    # what the child has came from the preload, not from its parent (which has Airflow's task runner by itself)
    assert lines["parent"] == "['airflow.sdk.execution_time.task_runner']"


def test_only_third_party_modules_are_preloaded():
    # a task must run the project's code on disk, not what the scheduler loaded when it started
    from mm2_failover import preload

    assert not [m for m in preload.MODULES if m.split(".")[0] == "mm2_failover"]


# `airflow celery worker` takes Airflow's Celery app (celery_executor.app); a Celery worker's WorkController starts
# with app.loader.init_worker() in its main process, before it forks its pool: what it imports there, every pool child
# and every task forked from one has.
CELERY = """
import os, sys
sys.path.insert(0, {plugins!r})
from mm2_failover.adapters import config
os.environ.update(config.preload_settings())
os.environ["AIRFLOW__CELERY__BROKER_URL"] = "redis://127.0.0.1:1/7"
from airflow.providers.celery.executors.celery_executor import app
print("before:", sorted(m for m in {modules!r} if m in sys.modules))
print("imports:", list(app.conf.imports))
print("broker:", app.conf.broker_url)
app.loader.init_worker()
print("after:", sorted(m for m in {modules!r} if m in sys.modules))
"""


def test_a_celery_worker_imports_the_listed_modules_before_it_forks_its_pool(tmp_path):
    """The CeleryExecutor's workers fork their own pool, which the scheduler's settings do not reach: the Celery
    configuration names the preload in ``imports`` (Airflow's defaults kept: the broker comes from [celery])."""
    modules = ["pandas", "pyarrow.parquet", "confluent_kafka", "fastapi"]
    script = tmp_path / "celery_child.py"
    script.write_text(CELERY.format(plugins=str(REPO / "plugins"), modules=modules))
    env = {"PYTHONPATH": str(REPO / "plugins"), "AIRFLOW_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in out.stdout.strip().splitlines()[-4:])
    assert lines["before"] == "[]", lines
    assert lines["imports"] == "['mm2_failover.preload']" and lines["broker"] == "redis://127.0.0.1:1/7"
    assert lines["after"] == str(sorted(modules))
