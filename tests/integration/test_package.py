"""Issue 34 item 4, the installable package: pyproject.toml builds mm2_failover as a wheel; in a fresh venv holding
only the runtime lock (requirements-runtime.txt: no test tools) and the wheel - no PYTHONPATH, an empty plugins
folder, a working directory outside the checkout - Airflow finds the plugin through the wheel's ``airflow.plugins``
entry point, the DAG files import the installed package, and the ``mm2-failover`` command runs. Needs no bed; uv
(``.cache/bootstrap``, from ``make setup``) builds the wheel and links the locked packages from its cache."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
UV = REPO / ".cache" / "bootstrap" / "bin" / "uv"
TEST_TOOLS = {"pytest", "pytest-xdist", "pytest-timeout", "hypothesis", "aiosmtpd", "playwright", "check-jsonschema"}


def pins(path: Path) -> dict[str, str]:
    return {
        m.group(1).lower(): m.group(2)
        for line in path.read_text().splitlines()
        if (m := re.match(r"^([A-Za-z0-9_.\-]+)==([^ \\;]+)", line))
    }


def test_the_runtime_lock_is_the_full_locks_pins_without_the_test_tools():
    full, runtime = pins(REPO / "requirements.txt"), pins(REPO / "requirements-runtime.txt")
    assert {k: v for k, v in runtime.items() if full.get(k) != v} == {}, "make lock-runtime"
    assert not TEST_TOOLS & set(runtime)
    assert {"apache-airflow", "confluent-kafka", "pyspark", "pyarrow", "apache-airflow-providers-smtp"} <= set(runtime)


def test_the_wheel_in_a_fresh_venv_gives_airflow_the_plugin_the_dags_and_the_command(tmp_path):
    def run(*a, **kw) -> subprocess.CompletedProcess:
        p = subprocess.run([str(x) for x in a], capture_output=True, text=True, timeout=300, **kw)
        assert p.returncode == 0, f"{a}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
        return p

    dist, venv = tmp_path / "dist", tmp_path / "venv"
    run(UV, "build", "-q", "--wheel", "--out-dir", dist, REPO)
    [wheel] = dist.glob("mm2_failover-*-py3-none-any.whl")
    run(UV, "venv", "-q", "--python", REPO / ".venv" / "bin" / "python", venv)
    import os

    env_uv = {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
        "VIRTUAL_ENV": str(venv),
    }
    run(UV, "pip", "sync", "-q", "--require-hashes", REPO / "requirements-runtime.txt", env=env_uv)
    run(UV, "pip", "install", "-q", "--no-deps", wheel, env=env_uv)
    (tmp_path / "plugins").mkdir()
    (tmp_path / "home").mkdir()
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "AIRFLOW_HOME": str(tmp_path / "home"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(tmp_path / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "false",
        "MM2_FAILOVER_ARTIFACTS": str(tmp_path / "artifacts"),
    }
    plugins = json.loads(run(venv / "bin" / "airflow", "plugins", "-o", "json", env=env, cwd=tmp_path).stdout)
    [mine] = [p for p in plugins if p["name"] == "mm2_failover"]
    assert mine["source"].startswith("mm2-failover==") and "group='airflow.plugins'" in mine["source"], mine["source"]
    assert [a["url_prefix"] for a in mine["fastapi_apps"]] == ["/mm2"]
    script = (
        "import json, mm2_failover; from airflow.dag_processing.dagbag import DagBag; "
        f"b = DagBag(dag_folder={str(REPO / 'dags')!r}); "
        "import importlib.util as u; "
        "print(json.dumps({'module': mm2_failover.__file__, 'dags': sorted(b.dags), 'errors': b.import_errors, "
        "'pytest': u.find_spec('pytest') is not None}))"
    )
    got = json.loads(run(venv / "bin" / "python", "-c", script, env=env, cwd=tmp_path).stdout.strip().splitlines()[-1])
    assert got["module"].startswith(str(venv)) and "site-packages" in got["module"], got["module"]
    assert got["errors"] == {} and got["dags"] == [
        "mm2_failover",
        "mm2_failover_drill",
        "mm2_failover_readiness",
        "mm2_failover_rollback",
        "mm2_sync_archive",
    ], got
    assert got["pytest"] is False  # no test tools in the runtime
    help_text = run(venv / "bin" / "mm2-failover", "--help", env=env, cwd=tmp_path).stdout
    assert "readiness" in help_text and "rollback" in help_text
    assert help_text.startswith("usage: mm2-failover ")  # the name it was run by, not python -m mm2_failover
