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
    r = cli(
        "--timeout",
        "2",
        "plan",
        "--run-dir",
        str(tmp_path / "run"),
        env={"AIRFLOW_CONN_KAFKA_TARGET": uri, "AIRFLOW_HOME": str(tmp_path / "airflow")},
    )
    assert r.returncode == 4, r.stderr
    assert r.stdout == ""
    assert "WARNING WARNING: no source cluster given" in r.stderr, r.stderr


def test_the_readiness_command_runs_the_readiness_dags_tasks_in_their_order(tmp_path):
    """One pipeline, two entry points: ``python -m mm2_failover readiness`` (and the bench) run exactly the steps the
    mm2_failover_readiness DAG's tasks run, in the DAG's order; its folder is one the Readiness page reads."""

    from mm2_failover import cli

    a = cli.parser().parse_args(
        [
            "--target-bootstrap",
            "127.0.0.1:1",
            "readiness",
            "--archive-stale-intervals",
            "5",
            "--run-dir",
            str(tmp_path / "r"),
        ]
    )
    assert a.archive_stale_intervals == 5
    ctx = type("Ctx", (), {"params": cli.RunParams()})()
    steps = [name for name, _ in cli.readiness_steps(a, ctx)]
    assert ctx.params.dry_run is True  # never writes
    from mm2_failover.dags.readiness_dag import readiness_dag

    dag = readiness_dag()  # the DAG as its factory wires it: a chain, followed from its first task
    [task] = [t for t in dag.tasks if not t.upstream_task_ids]
    names = [task.task_id]
    while task.downstream_task_ids:
        [task] = [dag.get_task(t) for t in task.downstream_task_ids]
        names.append(task.task_id)
    assert steps == names
    r = run_cli("readiness", "--help")
    assert r.returncode == 0 and "--archive-stale-intervals" in r.stdout


def test_version_and_the_name_it_was_run_by(tmp_path):
    import subprocess
    import sys

    from mm2_failover import __version__
    from testbed.localenv import REPO_ROOT

    r = cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"python -m mm2_failover {__version__}"
    script = tmp_path / "mm2-failover"  # as the wheel's console script is named
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom mm2_failover.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    r = subprocess.run(
        [str(script), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(REPO_ROOT / "plugins"), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0 and r.stdout.strip() == f"mm2-failover {__version__}", r.stderr


def test_cluster_options_after_the_command_as_kafkas_tools_take_them(tmp_path):
    r = cli("plan", "--run-dir", str(tmp_path), "--target-bootstrap", "127.0.0.1:1", "--timeout", "2", "-o", "json")
    assert r.returncode == 4, r.stderr
    assert "127.0.0.1:1" in r.stderr and "reachable" in r.stderr
    # one given before the command is kept when the command does not repeat it
    r = cli("--target-bootstrap", "127.0.0.1:1", "plan", "--run-dir", str(tmp_path / "b"), "--timeout", "2")
    assert r.returncode == 4 and "127.0.0.1:1" in r.stderr, r.stderr


def test_a_bad_group_pattern_is_refused_before_any_cluster_work(tmp_path):
    # with the source lost, a bad pattern surfaced only after the target's groups were read and the Spark job ran
    r = cli(
        "--target-bootstrap",
        "127.0.0.1:1",
        "--timeout",
        "30",
        "apply",
        "--source-reachable",
        "no",
        "--run-dir",
        str(tmp_path),
        "--groups-regex",
        "orders-(",
    )
    assert r.returncode == 2, r.stderr
    assert "groups_regex 'orders-(' is not a valid (Python) regular expression" in r.stderr
    # before the run folder is even started (the old code bound its parameters, then asked the clusters)
    assert "reach" not in r.stderr and not list(tmp_path.iterdir())


def test_apply_plan_needs_a_folder_with_a_plan_and_is_one_run_folder(tmp_path):
    r = cli("apply", "--target-bootstrap", "127.0.0.1:1", "--plan", str(tmp_path), "--execute")
    assert r.returncode == 2 and f"--plan {tmp_path}: no plan in that folder" in r.stderr, r.stderr
    r = cli("apply", "--target-bootstrap", "127.0.0.1:1", "--plan", str(tmp_path), "--run-dir", str(tmp_path / "x"))
    assert r.returncode == 2 and "give one" in r.stderr, r.stderr
    r = cli("plan", "-o", "yaml")
    assert r.returncode == 2 and "invalid choice: 'yaml'" in r.stderr


def test_a_wait_on_a_terminal_is_one_status_line_and_elsewhere_log_lines(tmp_path):
    """The drain wait's progress: on a terminal rich's status line, updated in place; in a pipe nothing of it (the
    wait logs a line per check instead)."""
    import os
    import pty
    import subprocess
    import sys

    from testbed.localenv import REPO_ROOT

    script = (
        "import time\nfrom mm2_failover.cli import live_status\n"
        "with live_status('waiting for the drain') as on_wait:\n"
        "    print('tty' if on_wait else 'no tty', flush=True)\n"
        "    if on_wait:\n        on_wait('2 of 3 partition(s) not drained'); time.sleep(0.5)\n"
    )
    env = {"PYTHONPATH": str(REPO_ROOT / "plugins"), "PATH": "/usr/bin:/bin", "TERM": "xterm", "COLUMNS": "120"}
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0 and r.stdout == "no tty\n" and r.stderr == "", r.stderr
    main, sub = pty.openpty()
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=sub, env=env)
    os.close(sub)
    out = p.communicate(timeout=60)[0].decode()
    shown = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(main)
    assert p.returncode == 0 and out == "tty\n"
    assert b"waiting for the drain: 2 of 3 partition(s) not drained" in shown, shown


def test_a_missing_mm2_config_or_bad_topic_pattern_is_refused_before_any_cluster_work(tmp_path):
    r = cli(
        "--target-bootstrap",
        "127.0.0.1:1",
        "--timeout",
        "30",
        "apply",
        "--run-dir",
        str(tmp_path / "a"),
        "--mm2-config",
        str(tmp_path / "mm2.properties"),
    )
    assert r.returncode == 2 and f"mm2_config: no file {tmp_path / 'mm2.properties'}" in r.stderr, r.stderr
    r = cli(
        "--target-bootstrap",
        "127.0.0.1:1",
        "--timeout",
        "30",
        "plan",
        "--run-dir",
        str(tmp_path / "b"),
        "--topics-regex",
        "orders[",
    )
    assert r.returncode == 2 and "topics_regex 'orders[' is not a valid" in r.stderr, r.stderr
    assert not list(tmp_path.iterdir())


def test_a_review_the_cli_keeps_what_the_deployment_and_the_command_line_say(monkeypatch, tmp_path):
    """A review's findings: a --no-x switch inverted where the deployment turned x off; --alias-source-config given
    before and after the command kept only the later; the deployment's alias_policies and source_connections (no
    flags) never reached the CLI's run; apply --plan let a flag typed again with its default value pass silently."""
    from mm2_failover import cli

    cli.flag_defaults.cache_clear()
    (tmp_path / "p").mkdir()
    from mm2_failover.adapters.runfolder import RunFolder

    RunFolder(tmp_path / "p").bind_params("cli", {"groups_regex": "orders-.*"}, ["groups_regex"])
    a = cli.parser().parse_args(["apply", "--plan", str(tmp_path / "p"), "--groups-regex", ".*"])
    a.argv = ["apply", "--plan", str(tmp_path / "p"), "--groups-regex", ".*"]
    monkeypatch.setattr(RunFolder, "has_plan", lambda self: True)
    assert cli.planned_params(a)["groups_regex"] == ".*"  # typed again: the folder then refuses it, naming it
    a.argv = ["apply", "--plan", str(tmp_path / "p")]
    assert cli.planned_params(a)["groups_regex"] == "orders-.*"
    monkeypatch.setenv("AIRFLOW__MM2_FAILOVER__INTERNAL_TOPIC_SEPARATOR_ENABLED", "false")
    monkeypatch.setenv("AIRFLOW__MM2_FAILOVER__SOURCE_ALIAS", "primary,dc2")
    monkeypatch.setenv("AIRFLOW__MM2_FAILOVER__ALIAS_POLICIES", '{"dc2": {"policy": "identity"}}')
    monkeypatch.setenv("AIRFLOW__MM2_FAILOVER__SOURCE_CONNECTIONS", '{"dc2": ""}')
    cli.flag_defaults.cache_clear()
    try:
        ap = cli.parser()
        assert ap.parse_args(["plan"]).internal_topic_separator_enabled is False
        assert ap.parse_args(["plan", "--no-internal-topic-separator"]).internal_topic_separator_enabled is False
        a = ap.parse_args(
            [
                "--alias-source-config",
                "a=",
                "--target-bootstrap",
                "127.0.0.1:1",
                "plan",
                "--alias-source-config",
                "b=",
                "--run-dir",
                str(tmp_path / "r"),
            ]
        )
        a.argv = []
        confs, conns = cli.confs_of(a)
        assert conns == {"a": "", "b": ""}
        ctx = cli.context_of(a, "plan")
        assert ctx.params.alias_policies == {"dc2": {"policy": "identity"}}
        assert ctx.params.source_connections == {"dc2": "", "a": "", "b": "", "primary": ""}
    finally:
        cli.flag_defaults.cache_clear()  # nothing parses after this with the deployment's variables set
