"""The DAG files as Airflow's DagBag loads them: wiring, retries, sensors, params, and no heavy imports."""

import subprocess
import sys
from pathlib import Path

import pytest

from mm2_failover.rules import assets

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bag():
    from airflow.dag_processing.dagbag import DagBag

    b = DagBag(dag_folder=str(REPO / "dags"))
    assert b.import_errors == {}
    return b


def test_failover_dag_has_its_tasks_in_order_all_retryable_but_the_approval(bag):
    dag = bag.dags["mm2_failover"]
    order = [
        "preflight_audit",
        "verify_producers_drained",
        "capture_end_offsets",
        "compute_latest_checkpoints",
        "check_groups_empty",
        "build_plan",
        "approve_plan",
        "apply_group_offsets",
        "verify_group_offsets",
    ]
    announcing = ["announcement_parts", "announce_moved_groups", "announce_all_moved_groups"]
    assert sorted(dag.task_ids) == sorted(order + announcing)
    for up, down in zip(order, order[1:]):
        assert dag.get_task(down).upstream_task_ids == {up}
    assert all(dag.get_task(t).retries > 0 for t in order if t != "approve_plan")
    # the Asset events after verify, mapped over parts that verify pushes (mm2_failover/rules/assets.py rule 4)
    announce = dag.get_task("announce_moved_groups")
    assert dag.get_task("announcement_parts").upstream_task_ids == {"verify_group_offsets"}
    assert announce.upstream_task_ids == {"announcement_parts"} and announce.retries > 0
    assert "MappedOperator" in type(announce).__name__ and announce.downstream_task_ids == set()
    assert announce.partial_kwargs["max_active_tis_per_dagrun"] == assets.PARTS_AT_ONCE == 2  # assets.py rule 4
    assert dag.get_task("verify_group_offsets").outlets == []  # verify's outcome does not depend on them
    # rules 5-6: the parts' outlets are their groups' Assets, added when they run; the event naming every moved group
    # is a leaf task's own declared outlet (an outlet Airflow refuses fails only that task)
    assert announce.partial_kwargs.get("outlets", []) == [] and dag.get_task("announcement_parts").outlets == []
    named = dag.get_task("announce_all_moved_groups")
    assert [(a.name, a.uri) for a in named.outlets] == [assets.MOVED_GROUPS] and named.retries > 0
    assert named.upstream_task_ids == {"announcement_parts"} and named.downstream_task_ids == set()
    # ... and ahead of other DAGs' tasks: the listeners' runs the first parts' events start must not take the
    # executor's slots from the later parts (a manual run has no logical date: last among equal weights)
    for t in (announce, named):
        weight = t.partial_kwargs if "Mapped" in type(t).__name__ else vars(t)
        assert (weight["priority_weight"], str(weight["weight_rule"])) == (assets.PRIORITY_WEIGHT, "absolute"), t
    # issue 33: Airflow's own approval operator, asked once (a timeout is final), with no form fields of its own
    approve = dag.get_task("approve_plan")
    assert "ApprovalOperator" in [c.__name__ for c in type(approve).__mro__] and approve.retries == 0
    assert approve.serialized_params == {} and approve.options == ["Approve", "Reject"]
    assert dag.get_task("verify_producers_drained").mode == "reschedule"
    assert dag.get_task("check_groups_empty").mode == "reschedule"
    # the provider's operator underneath (the spark-submit route); mm2_failover.operators.spark_job adds Connect's
    assert "SparkSubmitOperator" in [c.__name__ for c in dag.get_task("compute_latest_checkpoints").__class__.__mro__]


def test_readiness_dag_reads_on_the_archives_interval_and_never_writes(bag):
    """Issue 33 item 1: the readiness check runs on the archive's interval, read-only - no approval, no apply, no
    parameter about writing - and its own knob for a stale archive."""
    from mm2_failover.dag_defaults import INTERVAL_SCHEDULE

    dag = bag.dags["mm2_failover_readiness"]
    order = [
        "preflight_audit",
        "measure_replication_lag",
        "capture_end_offsets",
        "compute_latest_checkpoints",
        "assess_readiness",
    ]
    assert sorted(dag.task_ids) == sorted(order)
    for up, down in zip(order, order[1:]):
        assert dag.get_task(down).upstream_task_ids == {up}
    assert bag.dags["mm2_sync_archive"].schedule == dag.schedule == INTERVAL_SCHEDULE
    names = set(dag.params.keys())
    assert not names & {"dry_run", "require_approval", "lock_wait_seconds", "approval_timeout_seconds"}
    assert {"groups_regex", "rpo_seconds", "translation", "archive_stale_intervals"} <= names


ON_DEMAND = {"mm2_failover", "mm2_failover_rollback"}


def test_the_on_demand_dags_start_unpaused_so_a_trigger_runs_and_the_scheduled_ones_wait_for_an_operator(bag):
    """Issue 33: a DAG without a schedule only runs when someone triggers it - during an incident, through the REST
    API or an automation - and a paused one leaves that run queued. The scheduled ones (the archive every 5 minutes,
    the monthly drill) start paused: an operator turns them on with MM2 (README, "Install into an existing Airflow")."""
    assert {d for d, dag in bag.dags.items() if dag.schedule is None} == ON_DEMAND
    for dag_id, dag in bag.dags.items():
        assert dag.is_paused_upon_creation is (dag_id not in ON_DEMAND), dag_id


def test_every_task_has_an_execution_timeout_from_the_one_table(bag):
    """Issue 33: no task can hang a run forever (a stuck broker call, a Spark job that never ends). Each task's limit
    comes from ``mm2_failover.dag_defaults.EXECUTION_TIMEOUTS``, one row per task id; a task missing from the table
    fails this test rather than running without a limit."""
    from mm2_failover.dag_defaults import EXECUTION_TIMEOUTS

    seen = set()
    for dag in bag.dags.values():
        for t in dag.tasks:
            assert t.execution_timeout is not None, f"{dag.dag_id}.{t.task_id} has no execution_timeout"
            assert t.execution_timeout == EXECUTION_TIMEOUTS[t.task_id], f"{dag.dag_id}.{t.task_id}"
            seen.add(t.task_id)
    assert seen == set(EXECUTION_TIMEOUTS), "rows for tasks that no DAG has"


def test_every_task_reports_its_final_failure_through_the_run_failure_notifier(bag):
    """Issue 33: nobody was told when a run failed or was refused. Every task of every DAG has the notifier as its
    on_failure_callback (what it says and to whom: mm2_failover/rules/notify.py, tests/unit/test_notify.py)."""
    from mm2_failover.notifications import RunFailureNotifier

    for dag in bag.dags.values():
        for t in dag.tasks:
            assert [type(c) for c in t.on_failure_callback or []] == [RunFailureNotifier], f"{dag.dag_id}.{t.task_id}"


def test_every_dag_tells_on_call_of_a_run_not_ended_by_its_deadline_from_the_one_table(bag):
    """Issue 33, deadline alerts: each DAG has one Airflow DeadlineAlert, counted from when the run was queued, whose
    interval is its row of ``mm2_failover.dag_defaults.RUN_DEADLINES`` and whose callback is rule 6's
    (``mm2_failover.notifications.deadline_missed``), run by the executor (no triggerer needed)."""
    from airflow.sdk.definitions.callback import SyncCallback
    from airflow.sdk.definitions.deadline import DeadlineReference

    from mm2_failover.dag_defaults import RUN_DEADLINES

    assert set(bag.dags) == set(RUN_DEADLINES)
    for dag_id, dag in bag.dags.items():
        [alert] = dag.deadline
        assert alert.reference == DeadlineReference.DAGRUN_QUEUED_AT, dag_id
        assert alert.interval == RUN_DEADLINES[dag_id], dag_id
        assert isinstance(alert.callback, SyncCallback), dag_id
        assert alert.callback.path == "mm2_failover.notifications.deadline_missed", dag_id
        assert alert.callback.kwargs == {"interval_seconds": RUN_DEADLINES[dag_id].total_seconds()}, dag_id


def test_a_run_deadline_is_overridden_per_dag_and_a_malformed_override_is_named():
    from mm2_failover.dag_defaults import RUN_DEADLINES_VAR, deadline_seconds

    assert deadline_seconds("mm2_failover", {}) == 1800
    env = {RUN_DEADLINES_VAR: " mm2_sync_archive=900 , mm2_failover=45"}
    assert deadline_seconds("mm2_failover", env) == 45 and deadline_seconds("mm2_failover_drill", env) == 3600
    assert deadline_seconds("mm2_failover", {RUN_DEADLINES_VAR: "mm2_failover=OFF"}) is None
    for bad in ("mm2_failover", "mm2_failover=", "mm2_failover=0", "=30", "mm2_failover=half"):
        with pytest.raises(ValueError, match=f"{RUN_DEADLINES_VAR}: .* is not dag_id=seconds"):
            deadline_seconds("mm2_failover_drill", {RUN_DEADLINES_VAR: bad})
    with pytest.raises(KeyError, match="no run deadline"):
        deadline_seconds("someone_elses_dag", {})


def test_every_param_has_a_title_and_a_description(bag):
    for dag_id in ("mm2_failover", "mm2_failover_rollback"):
        params = bag.dags[dag_id].params
        for name in params:
            p = params.get_param(name)
            assert p.schema.get("title") and p.description, name


@pytest.mark.parametrize(
    "conf, bad",
    [
        ({"groups_regex": "orders-("}, "groups_regex"),
        ({"on_existing_target_offsets": "maybe"}, "on_existing_target_offsets"),
        ({"apply_concurrency": 0}, "apply_concurrency"),
        ({"source_alias": "bad alias"}, "source_alias"),
    ],
)
def test_bad_trigger_values_are_refused_before_any_task_runs(bag, conf, bad):
    import copy

    from airflow.sdk.definitions.param import ParamValidationError

    params = copy.deepcopy(bag.dags["mm2_failover"].params)
    with pytest.raises(ParamValidationError, match="groups_regex"):  # issue 49: the groups are typed, never assumed
        params.validate()
    params.update({"groups_regex": "orders-.*"})
    params.validate()  # with the groups typed, the defaults are valid (the optional texts are null)
    with pytest.raises(ParamValidationError) as e:
        params.update(conf)
    assert f"Invalid input for param {bad}" in str(e.value)


@pytest.mark.parametrize(
    "dag_id", ["mm2_failover_rollback", "mm2_sync_archive", "mm2_failover_readiness", "mm2_failover_drill"]
)
def test_every_other_dags_defaults_are_valid_as_the_form_opens(bag, dag_id):
    """Issue 49: no optional text defaults to an empty string that the trigger form holds invalid."""
    import copy

    params = copy.deepcopy(bag.dags[dag_id].params)
    params.validate()
    for name in params:
        schema = params.get_param(name).schema
        assert not (schema.get("type") == "string" and params[name] == ""), (dag_id, name)


def test_dag_files_import_nothing_heavy_at_parse_time():
    code = (
        "import sys, importlib.util\n"
        f"sys.path.insert(0, {str(REPO / 'plugins')!r})\n"
        f"spec = importlib.util.spec_from_file_location('d', {str(REPO / 'dags' / 'mm2_failover_dag.py')!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "print(sorted(k for k in ('pyspark', 'confluent_kafka', 'pyarrow', 'pandas') if k in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_no_task_renders_a_null_parameter_as_none(bag):
    """Issue 49: a nullable parameter the form leaves empty is null, and a bare ``{{ params.x }}`` renders it "None" -
    the rollback's sensor looked for a backup at "None" when only the failover's run id was given (found by the
    browser test). Every templated argument naming a nullable parameter must render null as empty."""
    import re

    from jinja2 import Template

    def strings(v):
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict):
            for x in v.values():
                yield from strings(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                yield from strings(x)

    for dag_id, dag in bag.dags.items():
        nullable = {n for n in dag.params if "null" in (dag.params.get_param(n).schema.get("type") or [])}
        for t in dag.tasks:
            for f in getattr(t, "template_fields", ()):
                for s in strings(getattr(t, f, None)):
                    for name in set(re.findall(r"params\.(\w+)", s)) & nullable:
                        given = {
                            n: p.value if (p := dag.params.get_param(n)).has_value else "typed" for n in dag.params
                        }
                        got = Template(s).render(params={**given, name: None})
                        assert "None" not in got, (dag_id, t.task_id, f, s, got)


def test_the_interval_of_the_archive_and_readiness_is_set_once_by_the_environment(monkeypatch):
    """bench/soak.py runs the scheduled DAGs every minute or less: MM2_FAILOVER_INTERVAL_SECONDS (parse time) sets
    both DAGs' schedule and readiness's interval; unset, every 5 minutes; a bad value is refused naming it."""
    import importlib
    from datetime import timedelta

    from mm2_failover import dag_defaults

    try:
        monkeypatch.setenv("MM2_FAILOVER_INTERVAL_SECONDS", "45")
        d = importlib.reload(dag_defaults)
        assert (d.INTERVAL_SECONDS, d.INTERVAL_SCHEDULE) == (45, timedelta(seconds=45))
        # a run of a minute at a short interval is not stuck: the deadline alert never comes before 10 minutes
        assert d.RUN_DEADLINES["mm2_sync_archive"] == d.RUN_DEADLINES["mm2_failover_readiness"] == timedelta(minutes=10)
        monkeypatch.setenv("MM2_FAILOVER_INTERVAL_SECONDS", "900")
        assert importlib.reload(dag_defaults).RUN_DEADLINES["mm2_sync_archive"] == timedelta(minutes=30)
        monkeypatch.setenv("MM2_FAILOVER_INTERVAL_SECONDS", "5s")
        with pytest.raises(ValueError, match="MM2_FAILOVER_INTERVAL_SECONDS='5s'"):
            importlib.reload(dag_defaults)
        monkeypatch.delenv("MM2_FAILOVER_INTERVAL_SECONDS")
        d = importlib.reload(dag_defaults)
        assert (d.INTERVAL_SECONDS, d.INTERVAL_SCHEDULE) == (300, "*/5 * * * *")
    finally:
        monkeypatch.delenv("MM2_FAILOVER_INTERVAL_SECONDS", raising=False)
        importlib.reload(dag_defaults)


def _asks(task) -> bool | None:
    """What a task tells its run about asking before writing: an operator's argument, a TaskFlow task's op_kwargs."""
    if hasattr(task, "asks_before_writing"):
        return task.asks_before_writing
    kw = getattr(task, "op_kwargs", None) or getattr(task, "partial_kwargs", {}).get("op_kwargs") or {}
    return kw.get("asks_before_writing")


def test_the_failover_dag_tells_every_task_that_it_asks_before_writing_and_no_other_dag_does(bag):
    """Issue 51 item 3: the run is told explicitly whether it asks a human before it writes (reachability rule 3a),
    not guessed from a task id: every task of mm2_failover that resolves the run says so; the other DAGs never do."""
    failover = bag.dags["mm2_failover"]
    said = {t.task_id: _asks(t) for t in failover.tasks}
    assert {t for t, v in said.items() if v is not True} == {"approve_plan"}, said  # the asker itself: always
    for dag_id in ("mm2_failover_drill", "mm2_failover_readiness", "mm2_failover_rollback", "mm2_sync_archive"):
        assert not [t.task_id for t in bag.dags[dag_id].tasks if _asks(t)], dag_id


def test_a_run_context_asks_only_when_told_whatever_its_dags_task_ids():
    """A DAG holding a task named approve_plan no longer makes its other tasks' runs ask (the old guess)."""
    from types import SimpleNamespace

    from mm2_failover.stages.context import RunContext

    context = {
        "dag": SimpleNamespace(dag_id="d", task_ids=["approve_plan", "build_plan"]),
        "run_id": "r",
        "params": {},
    }
    assert RunContext.from_airflow(context).asks_before_writing is False
    assert RunContext.from_airflow(context, asks_before_writing=True).asks_before_writing is True


@pytest.mark.parametrize("factory", ["failover_dag", "drill_dag", "readiness_dag", "rollback_dag", "sync_archive_dag"])
def test_every_factory_builds_its_dag_under_another_id(factory):
    """A review found ``failover_dag(dag_id="...")``, which docs/operations.md offers, refused for want of a run
    deadline for the new id: the DAG's kind (the factory's own id) gives the deadline; the id only names the DAG."""
    import importlib

    build = getattr(importlib.import_module(f"mm2_failover.dags.{factory}"), factory)
    dag = build(dag_id="dc1_" + factory)
    assert dag.dag_id == "dc1_" + factory and dag.deadline is not None
    assert all(t.execution_timeout is not None for t in dag.tasks)
