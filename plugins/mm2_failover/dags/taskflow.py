"""The DAGs' TaskFlow tasks, one way: a task whose body is :mod:`mm2_failover.tasks`' function of the same name,
imported when the task runs (not when the DAG file is parsed)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG, task

from mm2_failover.dag_defaults import run_deadline


def step(name: str, *, asks_before_writing: bool = False, **task_kwargs):
    """The TaskFlow task ``name`` (its id and :mod:`mm2_failover.tasks`' function), called: the XComArg the DAG
    wires. ``asks_before_writing``: the DAG asks a human before it writes (reachability rule 3a) - passed as the
    task's argument, so that it is explicit in the DAG and visible on the task (``op_kwargs``)."""

    @task(task_id=name, **task_kwargs)
    def body(**context):
        from mm2_failover import tasks  # lazy: not at DAG parse

        return getattr(tasks, name)(context)

    return body(asks_before_writing=True) if asks_before_writing else body()


def pipeline_dag(
    dag_id: str, *, kind: str, schedule, params: dict, doc: str, tag: str, retries: int = 2, retry_seconds: int = 15
):
    """A DAG of this package, with what they all share: one run at a time, no catch-up, the run's deadline
    (on-call hears of a run that has not ended in time), paused on creation when scheduled (unpaused together with
    MM2) and not when on demand (a trigger must run at once), and the tags. ``kind``: the factory's own DAG id, which
    names the DAG's run deadline and time limits whatever ``dag_id`` it is built under."""

    return DAG(
        dag_id=dag_id,
        deadline=run_deadline(dag_id, kind),
        schedule=schedule,
        is_paused_upon_creation=schedule is not None,
        start_date=datetime(2026, 1, 1, tzinfo=timezone.utc) if schedule is not None else None,
        catchup=False,
        max_active_runs=1,
        params=params,
        default_args={"retries": retries, "retry_delay": timedelta(seconds=retry_seconds)},
        doc_md=doc,
        tags=["kafka", "mirrormaker2", "failover", *([tag] if tag else [])],
    )
