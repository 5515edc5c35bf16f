"""Fault points (plugins/mm2_failover/adapters/faults.py): off unless named; ``kill`` really SIGKILLs the process that hits
the point (checked in a child process); with ``MM2_FAILOVER_FAULT_ONCE_DIR`` each point fires once per folder, so a
retry of the same task (which inherits the same environment from Airflow's scheduler) gets past it."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
HIT = "import sys; from mm2_failover.adapters import faults; faults.hit(sys.argv[1]); print('passed', sys.argv[1])"


def run_hit(point: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", HIT, point],
        env={"PYTHONPATH": str(PLUGINS), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_unnamed_points_and_no_setting_do_nothing():
    assert run_hit("apply.after_backup", {}).stdout.strip() == "passed apply.after_backup"
    r = run_hit("apply.after_commits", {"MM2_FAILOVER_FAULT": "kill@apply.after_backup"})
    assert r.returncode == 0 and "passed" in r.stdout


def test_kill_sends_sigkill_to_the_process_every_time_without_a_once_folder():
    env = {"MM2_FAILOVER_FAULT": "kill@apply.after_backup"}
    for _ in range(2):
        r = run_hit("apply.after_backup", env)
        assert r.returncode == -signal.SIGKILL and "passed" not in r.stdout


def test_once_folder_fires_each_point_once_then_lets_retries_through(tmp_path):
    env = {
        "MM2_FAILOVER_FAULT": "kill@apply.after_backup,kill@apply.after_commits",
        "MM2_FAILOVER_FAULT_ONCE_DIR": str(tmp_path),
    }
    assert run_hit("apply.after_backup", env).returncode == -signal.SIGKILL  # the first attempt dies here
    r = run_hit("apply.after_backup", env)  # its retry passes this point ...
    assert r.returncode == 0 and "passed" in r.stdout
    assert run_hit("apply.after_commits", env).returncode == -signal.SIGKILL  # ... and dies at the next one
    r = run_hit("apply.after_commits", env)
    assert r.returncode == 0 and "passed" in r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["apply.after_backup", "apply.after_commits"]


def test_a_pause_lasts_its_seconds_or_ends_once_the_release_file_exists(tmp_path):
    import time

    release = tmp_path / "release"
    env = {"MM2_FAILOVER_FAULT": "sleep2@rollback.locked", "MM2_FAILOVER_FAULT_RELEASE": str(release)}
    t0 = time.monotonic()
    assert run_hit("rollback.locked", env).returncode == 0
    assert time.monotonic() - t0 >= 2  # no file: the whole pause
    child = subprocess.Popen(
        [sys.executable, "-c", HIT, "rollback.locked"],
        env={"PYTHONPATH": str(PLUGINS), **env, "MM2_FAILOVER_FAULT": "sleep60@rollback.locked"},
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(1)
    assert child.poll() is None  # pausing
    t1 = time.monotonic()
    release.touch()
    assert child.wait(10) == 0 and time.monotonic() - t1 < 5  # released, far before its 60 s
    assert "passed" in child.stdout.read()
