"""What the executors' workers import before they fork a task (issue 33, recovery time).

Airflow runs each task in a process forked from an executor worker; whatever the worker has imported, the task
has for free. A task that reads or writes Parquet otherwise pays pandas' import itself (pyarrow imports pandas
the first time it converts Python objects, reads a table or groups one: 1.5-2.6 s on the bench's machine), and
every task pays the task runner's own imports. :data:`MODULES` is what a task imported after its fork, measured on
the bench with ``PYTHONPROFILEIMPORTTIME=1`` in the scheduler's environment (a task's imports go to its log). This
module is the one list of those imports, named by Airflow's settings (:func:`mm2_failover.adapters.config.preload_settings`,
used by the local deployment and ``docker-compose.yaml``)::

    [scheduler] mp_start_method = forkserver            # the LocalExecutor's workers
    [scheduler] mp_forkserver_preload = mm2_failover.preload
    [celery] celery_config_options = mm2_failover.celery_config.CELERY_CONFIG   # each Celery worker, at its start

Only third-party modules are listed: they change only with a reinstall, which restarts the scheduler anyway. The
project's own modules are not, so a task always runs the code on disk, never what the scheduler loaded at its start.
"""

from __future__ import annotations

import importlib

MODULES = (
    # the executor's worker loop, the task runner every task process starts with, and what it parses the DAG with
    "airflow.executors.local_executor",
    "airflow.sdk.execution_time.task_runner",
    "airflow.dag_processing.dagbag",
    "airflow.serialization.serialized_objects",
    # the operators' providers and what the plugins import (Airflow loads every plugin in each task: the report
    # pages' FastAPI app among them); a worker forked from the scheduler had those, a preloaded one must too
    "airflow.providers.standard.operators.python",
    "airflow.providers.standard.operators.hitl",
    "airflow.providers.apache.spark.operators.spark_submit",
    "airflow.providers.apache.kafka.hooks.base",
    "fastapi",
    "pydantic.v1",
    "tabulate",
    "requests",
    # pandas first: pyarrow imports it (and its pandas_compat) on first use, in every task touching Parquet
    "pandas",
    "pyarrow.pandas_compat",
    "pyarrow.parquet",
    "pyarrow.compute",
    "pyarrow.dataset",
    "pyarrow.fs",
    "confluent_kafka",
    "confluent_kafka.admin",
)


def _preload() -> None:
    for name in MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # one module a deployment lacks must not cost it the others (the task will say)
            continue
    import pyarrow  # lazy: heavy (pyarrow)

    pyarrow.array([0])  # pyarrow looks for pandas once per process: here, not in each task


_preload()
