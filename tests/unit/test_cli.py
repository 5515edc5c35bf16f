"""The command line's contract: help, and exit codes a script can rely on (no Kafka needed for these)."""

import json

from testbed.localenv import run_cli


def cli(*args, env=None):
    return run_cli(*args, env=env, timeout=120, quiet_s=None)


def test_help_explains_every_command():
    r = cli("--help")
    assert r.returncode == 0
    for cmd in ("plan", "apply", "verify", "rollback"):
        assert cmd in r.stdout
    assert "Exit codes" in r.stdout


def test_no_target_is_a_usage_error():
    r = cli("plan", "--run-dir", "/tmp/mm2-cli-none")
    assert r.returncode == 2 and "no target cluster" in r.stderr


def test_unreachable_target_exits_4_naming_it(tmp_path):
    r = cli("--target-bootstrap", "127.0.0.1:1", "--timeout", "2", "plan", "--run-dir", str(tmp_path))
    assert r.returncode == 4, r.stderr
    assert "127.0.0.1:1" in r.stderr and "reachable" in r.stderr


def test_target_from_the_airflow_connection_variable(tmp_path):
    conn = json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:2"}})
    r = cli("--timeout", "2", "verify", "--run-dir", str(tmp_path), env={"AIRFLOW_CONN_KAFKA_TARGET": conn})
    assert r.returncode == 2 and "no plan" in r.stderr


def test_missing_backup_is_a_usage_error(tmp_path):
    r = cli("--target-bootstrap", "127.0.0.1:1", "--timeout", "2", "rollback", "--backup", str(tmp_path / "nope.json"))
    assert r.returncode == 2 and "no backup" in r.stderr


def test_logging_stays_on_stderr_when_a_connection_is_read_the_airflow_way(tmp_path):
    # a URI-form connection is parsed by Airflow, whose first import takes over logging and sends it to stdout,
    # where the CLI prints its results; the CLI's warnings must stay on stderr, in its format
    uri = "kafka://?bootstrap.servers=127.0.0.1%3A1"
    r = cli("--timeout", "2", "plan", "--run-dir", str(tmp_path / "run"),
            env={"AIRFLOW_CONN_KAFKA_TARGET": uri, "AIRFLOW_HOME": str(tmp_path / "airflow")})
    assert r.returncode == 4, r.stderr
    assert r.stdout == ""
    assert "WARNING WARNING: no source cluster given" in r.stderr, r.stderr


def test_the_readiness_command_runs_the_readiness_dags_tasks_in_their_order(tmp_path):
    """One pipeline, two entry points: ``python -m mm2_failover readiness`` (and the bench) run exactly the steps the
    mm2_failover_readiness DAG's tasks run, in the DAG's order; its folder is one the Readiness page reads."""
    import ast
    from pathlib import Path

    from mm2_failover import cli

    a = cli.parser().parse_args(["--target-bootstrap", "127.0.0.1:1", "readiness", "--archive-stale-intervals", "5",
                                 "--run-dir", str(tmp_path / "r")])
    assert a.archive_stale_intervals == 5
    ctx = type("Ctx", (), {"params": cli.RunParams()})()
    steps = [name for name, _ in cli.readiness_steps(a, ctx)]
    assert ctx.params.dry_run is True  # never writes
    dag = Path(__file__).resolve().parents[2] / "dags" / "mm2_failover_readiness.py"
    chain = next(n for n in ast.walk(ast.parse(dag.read_text())) if isinstance(n, ast.Expr)
                 and isinstance(n.value, ast.BinOp))
    wired = []
    node = chain.value
    while isinstance(node, ast.BinOp):
        wired.insert(0, node.right)
        node = node.left
    wired.insert(0, node)
    names = [x.func.id if isinstance(x, ast.Call) else "compute_latest_checkpoints" for x in wired]
    assert steps == names
    r = run_cli("readiness", "--help")
    assert r.returncode == 0 and "--archive-stale-intervals" in r.stdout
