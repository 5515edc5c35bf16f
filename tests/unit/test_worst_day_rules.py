"""Issue "Trust on the worst day", the pure parts: each test names the item it guards."""

from __future__ import annotations

import json
import os

import pytest

from mm2_failover.rules import plan as planmod
from mm2_failover.rules.checkpoints import Checkpoint
from mm2_failover.rules.naming import ReplicationPolicy
from mm2_failover.rules.plan import PartitionBounds
from testbed.localenv import run_cli

# ------------------------------------------------------------------------------------------ 4. two aliases, one key


def test_two_aliases_checkpointing_the_same_replica_partition_are_refused_naming_both_answers():
    cps = [
        Checkpoint("g", "orders", 0, 25, 20, source_alias="dc1"),
        Checkpoint("g", "orders", 0, 110, 100, source_alias="dc2"),
    ]
    with pytest.raises(planmod.PlanError) as e:
        planmod.build_plan(cps, {("orders", 0): PartitionBounds(0, 200)}, {}, {"orders": 1})
    msg = str(e.value)
    assert "g orders[0]" in msg and "dc1" in msg and "dc2" in msg and "20" in msg and "100" in msg


# ------------------------------------------------------------------------------------------ 6. MM2's own topic rules


@pytest.mark.parametrize(
    "topic",
    [
        "user-heartbeats",
        "orders_replica",
        "db-replica",
        "orders.replica",
        "heartbeats-x",
        "connect-orders",
        "mm2-orders",
        "payments.internal-audit",
    ],
)
def test_topics_that_merely_look_internal_are_data_topics(topic):
    p = ReplicationPolicy("primary")
    assert not p.is_internal_topic(topic)
    assert not p.is_internal_topic(p.replica_topic(topic))


@pytest.mark.parametrize(
    "topic",
    [
        "__consumer_offsets",
        ".hidden",
        "primary.checkpoints.internal",
        "mm2-offsets.primary.internal",
        "mm2-offset-syncs.backup.internal",
        "heartbeats",
        "primary.heartbeats",
        "dc1.primary.heartbeats",
    ],
)
def test_mm2_internal_topics_are_internal(topic):
    assert ReplicationPolicy("primary").is_internal_topic(topic)


# ------------------------------------------------------------------------------------------ 17. separators


def test_internal_topic_separator_disabled_keeps_dots_for_mm2_topics():
    p = ReplicationPolicy("legacy", separator="_", internal_topic_separator_enabled=False)
    assert p.replica_topic("orders") == "legacy_orders"
    assert p.checkpoints_topic == "legacy.checkpoints.internal"
    assert p.is_internal_topic("legacy.checkpoints.internal")


def test_multi_character_separator():
    from mm2_failover.rules.naming import checkpoint_topic_aliases

    p = ReplicationPolicy("dc", separator="--")
    assert p.checkpoints_topic == "dc--checkpoints--internal"
    assert p.source_topic("dc--orders") == "orders"
    assert checkpoint_topic_aliases(["dc--checkpoints--internal", "primary.checkpoints.internal", "orders"]) == {
        "dc--checkpoints--internal": "dc",
        "primary.checkpoints.internal": "primary",
    }


# ------------------------------------------------------------------------------------------ 3. one selection


def test_group_selection_is_one_python_function_with_full_match():
    from mm2_failover.rules.selection import GroupSelection

    s = GroupSelection(r"(?P<app>\w+)-app|app-.*", "app-skip")
    assert s.selects("caf\u00e9-app")
    assert not s.selects("app-x\n")  # Java's $ would match before the final line terminator
    assert not s.selects("app-skip")
    assert s.select(["a-app", "b", "app-1", "app-skip"]) == ["a-app", "app-1"]
    with pytest.raises(ValueError, match="groups_regex"):
        GroupSelection("", "")
    with pytest.raises(ValueError, match="groups_exclude_regex"):
        GroupSelection(".*", "(")


# ------------------------------------------------------------------------------------------ 2. reachability


def test_reachability_is_decided_by_explicit_rules():
    from mm2_failover.rules.reachability import DISASTER, REACHABLE, SourceRequiredUnreachable, decide

    assert decide("no", []) == DISASTER
    assert decide("yes", ["ok"]) == REACHABLE
    assert decide("detect", ["unreachable", "ok"]) == REACHABLE
    # issue 33: disaster mode is never entered by itself - a mistyped bootstrap looks exactly like a lost cluster
    with pytest.raises(SourceRequiredUnreachable, match="never enters disaster mode by itself") as e:
        decide("detect", ["unreachable", "unreachable", "unreachable"])
    assert "source_reachable=no" in str(e.value) and "3 tries" in str(e.value)
    with pytest.raises(Exception, match="source_reachable=yes"):
        decide("yes", ["unreachable", "unreachable", "unreachable"])
    with pytest.raises(ValueError):
        decide("maybe", [])


def test_a_run_that_asks_before_it_writes_plans_in_unconfirmed_disaster_mode_and_nothing_else_does():
    """Issue 33, rule 3a: under detect, a source that never answered puts a run that asks a human before it writes
    (the failover DAG) in disaster mode *unconfirmed* - and its approval asks. ``yes`` still fails; ``no`` and any
    answer are decisions that need nobody's confirmation."""
    from mm2_failover.rules.reachability import DISASTER, REACHABLE, SourceRequiredUnreachable, confirmed, decide

    lost = ["unreachable"] * 3
    assert decide("detect", lost, asks=True) == DISASTER and not confirmed("detect", DISASTER)
    with pytest.raises(SourceRequiredUnreachable):
        decide("yes", lost, asks=True)
    assert decide("detect", ["unreachable", "ok"], asks=True) == REACHABLE and confirmed("detect", REACHABLE)
    assert confirmed("no", decide("no", [], asks=True)) and confirmed("yes", REACHABLE)


# ------------------------------------------------------------------------------------------ 13. durable writes


def test_artifacts_are_written_atomically_and_durably(tmp_path, monkeypatch):
    from mm2_failover.adapters import runfolder

    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd))[1])
    runfolder.write_json(tmp_path / "backup.json", {"a": 1})
    assert json.loads((tmp_path / "backup.json").read_text()) == {"a": 1}
    assert any(s.endswith("backup.json.tmp") or s.endswith("backup.json") for s in synced)  # the file
    assert str(tmp_path) in synced  # and the directory entry


# ------------------------------------------------------------------------------------------ 20. lost to retention


def test_lost_to_retention_is_an_upper_bound_and_exact_where_the_source_commit_is_known():
    from mm2_failover.rules.plan import CLAMP, Plan, PlanRow
    from mm2_failover.rules.report import build_report, render_markdown

    # checkpoint 10 below log start 40: at most 30 records lost; where the group's source commit is known, the
    # pipeline finds the source offset of the replica's first record, and only what the group had not read counts
    rows = [
        PlanRow("primary", "g", "primary.t", 0, 15, 10, None, 40, CLAMP, "retention_gap", 40, 100, 30),
        PlanRow("primary", "g", "primary.t", 1, 15, 10, None, 40, CLAMP, "retention_gap", 40, 100, 30),
    ]
    rep = build_report(
        dag_id="d",
        run_id="r",
        params={},
        plan=Plan(rows),
        committed={"g": {("primary.t", 0): 40, ("primary.t", 1): 40}},
        log_end={("primary.t", 0): 100, ("primary.t", 1): 100},
        mismatches=[],
        lost_exact={("g", "primary.t", 0): 0},
    )
    t = rep.totals
    assert t["records_lost_to_retention_upper_bound"] == 60
    assert t["records_lost_to_retention"] == 30  # partition 0 exact (0), partition 1 only bounded (30)
    md = render_markdown(rep)
    assert "at most" in md


# ------------------------------------------------------------------------------------------ 12, 18. CLI input


def cli(*args, env=None, timeout=60):
    return run_cli(*args, env=env, timeout=timeout, quiet_s=None)


@pytest.mark.parametrize(
    "content, words",
    [
        ('["bootstrap.servers", "h:9092"]', ["JSON object"]),
        ('"h:9092"', ["JSON object"]),
        ('{"bootstrap.servers": "h:9092",}', ["not valid JSON", "line 1"]),
    ],
)
def test_bad_config_files_are_named_with_exit_2(tmp_path, content, words):
    f = tmp_path / "target.json"
    f.write_text(content)
    r = cli("--target-config", str(f), "plan", "--run-dir", str(tmp_path / "run"))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert str(f) in r.stderr and "Traceback" not in r.stderr
    for w in words:
        assert w in r.stderr


def test_missing_config_file_is_named(tmp_path):
    r = cli("--target-config", str(tmp_path / "nope.json"), "plan")
    assert r.returncode == 2 and "nope.json" in r.stderr and "Traceback" not in r.stderr


def test_uri_form_connection_variable_is_understood(tmp_path):
    r = cli(
        "--timeout",
        "2",
        "verify",
        "--run-dir",
        str(tmp_path),
        env={"AIRFLOW_CONN_KAFKA_TARGET": "kafka://?bootstrap.servers=127.0.0.1%3A2"},
    )
    assert r.returncode == 2 and "no plan" in r.stderr, r.stderr


@pytest.mark.parametrize("timeout", ["-1", "0", "abc"])
def test_timeout_must_be_positive(tmp_path, timeout):
    r = cli("--target-bootstrap", "127.0.0.1:1", "--timeout", timeout, "plan", "--run-dir", str(tmp_path), timeout=30)
    assert r.returncode == 2 and "--timeout" in r.stderr


def test_unknown_client_property_is_a_configuration_error_naming_it(tmp_path):
    f = tmp_path / "target.json"
    f.write_text(json.dumps({"bootstrap.servers": "127.0.0.1:1", "bootstrap.server": "x"}))
    r = cli("--target-config", str(f), "--timeout", "2", "plan", "--run-dir", str(tmp_path / "run"))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "bootstrap.server" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("content", ["{not json", '{"groups": 5}', "[]"])
def test_malformed_backup_is_named(tmp_path, content):
    b = tmp_path / "backup.json"
    b.write_text(content)
    r = cli("--target-bootstrap", "127.0.0.1:1", "--timeout", "2", "rollback", "--backup", str(b))
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert str(b) in r.stderr and "Traceback" not in r.stderr
