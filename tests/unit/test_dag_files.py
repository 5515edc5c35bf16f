"""The DAG files as Airflow's DagBag loads them: wiring, retries, sensors, params, and no heavy imports."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bag():
    from airflow.dag_processing.dagbag import DagBag

    b = DagBag(dag_folder=str(REPO / "dags"))
    assert b.import_errors == {}
    return b


def test_failover_dag_has_the_seven_tasks_in_order_all_retryable(bag):
    dag = bag.dags["mm2_failover"]
    order = ["preflight_audit", "verify_producers_drained", "capture_end_offsets", "compute_latest_checkpoints", "check_groups_empty",
             "apply_group_offsets", "verify_group_offsets"]
    assert sorted(dag.task_ids) == sorted(order)
    for up, down in zip(order, order[1:]):
        assert dag.get_task(down).upstream_task_ids == {up}
    assert all(dag.get_task(t).retries > 0 for t in order)
    assert dag.get_task("verify_producers_drained").mode == "reschedule"
    assert dag.get_task("check_groups_empty").mode == "reschedule"
    # the provider's operator underneath (the spark-submit route); mm2_failover.operators.spark_job adds Connect's
    assert "SparkSubmitOperator" in [c.__name__ for c in dag.get_task("compute_latest_checkpoints").__class__.__mro__]


def test_every_param_has_a_title_and_a_description(bag):
    for dag_id in ("mm2_failover", "mm2_failover_rollback"):
        params = bag.dags[dag_id].params
        for name in params:
            p = params.get_param(name)
            assert p.schema.get("title") and p.description, name


@pytest.mark.parametrize("conf, bad", [
    ({"groups_regex": "orders-("}, "groups_regex"),
    ({"on_existing_target_offsets": "maybe"}, "on_existing_target_offsets"),
    ({"apply_concurrency": 0}, "apply_concurrency"),
    ({"source_alias": "bad alias"}, "source_alias"),
])
def test_bad_trigger_values_are_refused_before_any_task_runs(bag, conf, bad):
    import copy

    from airflow.sdk.definitions.param import ParamValidationError

    params = copy.deepcopy(bag.dags["mm2_failover"].params)
    params.validate()  # the defaults are valid
    with pytest.raises(ParamValidationError) as e:
        params.update(conf)
    assert f"Invalid input for param {bad}" in str(e.value)


def test_dag_files_import_nothing_heavy_at_parse_time():
    code = ("import sys, importlib.util\n"
            f"sys.path.insert(0, {str(REPO / 'plugins')!r})\n"
            f"spec = importlib.util.spec_from_file_location('d', {str(REPO / 'dags' / 'mm2_failover.py')!r})\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "print(sorted(k for k in ('pyspark', 'confluent_kafka', 'pyarrow', 'pandas') if k in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
