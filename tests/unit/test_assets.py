"""Issue 33, "tell the applications": mm2_failover.rules.assets, grouped by rule, on reports built by the real report
builder."""

from __future__ import annotations

import pytest
from airflow.sdk import Asset

from mm2_failover.rules import assets
from mm2_failover.rules.plan import COMMIT, SKIP, Mismatch, Plan, PlanRow
from mm2_failover.rules.report import build_report

ROWS = [
    PlanRow("primary", "orders", "primary.orders", 0, 10, 9, None, 9, COMMIT),
    PlanRow("primary", "orders", "primary.orders", 1, 20, 18, None, 18, COMMIT),
    PlanRow("primary", "orders", "primary.payments", 0, 5, 5, None, 5, COMMIT),
    PlanRow("primary", "idle", "primary.orders", 0, None, None, None, None, SKIP, "no_checkpoint"),
    PlanRow("primary", "broken", "primary.orders", 0, 7, 7, None, 7, COMMIT),
    PlanRow("primary", "refused", "primary.orders", 0, 3, 3, None, 3, COMMIT),
]


def report(dry_run: bool = False, outcome: str | None = None) -> dict:
    committed = {
        "orders": {("primary.orders", 0): 9, ("primary.orders", 1): 18, ("primary.payments", 0): 5},
        "broken": {("primary.orders", 0): 6},
    }
    return build_report(
        dag_id="mm2_failover",
        run_id="manual__1",
        params={},
        plan=Plan(ROWS),
        committed=committed,
        log_end={},
        mismatches=[] if dry_run else [Mismatch("broken", "primary.orders", 0, 7, 6)],
        refused={"refused": "GROUP_SUBSCRIBED_TO_TOPIC"},
        dry_run=dry_run,
        outcome=outcome,
    ).as_dict()


# rule 1
def test_rule1_one_asset_per_group_that_airflow_keeps_as_it_is():
    name, uri = assets.group_asset("team a/orders")
    assert name == "mm2-failover/consumer-group/team a/orders"
    assert uri == "x-mm2-failover://consumer-group/team%20a%2Forders"
    assert Asset(name=name, uri=uri).uri == uri


# rule 2
def test_rule2_only_groups_that_moved_and_read_back_get_an_event():
    got = assets.events(report(), target_cluster_id="abc", target_conn_id="kafka_target")
    assert [e[2]["group"] for e in got] == ["orders"]  # not skipped, not mismatched, not refused


def test_rule2_nothing_for_a_dry_run_or_a_plan_not_applied():
    assert assets.events(report(dry_run=True), target_cluster_id="abc", target_conn_id="t") == []
    assert assets.events(report(dry_run=True, outcome="rejected"), target_cluster_id="abc", target_conn_id="t") == []


# rule 3
def test_rule3_the_event_names_the_target_the_run_the_topics_and_the_offsets():
    ((name, uri, extra),) = assets.events(report(), target_cluster_id="abc", target_conn_id="kafka_target")
    assert (name, uri) == assets.group_asset("orders")
    assert extra == {
        "group": "orders",
        "target_cluster_id": "abc",
        "target_connection": "kafka_target",
        "failover_dag_id": "mm2_failover",
        "failover_run_id": "manual__1",
        "replica_topics": ["primary.orders", "primary.payments"],
        "offsets": {"primary.orders": {"0": 9, "1": 18}, "primary.payments": {"0": 5}},
    }


# rule 4
def test_rule4_every_event_goes_out_in_exactly_one_part_of_at_most_part_size():
    events = [assets.group_asset(f"g{i:04d}") + ({"group": f"g{i:04d}"},) for i in range(1203)]
    args = assets.parts(len(events), size=500)
    assert args == [
        {"index": 0, "of": 3, "size": 500},
        {"index": 1, "of": 3, "size": 500},
        {"index": 2, "of": 3, "size": 500},
    ]
    sent = [e for a in args for e in assets.part(events, a)]
    assert sent == events  # each once, in order
    assert [len(assets.part(events, a)) for a in args] == [500, 500, 203]
    assert assets.parts(0) == [] and len(assets.parts(500, size=500)) == 1
    assert len(assets.parts(501, size=500)) == 2


def test_rule4_few_parts_carry_10k_groups_and_a_part_fits_its_database():
    # one part's events travel in the request that ends its task; Airflow's worker gives a request 5 s. A group no DAG
    # listens to costs the API server next to nothing (rule 5), a listened one ~9-19 ms on PostgreSQL with two parts
    # at once (parts of 2,500 with 500 listened each: 4.65-9.63 s per request, rto-20261129-122327.json); each part
    # is a task instance to schedule and start (~1-1.5 s)
    assert assets.PARTS_AT_ONCE == 2
    for url in ("postgresql://u@h/airflow", "postgresql+psycopg2://u@h/airflow", "mysql+mysqldb://u@h/airflow"):
        assert assets.part_size(url) == assets.PART_SIZE
        assert -(-10_000 // assets.part_size(url)) <= 2 * assets.PARTS_AT_ONCE  # 10k groups: two rounds of parts
    for url in ("sqlite:////home/airflow/airflow.db", "SQLite:///x.db", "", None):
        assert assets.part_size(url) == assets.PART_SIZE_SQLITE < assets.PART_SIZE  # one writer at a time


def test_the_readmes_application_dag_parses_and_listens_to_its_groups_asset(tmp_path):
    """The example DAG in docs/runbook.md ("Telling the applications") is real: Airflow's DagBag loads it, and it is
    scheduled on exactly the Asset a moved group's event names."""
    import re
    from pathlib import Path

    from airflow.dag_processing.dagbag import DagBag

    readme = (Path(__file__).resolve().parents[2] / "docs" / "runbook.md").read_text()
    block = re.search(r"<!-- example-app-dag[^>]*-->\n```python\n(.*?)```", readme, re.S).group(1)
    (tmp_path / "orders_app.py").write_text(block)
    bag = DagBag(dag_folder=str(tmp_path))
    assert bag.import_errors == {}
    dag = bag.dags["orders_app_resume_on_backup"]
    name, uri = assets.group_asset("orders-app")
    assert [(a.name, a.uri) for a in dag.timetable.asset_condition.objects] == [(name, uri)]


def test_rule4_the_deployment_may_set_the_part_size_and_a_bad_value_is_refused_by_name():
    # [mm2_failover] asset_events_per_part: a worker without the database's URL, or a deployment's own measurement
    assert assets.part_size(None, "400") == 400 and assets.part_size("postgresql://h/a", " 40 ") == 40
    assert assets.part_size("sqlite:///x.db", "") == assets.PART_SIZE_SQLITE
    assert assets.part_size(None, "10000") == 10_000
    for bad in ("0", "10001", "many", "2.5"):
        with pytest.raises(ValueError, match=r"asset_events_per_part.*1 to 10,000"):
            assets.part_size(None, bad)


# rule 6
def test_rule6_one_event_names_every_moved_group_and_none_when_no_group_moved():
    many = report()
    events = assets.events(many, target_cluster_id="abc", target_conn_id="kafka_target")
    assert assets.summary(events) == {
        "target_cluster_id": "abc",
        "target_connection": "kafka_target",
        "failover_dag_id": "mm2_failover",
        "failover_run_id": "manual__1",
        "moved_groups": 1,
        "groups": ["orders"],  # verified moves only (rule 2): not broken, refused or idle
    }
    assert assets.summary(assets.events(report(dry_run=True), target_cluster_id="abc", target_conn_id="t")) is None
    name, uri = assets.MOVED_GROUPS
    assert Asset(name=name, uri=uri).uri == uri


# rule 5
def test_rule5_a_group_whose_asset_airflow_refuses_is_named_and_every_other_group_still_goes_out():
    """Airflow refuses an Asset whose name or URI is over 1,500 characters (a Kafka group id may be longer): that one
    group is named in the task's log, and the part's other groups are still sent - a part is 2,500 groups."""
    from mm2_failover import tasks

    long = "g" * 1500
    events = [assets.group_asset(g) + ({"group": g},) for g in ("orders", long, "payments")]
    sent, refused = tasks.group_outlets(events)
    assert [(a.name, a.uri, x["group"]) for a, x in sent] == [
        (n, u, x["group"]) for n, u, x in events if x["group"] != long
    ]
    assert refused == [(long, "Asset name cannot exceed 1500 characters")]


def _task_context(tmp_path, monkeypatch, task):
    """What Airflow gives an announcing task: its run, the operator as it runs, the outlet events' accessors (the
    Task SDK's own), and a run folder under ``tmp_path``."""
    from types import SimpleNamespace

    from airflow.sdk.execution_time.context import OutletEventAccessors

    monkeypatch.setenv("AIRFLOW__MM2_FAILOVER__ARTIFACTS", str(tmp_path))
    dag = SimpleNamespace(dag_id="mm2_failover")
    return {"dag": dag, "run_id": "r1", "params": {}, "task": task, "outlet_events": OutletEventAccessors()}


def _sent(context) -> list[tuple[str, str, dict]]:
    """The outlets and their events as the Task SDK sends them when the task succeeds (task_runner's own)."""
    from airflow.sdk.execution_time.task_runner import _build_asset_profiles, _serialize_outlet_events

    extras = {
        tuple(e["dest_asset_key"].values()): e["extra"] for e in _serialize_outlet_events(context["outlet_events"])
    }
    return [(o.name, o.uri, extras.get((o.name, o.uri))) for o in _build_asset_profiles(context["task"].outlets)]


def _announcements(context, events) -> None:
    import json

    from mm2_failover.adapters.config import run_dir
    from mm2_failover.adapters.runfolder import ANNOUNCEMENTS, announcement_part_name

    folder = run_dir("mm2_failover", context["run_id"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ANNOUNCEMENTS).write_text(json.dumps([list(e) for e in events]))
    (folder / announcement_part_name({"index": 0})).write_text(json.dumps([list(e) for e in events]))


# rules 5-6, the tasks as Airflow runs them
def test_rule5_a_part_sends_each_accepted_groups_asset_as_an_outlet_with_its_event_and_leaves_the_refused_out(
    tmp_path, monkeypatch
):
    from airflow.sdk import BaseOperator

    from mm2_failover import tasks

    context = _task_context(tmp_path, monkeypatch, BaseOperator(task_id="announce_moved_groups"))
    groups = ["orders", "g" * 1500, "nul\x00group", "payments"]
    events = [assets.group_asset(g) + ({"group": g},) for g in groups]
    _announcements(context, events)
    assert tasks.announce_moved_groups(context, {"index": 0, "of": 1, "size": 2500}) == 2
    assert _sent(context) == [(n, u, x) for n, u, x in events if x["group"] in ("orders", "payments")]


def test_rule6_the_leaf_sends_one_event_naming_every_moved_group_on_its_declared_outlet_and_skips_when_none(
    tmp_path, monkeypatch
):
    from airflow.sdk.exceptions import AirflowSkipException

    from mm2_failover import tasks
    from mm2_failover.dags.failover_dag import failover_dag

    leaf = failover_dag().get_task("announce_all_moved_groups")
    context = _task_context(tmp_path, monkeypatch, leaf)
    events = assets.events(report(), target_cluster_id="abc", target_conn_id="kafka_target")
    _announcements(context, events)
    assert tasks.announce_all_moved_groups(context) == 1
    ((name, uri, extra),) = _sent(context)
    assert (name, uri) == assets.MOVED_GROUPS and extra == assets.summary(events)
    _announcements(context, [])
    with pytest.raises(AirflowSkipException):
        tasks.announce_all_moved_groups(_task_context(tmp_path, monkeypatch, leaf))
