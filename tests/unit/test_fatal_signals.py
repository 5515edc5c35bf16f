"""A crash of the test process must say where it happened, not hang: Airflow's DAG importer leaves a Python-level
SIGSEGV handler installed (a segfault in the main thread then spins forever, with no output, until CI's limit);
tests/conftest.py arms faulthandler again before each test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = """
def test_a_dag_parsed_in_this_process():
    import signal
    from airflow.dag_processing.dagbag import DagBag

    DagBag(dag_folder={dags!r})
    assert callable(signal.getsignal(signal.SIGSEGV))  # what the importer leaves behind


def test_b_segfault_in_the_main_thread():
    import ctypes

    ctypes.string_at(0)
"""


def test_a_segfault_after_a_dag_parse_crashes_with_the_stacks_instead_of_hanging(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE.format(dags=str(REPO / "dags")))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "plugins"), str(REPO)]),
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
    }
    try:
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "tests.conftest",
                "-p",
                "no:cacheprovider",
                "-q",
                "--rootdir",
                str(tmp_path),
                "-c",
                os.devnull,
                str(probe),
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(
            "the segfaulting test process hung instead of crashing (SIGSEGV handled in Python)"
        ) from None
    assert r.returncode == -11, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    out = r.stdout + r.stderr
    assert "Fatal Python error: Segmentation fault" in out and "test_b_segfault_in_the_main_thread" in out, out[-3000:]
