"""The ``compute_latest_checkpoints`` task as the DAG runs it, timed by Airflow itself.

Runs the real ``LatestCheckpointsOperator`` (the Spark provider's ``SparkSubmitOperator`` underneath, through
``spark_default``) in a one-task-plus-seed DAG with ``dag.test()``, against a checkpoints topic that already
exists on ``--bootstrap``: a first task writes the run's end-offset snapshot where ``capture_end_offsets``
would, exactly as the failover DAG leaves it. Prints one ``DAG_TASK_BENCH <json>`` line with the task
instance's duration (start to end, as the Airflow UI shows it) and the job's summary. Called by
``latest_checkpoints_bench.py --dag-task`` in a subprocess (Airflow reads its settings from the environment
at import time):

    PYTHONPATH=plugins:. .venv/bin/python bench/dag_task_bench.py --home var/bench/x/airflow \\
        --bootstrap 127.0.0.1:9092 --topic primary.checkpoints.internal --end-offset 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins"))
sys.path.insert(0, str(REPO))

DAG_ID = "bench_compute_latest_checkpoints"
DAG_FILE = f'''"""{DAG_ID}: seed the end-offset snapshot, then compute_latest_checkpoints (written by bench/dag_task_bench.py)."""
import json
import os

from airflow.sdk import DAG, task

from mm2_failover.adapters import config
from mm2_failover.rules.naming import checkpoint_topic_aliases
from mm2_failover.operators.checkpoint_job import LatestCheckpointsOperator
from mm2_failover.params import failover_params, run_params_template
from mm2_failover.adapters.runfolder import RunFolder, Snapshot

TOPIC, END = os.environ["BENCH_TOPIC"], int(os.environ["BENCH_END_OFFSET"])
ALIAS = checkpoint_topic_aliases([TOPIC])[TOPIC]
params = failover_params()
params["source_alias"].value = ALIAS

with DAG("{DAG_ID}", schedule=None, params=params, catchup=False):
    @task(task_id="seed_snapshot")
    def seed_snapshot(**context):
        # what capture_end_offsets leaves for the next task: the checkpoint topics and the range to read
        folder = RunFolder(config.run_dir(context["dag"].dag_id, context["run_id"]))
        folder.save_snapshot(Snapshot("bench", {{ALIAS: TOPIC}}, {{(TOPIC, 0): END}}, {{(TOPIC, 0): 0}}, {{}}, {{}}, {{}}, {{}}))

    seed_snapshot() >> LatestCheckpointsOperator(task_id="compute_latest_checkpoints", retries=0,
                                                 run_params=run_params_template(params))
'''


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, required=True, help="AIRFLOW_HOME for this bench (created)")
    ap.add_argument("--bootstrap", required=True, help="the cluster holding the checkpoints topic")
    ap.add_argument("--topic", required=True, help="<alias>.checkpoints.internal (one partition)")
    ap.add_argument("--end-offset", type=int, required=True)
    ap.add_argument("--spark-master", default="local[2]")
    ap.add_argument("--spark-conf", default="{}", help="JSON: extra Spark conf (e.g. a standalone cluster's)")
    args = ap.parse_args(argv)

    from testbed.localenv import airflow_env, migrate_db

    env = airflow_env(
        args.home,
        args.bootstrap,
        args.bootstrap,
        spark_master=args.spark_master,
        spark_conf=json.loads(args.spark_conf),
    )
    # dag.test() finds the DAG through the configured DAG bundle: a folder of its own holding only this DAG
    dags = args.home / "dags"
    dags.mkdir(parents=True, exist_ok=True)
    (dags / "bench_dag.py").write_text(DAG_FILE)
    env.update(
        {"AIRFLOW__CORE__DAGS_FOLDER": str(dags), "BENCH_TOPIC": args.topic, "BENCH_END_OFFSET": str(args.end_offset)}
    )
    os.environ.update(env)
    t0 = time.monotonic()
    migrate_db(env)
    migrate_s = time.monotonic() - t0

    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    from mm2_failover.adapters import config
    from mm2_failover.adapters.runfolder import RunFolder
    from testbed.localenv import task_states

    dag = DagBag(dag_folder=str(dags)).get_dag(DAG_ID)
    if dag is None:
        raise RuntimeError(f"{DAG_ID} did not load from {dags}")
    t1 = time.monotonic()
    dr = dag.test()
    wall = time.monotonic() - t1
    with create_session() as s:
        ti = (
            s.query(TaskInstance)
            .filter(
                TaskInstance.dag_id == DAG_ID,
                TaskInstance.run_id == dr.run_id,
                TaskInstance.task_id == "compute_latest_checkpoints",
            )
            .one()
        )
        duration = ti.duration
    art = RunFolder(config.run_dir(DAG_ID, dr.run_id))
    summary = json.loads(art.checkpoints_summary.read_text()) if art.checkpoints_summary.exists() else None
    out = {
        "state": task_states(DAG_ID, dr.run_id),
        "task_duration_s": duration,
        "dag_test_wall_s": round(wall, 3),
        "db_migrate_s": round(migrate_s, 3),
        "summary": summary,
        "output": str(art.checkpoints),
    }
    print("DAG_TASK_BENCH " + json.dumps(out), flush=True)
    return 0 if out["state"].get("compute_latest_checkpoints") == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
