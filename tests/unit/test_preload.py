"""The scheduler's executor workers import the heavy third-party modules once, before they fork tasks
(:mod:`mm2_failover.preload`): checked through Airflow's own start-method setting, in a fresh interpreter."""

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
from mm2_failover import config
os.environ.update(config.scheduler_preload_settings())
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
    from mm2_failover import config, preload

    assert config.scheduler_preload_settings() == {"AIRFLOW__SCHEDULER__MP_START_METHOD": "forkserver",
                                                   "AIRFLOW__SCHEDULER__MP_FORKSERVER_PRELOAD": preload.__name__}
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
