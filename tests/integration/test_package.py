"""Issues 34 item 4 and 52 item 2, the installable provider: pyproject.toml builds mm2_failover as a wheel; in a fresh
venv holding Airflow 3.3.2 (installed with the lock's pins as constraints) and the wheel with one extra - no
PYTHONPATH, an empty plugins folder, a working directory outside the checkout - Airflow lists the provider (its
``apache_airflow_provider`` entry point), finds the plugin (its ``airflow.plugins`` entry point) and serves its pages,
the DAG files of three lines import the installed package, and the ``mm2-failover`` command runs. Needs no bed; uv
(``.cache/bootstrap``, from ``make setup``) builds the wheel and links the packages from its cache."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import mm2_failover

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


def _constraints(tmp_path: Path) -> Path:
    """The runtime lock's pins as a constraints file (Airflow publishes its constraints per release on a host this
    machine does not reach; the lock holds the same pins for Airflow 3.3.2 and its providers)."""
    out = tmp_path / "constraints.txt"
    out.write_text("".join(f"{k}=={v}\n" for k, v in sorted(pins(REPO / "requirements-runtime.txt").items())))
    return out


def test_the_provider_in_a_fresh_venv_gives_airflow_the_provider_the_plugin_the_dags_and_the_command(tmp_path):
    """Issue 52 item 2: Airflow 3.3.2 installed with constraints, then the wheel with one extra (``s3``): ``airflow
    providers list`` shows the provider, its connection type and configuration section; the DAG files of the
    documented three lines import the installed package (no checkout, no PYTHONPATH); what the extras hold is not
    installed unless asked for (no PySpark here); the plugin's pages answer in a real api-server."""

    def run(*a, **kw) -> subprocess.CompletedProcess:
        p = subprocess.run([str(x) for x in a], capture_output=True, text=True, timeout=300, **kw)
        assert p.returncode == 0, f"{a}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
        return p

    dist, venv = tmp_path / "dist", tmp_path / "venv"
    run(UV, "build", "-q", "--wheel", "--out-dir", dist, REPO)
    [wheel] = dist.glob("mm2_failover-*-py3-none-any.whl")
    run(UV, "venv", "-q", "--python", REPO / ".venv" / "bin" / "python", venv)
    env_uv = {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
        "VIRTUAL_ENV": str(venv),
    }
    constraints = _constraints(tmp_path)
    run(UV, "pip", "install", "-q", "apache-airflow==3.3.2", "-c", constraints, env=env_uv)
    run(UV, "pip", "install", "-q", f"mm2-failover[s3] @ {wheel.as_uri()}", "-c", constraints, env=env_uv)
    (tmp_path / "plugins").mkdir()
    (tmp_path / "home").mkdir()
    dags = tmp_path / "dags"
    dags.mkdir()
    for name, factory in FACTORIES.items():  # the three lines docs/operations.md shows, nothing from the checkout
        (dags / f"{name}.py").write_text(
            f"# the {name} Airflow DAG, built by the installed package\n"
            f"from mm2_failover.dags.{factory} import {factory}\n\ndag = {factory}()\n"
        )
    port = free_port()
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "AIRFLOW_HOME": str(tmp_path / "home"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(tmp_path / "plugins"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "false",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "true",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "MM2_FAILOVER_ARTIFACTS": str(tmp_path / "artifacts"),
    }
    providers = json.loads(
        run(venv / "bin" / "airflow", "providers", "list", "-o", "json", env=env, cwd=tmp_path).stdout
    )
    assert [p["version"] for p in providers if p["package_name"] == "mm2-failover"] == [mm2_failover.__version__]
    conns = run(venv / "bin" / "airflow", "providers", "hooks", "-o", "json", env=env, cwd=tmp_path).stdout
    assert "mm2_failover_notify" in conns and "NotifyConnectionHook" in conns
    config = run(venv / "bin" / "airflow", "config", "list", "--section", "mm2_failover", env=env, cwd=tmp_path)
    assert "source_alias" in config.stdout and "notify_email" in config.stdout, config.stdout[-2000:]
    plugins = json.loads(run(venv / "bin" / "airflow", "plugins", "-o", "json", env=env, cwd=tmp_path).stdout)
    [mine] = [p for p in plugins if p["name"] == "mm2_failover"]
    assert mine["source"].startswith("mm2-failover==") and "group='airflow.plugins'" in mine["source"], mine["source"]
    assert [a["url_prefix"] for a in mine["fastapi_apps"]] == ["/mm2"]
    script = (
        "import json, mm2_failover; from airflow.dag_processing.dagbag import DagBag; "
        f"b = DagBag(dag_folder={str(dags)!r}); "
        "import importlib.metadata as md; "
        "has = lambda d: bool([x for x in md.distributions() if x.metadata['Name'].lower() == d]); "
        "print(json.dumps({'module': mm2_failover.__file__, 'dags': sorted(b.dags), 'errors': b.import_errors, "
        "'missing': [d for d in ('pytest', 'pyspark') if not has(d)], 's3fs': has('s3fs')}))"
    )
    got = json.loads(run(venv / "bin" / "python", "-c", script, env=env, cwd=tmp_path).stdout.strip().splitlines()[-1])
    assert got["module"].startswith(str(venv)) and "site-packages" in got["module"], got["module"]
    assert got["errors"] == {} and got["dags"] == sorted(DAG_IDS), got
    # only the extra asked for: no test tools, no PySpark (the Spark provider's thin Connect client is another package)
    assert got["missing"] == ["pytest", "pyspark"] and got["s3fs"], got
    help_text = run(venv / "bin" / "mm2-failover", "--help", env=env, cwd=tmp_path).stdout
    assert "readiness" in help_text and "rollback" in help_text
    assert help_text.startswith("usage: mm2-failover ")  # the name it was run by, not python -m mm2_failover
    run(venv / "bin" / "airflow", "db", "migrate", env=env, cwd=tmp_path)
    server = subprocess.Popen(
        [str(venv / "bin" / "airflow"), "api-server", "-H", "127.0.0.1", "-p", str(port), "-w", "1"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "api-server.log").open("w"),
    )
    try:
        pages = {path: fetch_when_up(f"http://127.0.0.1:{port}/mm2{path}", server) for path in ("/", "/readiness")}
    finally:
        server.terminate()
        server.wait(30)
    for (path, (status, body)), title in zip(pages.items(), ("mm2-failover", "Readiness: if we failed over now")):
        assert status == 200 and f"<title>{title}" in body, (
            path,
            status,
            body[:300],
            tail(tmp_path / "api-server.log"),
        )


#: the DAG files a deployment writes: file name -> the factory (mm2_failover/dags/<factory>.py)
FACTORIES = {
    "mm2_failover_dag": "failover_dag",
    "mm2_failover_drill": "drill_dag",
    "mm2_failover_readiness": "readiness_dag",
    "mm2_failover_rollback": "rollback_dag",
    "mm2_sync_archive": "sync_archive_dag",
}
DAG_IDS = ["mm2_failover", "mm2_failover_drill", "mm2_failover_readiness", "mm2_failover_rollback", "mm2_sync_archive"]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch_when_up(url: str, server: subprocess.Popen, seconds: float = 120) -> tuple[int, str]:
    """(status, body) of ``url`` once the server answers (it was started a moment ago), within ``seconds``."""
    import time
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(1)


def tail(path: Path, n: int = 3000) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else ""
