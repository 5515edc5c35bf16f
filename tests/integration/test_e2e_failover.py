"""End to end on real software: real Kafka brokers, real MirrorMaker 2 checkpoints, real Spark (local),
real Airflow (dag.test()). The group must resume on the target without losing a record.

The pipeline reaches the target through its SASL_PLAINTEXT listener (SCRAM-SHA-512), with librdkafka and with
Spark's Java Kafka source alike, and the run leaves the password nowhere: on no process command line while it runs,
in no task log, XCom, artifact or Spark event log afterwards (issue 14 item 9, issue 18)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from mm2_failover.adapters.config import run_dir
from testbed import scenario

pytestmark = [pytest.mark.bed, pytest.mark.spark, pytest.mark.airflow]


def test_failover_dag_moves_group_to_checkpointed_offsets_without_loss(
    bed, target, names, monkeypatch, capfd, spark_submit_route
):
    import pyarrow.parquet as pq

    from testbed import localenv
    from testbed.bed import SCRAM_PASSWORD, scram_conf

    prep = scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        group=names["group"],
        topic=names["topic"],
        partitions=3,
        produced=120,
        consumed_upto={0: 30, 1: 75, 2: 120},
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_TARGET", json.dumps({"conn_type": "kafka", "extra": scram_conf(bed.target.sasl_bootstrap)})
    )
    events = bed.run_dir / f"spark-events-{names['group']}"  # Spark's event log, on: it must not show it either
    events.mkdir()
    conf = {
        **json.loads(os.environ.get("MM2_FAILOVER_SPARK_CONF") or "{}"),
        "spark.eventLog.enabled": "true",
        "spark.eventLog.compress": "false",
        "spark.eventLog.dir": events.as_uri(),
    }  # plain text: searchable
    monkeypatch.setenv("MM2_FAILOVER_SPARK_CONF", json.dumps(conf))
    with PasswordWatch(SCRAM_PASSWORD) as seen:
        dr = localenv.run_dag(
            "mm2_failover",
            {
                "groups_regex": names["group"],
                "drain_quiet_seconds": 2,
                "mm2_config": str(bed.run_dir / "mm2" / "mm2.properties"),
            },
        )
    assert dr.state == "success"
    art = run_dir("mm2_failover", dr.run_id)
    assert_password_nowhere(SCRAM_PASSWORD, seen, capfd, art, dr.run_id, events)
    logged = [f for f in events.rglob("*") if f.is_file()]
    assert logged and any(b"SparkListenerSQLExecutionStart" in f.read_bytes() for f in logged)  # plans are in it

    # the group resumes at the exact record after the last it consumed: MM2's offset syncs prove where it is (one
    # producer, so replica offsets equal the source's), where MM2's own checkpoints lag behind
    latest = {
        k.partition: v
        for k, v in scenario.read_checkpoints(target, bed.checkpoints_topic).items()
        if k.group == names["group"]
    }
    committed = target.committed(names["group"])
    assert committed == {(prep.replica_topic, p): o for p, o in prep.consumed_upto.items()}
    assert any(cp.downstream_offset < prep.consumed_upto[p] for p, cp in latest.items())

    # the Spark job's Parquet output holds the same latest checkpoints, named by replica topic
    rows = [
        r for r in pq.read_table(str(art / "latest_checkpoints.parquet")).to_pylist() if r["group"] == names["group"]
    ]
    assert sorted(
        (r["group"], r["topic"], r["partition"], r["upstream_offset"], r["downstream_offset"]) for r in rows
    ) == sorted(
        (names["group"], prep.replica_topic, p, cp.upstream_offset, cp.downstream_offset) for p, cp in latest.items()
    )
    assert {r["source_alias"] for r in rows} == {"primary"}

    # a consumer of the group on the target starts at the committed offset, never after the consumed position
    first = scenario.first_records_on_target(bed.target_bootstrap, names["group"], prep.replica_topic, 3)
    outcomes = scenario.compare(prep, committed, first)
    print("\n" + scenario.render_outcomes(outcomes))
    for o in outcomes:
        assert o.first_on_target == o.target_committed  # resumes exactly where we committed (or at the end)
        assert o.lost == 0, f"partition {o.partition} would skip {o.lost} record(s)"
        assert o.target_committed <= o.source_committed
        assert o.re_read == 0, f"partition {o.partition} re-reads {o.re_read} record(s)"

    report = json.loads((art / "report.json").read_text())
    assert report["outcome"] == "succeeded"
    assert report["totals"]["committed"] == 3 and report["totals"]["mismatches"] == 0
    assert report["totals"]["records_reread_estimate"] == 0
    assert report["totals"]["records_reread_by_checkpoints"] == sum(
        prep.consumed_upto[p] - cp.downstream_offset for p, cp in latest.items()
    )
    from mm2_failover.adapters.runfolder import RunFolder

    rows = RunFolder(art).load_report().partitions  # report_partitions.parquet, named by report.json
    assert report["partitions"] == "report_partitions.parquet"
    assert {p["partition"]: p["rule"] for p in rows}.keys() == {0, 1, 2}
    assert all(p["rule"] != "checkpoint" for p in rows)
    assert (art / "report.md").read_text().startswith("# mm2-failover report")

    # the pre-flight audit read the bed's mm2.properties: MM2 copies aborted transactions (read_uncommitted, the
    # default) - a warning carried into the report -, and it does not write the groups itself
    audit = {f["rule"]: f for f in json.loads((art / "audit.json").read_text())["findings"]}
    assert (
        audit["isolation"]["severity"] == "warning"
        and "primary.consumer.isolation.level" in audit["isolation"]["message"]
    )
    assert audit["second_writer"]["severity"] == "ok" and audit["checkpoint_retention"]["severity"] == "ok"
    assert audit["rpo"]["severity"] == "ok"  # the bed emits every second
    assert any("pre-flight audit" in w and "isolation" in w for w in report["warnings"])
    assert (art / "plan.csv").read_text().splitlines() == [
        f"{names['group']},{prep.replica_topic},{p},{prep.consumed_upto[p]}" for p in range(3)
    ]


class PasswordWatch:
    """Lists every process command line that shows ``password`` while the ``with`` block runs (ps, every 0.2 s)."""

    def __init__(self, password: str):
        self.password, self.seen = password, []
        self._stop = threading.Event()

    def _watch(self):
        while not self._stop.is_set():
            out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
            self.seen.extend(line for line in out.splitlines() if self.password in line)
            self._stop.wait(0.2)

    def __enter__(self):
        self._t = threading.Thread(target=self._watch, daemon=True)
        self._t.start()
        return self.seen

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


def assert_password_nowhere(password: str, seen: list[str], capfd, art, run_id: str, *more: Path) -> None:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    assert seen == [], "a command line showed the password"
    out = capfd.readouterr()
    assert "compute_latest_checkpoints" in out.out + out.err  # the task logs (dag.test() prints them)
    assert password not in out.out + out.err
    for folder in (art, Path(os.environ["AIRFLOW_HOME"]) / "logs", *more):
        for f in folder.rglob("*"):
            if f.is_file():
                assert password.encode() not in f.read_bytes(), f
    with create_session() as s:
        values = [json.dumps(x.value, default=str) for x in s.query(XComModel).filter(XComModel.run_id == run_id).all()]
    assert values and not any(password in v for v in values)
