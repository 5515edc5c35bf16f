"""The same DAG runs its Spark job on a real Spark standalone cluster (master + worker from the pinned pyspark),
not only in local mode: same scenario, same Parquet rows, same committed offsets; only spark_default differs
between the runs. The master's /json/ and the executor's own log prove where the job ran and that the executor
read the checkpoint topic from Kafka."""

from __future__ import annotations

import json
import re
import uuid

import pytest

from mm2_failover.adapters.config import run_dir, spark_conf
from mm2_failover.adapters.runfolder import RunFolder
from mm2_failover.adapters.spark import job_submission, spark_submit
from mm2_failover.stages.compute_checkpoints import load_latest_checkpoints
from mm2_failover.stages.snapshot import capture_snapshot
from testbed import localenv, scenario
from testbed.spark_cluster import APP_NAME, SparkCluster

pytestmark = [pytest.mark.bed, pytest.mark.spark, pytest.mark.airflow]

# the decisive columns of the job's output (checkpoint_offset/timestamp name the checkpoint record, not the result)
COLS = ("source_alias", "group", "topic", "partition", "upstream_offset", "downstream_offset", "metadata", "regressed")
# Spark's Kafka source logs, in the executor that ran the task, each bounded read of a topic-partition
KAFKA_READ = re.compile(
    r"KafkaDataConsumer: From Kafka topicPartition=(?P<tp>\S+) groupId=(?P<rel>\S+) read (?P<n>\d+) records"
)


@pytest.fixture(scope="session")
def _spark_master_launched(run_root):
    """The master's JVM, launched before the session's bed starts (when this module is the first to need the bed)
    so that both start together; spark_cluster completes the start. Stopped at the end of the session at the
    latest."""
    c = SparkCluster(run_root / "spark")
    try:
        yield c.launch()
    finally:
        c.stop()


@pytest.fixture(scope="module")
def spark_cluster(_spark_master_launched, bed):
    c = _spark_master_launched.wait_ready()
    yield c
    c.stop()  # at the end of this module


@pytest.fixture(scope="module")
def scene(bed):
    """One group on a 3-partition topic, 100 records, consumed 20/50/100 (the `prepared` scenario), shared by the
    tests of this module: each run here reads the same checkpoints."""
    tag = uuid.uuid4().hex[:6]
    return scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        group=f"g-spark-cluster-{tag}",
        topic=f"t-spark-cluster-{tag}",
        partitions=3,
        produced=100,
        consumed_upto={0: 20, 1: 50, 2: 100},
    )


@pytest.fixture
def same_spark_conf(spark_cluster, monkeypatch, spark_submit_route):
    """One Spark conf for both modes: the cluster's executor size (ignored in local mode) and short-lived JVMs;
    spark-submit (the modes are spark_default's masters)."""
    monkeypatch.setenv("MM2_FAILOVER_SPARK_CONF", json.dumps({**spark_conf(), **spark_cluster.app_conf}))


def expected_rows(prep: scenario.Prepared) -> list[tuple]:
    return sorted(
        ("primary", prep.group, prep.replica_topic, part, c.upstream_offset, c.downstream_offset, c.metadata, False)
        for part, c in prep.checkpoints.items()
    )


def rows(path, group: str | None = None) -> list[tuple]:
    """The job's answers (of one group: the job answers for every group, the pipeline selects in Python)."""
    import pyarrow.parquet as pq

    return sorted(
        tuple(r[c] for c in COLS) for r in pq.read_table(str(path)).to_pylist() if group is None or r["group"] == group
    )


def assert_ran_on(cluster: SparkCluster, before: set[str], snapshot: dict) -> dict:
    """The master lists exactly one new application, ours, FINISHED; its executor read the checkpoint topic from
    Kafka, exactly up to the captured end offsets: each pass (one Kafka relation, named by its consumer group) split
    into ranges across the executor's tasks that add up to the end offset. The decode is one pass; a second one is the
    metadata fill, when some answer on the shared bed carries commit metadata (the checkpoints topic holds every
    test's groups, so whether it runs depends on which tests ran before)."""
    app = cluster.wait_completed_app(APP_NAME, after=before)
    assert app["state"] == "FINISHED", app
    assert cluster.app_ids() - before == {app["id"]}
    logs = cluster.executor_logs(app["id"])
    assert logs, f"no executor logs under {cluster.work_dir / app['id']}"
    reads = [m for p in logs.values() for m in KAFKA_READ.finditer(p.read_text(errors="replace"))]
    assert reads, f"no Kafka read in the executor logs {sorted(map(str, logs.values()))}"
    starts = snapshot["checkpoints_log_start"]
    ends = {
        f"{t}-{p}": o - starts[t][p] for t, ps in snapshot["checkpoints_end_offsets"].items() for p, o in ps.items()
    }
    passes: dict[str, dict[str, int]] = {}
    for m in reads:
        assert int(m["n"]) > 0, m.group(0)
        read = passes.setdefault(m["rel"], {})
        read[m["tp"]] = read.get(m["tp"], 0) + int(m["n"])
    assert 1 <= len(passes) <= 2, passes
    for read in passes.values():
        assert read == {tp: n for tp, n in ends.items() if n > 0}, ([m.group(0) for m in reads], ends)
    return app


def test_same_dag_same_result_in_local_mode_and_on_a_standalone_cluster(
    spark_cluster, scene, target, same_spark_conf, monkeypatch
):
    cluster, g = spark_cluster, scene.group
    conf = {"groups_regex": g, "drain_quiet_seconds": 1}

    # 1. local mode, dry run: the plan, nothing written; the cluster sees no application
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", localenv.spark_conn("local[2]"))
    before = cluster.app_ids()
    dr = localenv.run_dag("mm2_failover", {**conf, "dry_run": True})
    assert dr.state == "success"
    assert localenv.task_states("mm2_failover", dr.run_id)["compute_latest_checkpoints"] == "success"
    assert cluster.app_ids() == before
    assert target.committed(g) == {}
    local = RunFolder(run_dir("mm2_failover", dr.run_id))
    assert rows(local.checkpoints, g) == expected_rows(scene)
    plan = {
        (t, int(p)): int(o)
        for gr, t, p, o in (line.split(",") for line in local.plan_csv.read_text().splitlines())
        if gr == g
    }
    assert len(plan) == 3

    # 2. the standalone cluster, for real: only spark_default changes
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", localenv.spark_conn(cluster.master_url))
    dr = localenv.run_dag("mm2_failover", conf)
    assert dr.state == "success"
    assert set(localenv.task_states("mm2_failover", dr.run_id).values()) == {"success"}
    on_cluster = RunFolder(run_dir("mm2_failover", dr.run_id))
    assert_ran_on(cluster, before, json.loads(on_cluster.snapshot.read_text()))

    # same Parquet rows, and the committed offsets are the local run's plan
    assert rows(on_cluster.checkpoints) == rows(local.checkpoints)
    assert target.committed(g) == plan
    assert json.loads(on_cluster.report_json.read_text())["outcome"] == "succeeded"


def test_job_writes_a_file_uri_output_on_the_cluster(spark_cluster, scene, bed, target, run_root, same_spark_conf):
    """The job's CLI with its output given as a file:// URI (a Hadoop filesystem URI, as hdfs:// or s3a:// are)."""
    cluster = spark_cluster
    ctx = bed.run_context(run_root / "spark-uri" / scene.group, groups_regex=scene.group)
    params = ctx.params
    art = ctx.folder
    snap = capture_snapshot(ctx)
    out = art.dir / "uri-output" / "latest.parquet"
    uri = out.as_uri()
    assert uri.startswith("file:///")
    before = cluster.app_ids()
    with job_submission(params, art, snap, target.conf) as sub:
        sub.args[sub.args.index("--output") + 1] = uri
        assert spark_submit(cluster.master_url, sub) == 0

    assert_ran_on(cluster, before, snap.as_dict())
    summary = json.loads(art.checkpoints_summary.read_text())
    # every key of the range answered (the job does not select groups): as many as the pure rule finds
    from mm2_failover.rules.latest import Record, latest_per_key

    oracle = latest_per_key(
        Record("primary", k, v, p, o)
        for _t, p, o, k, v, _ts in target.read(snap.checkpoints_end, start=snap.checkpoints_start)
    )
    assert summary["output"] == uri and summary["checkpoints"] == len(oracle.answers)
    assert (out / "_SUCCESS").exists()
    assert rows(out, scene.group) == expected_rows(scene)
    # the DAG's reader takes the URI as it is (pyarrow understands file://; s3a:// would need mapping to s3://)
    assert sorted(
        (c.topic, c.partition, c.downstream_offset) for c in load_latest_checkpoints(uri) if c.group == scene.group
    ) == sorted((scene.replica_topic, part, c.downstream_offset) for part, c in scene.checkpoints.items())
