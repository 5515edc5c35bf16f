"""The latest-checkpoint state on the real bed (issue 17): real Kafka, the job through the venv's spark-submit.

Random checkpoint histories (tombstones, regressions, unusable records, commit metadata, two partitions, two source
aliases) are written into checkpoint topics of the test's own, in three batches. The refresh folds batch 1 into a
state version; the refresh after batch 2 is SIGKILLed after writing its version but before publishing it (the fault
point ``state.before_publish``): the published version stays the previous one; its retry reads only batch 2,
publishes, and removes what the killed run left. After batch 3, the failover-time job starts from that version and
reads only the tail - and answers exactly as a full pass over the same captured range does (every column of every
answer, the counts, the quarantined records, the regressions), through spark-submit and on a warm Spark Connect
server alike."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from mm2_failover import checkpoints as cpf
from mm2_failover.config import SPARK_JOB
from mm2_failover.spark import refresh_submission, spark_submit, submission_of, write_options_file
from mm2_failover.state import StateRoot
from testbed.bed import free_port
from testbed.spark_connect import SparkConnectServer

pytestmark = [pytest.mark.bed, pytest.mark.spark]


def batch(rnd: random.Random, tag: str, n: int) -> list[tuple[int, bytes, bytes | None]]:
    """(partition, key, value) records over a small key space, so that later batches update earlier keys."""
    out = []
    for _ in range(n):
        key = cpf.encode_key(f"g{tag}-{rnd.randrange(12)}", f"primary.t{rnd.randrange(3)}", rnd.randrange(3))
        r = rnd.random()
        d = rnd.randrange(1_000_000)  # unique enough: the max policy never meets a tie
        if r < 0.1:
            value = None
        elif r < 0.14:
            value = rnd.choice([cpf.encode_value(d + 5, d)[:-2], cpf.encode_value(-1, d)])
        elif r < 0.16:
            key = key[:5]
            value = cpf.encode_value(d, d)
        else:
            value = cpf.encode_value(d + rnd.randrange(9), d, rnd.choice(["", "", "", "m\u00e9ta"]))
        out.append((rnd.randrange(2), key, value))
    return out


def produce(bootstrap: str, topic: str, records) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for part, k, v in records:
        p.produce(topic, key=k, value=v, partition=part)
    assert p.flush(30) == 0


def rows(path) -> list[dict]:
    import pyarrow.parquet as pq

    if not path:
        return []
    return sorted(pq.read_table(str(path)).to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def compute(bed, topics, end, out, state_dir=None, remote=None) -> dict:
    """The failover-time job over [log start, end): from the state (``state_dir``) or a full pass; through the
    venv's spark-submit, or as a plain Python client of the Spark Connect server ``remote``."""
    conf = {"bootstrap.servers": bed.target_bootstrap}
    options = write_options_file(conf, str(out))
    args = ["--bootstrap-servers", bed.target_bootstrap]
    for a, t in topics.items():
        args += ["--checkpoints-topic", f"{a}={t}"]
    args += ["--end-offsets", json.dumps(end), "--output", str(out), "--summary", str(out) + ".json",
             "--max-quarantined", "1000000", "--kafka-options-file", str(options)]
    if state_dir:
        args += ["--state-dir", str(state_dir)]
    with submission_of(args, options) as sub:
        if remote is None:
            assert spark_submit("local[2]", sub) == 0
        else:  # a separate process: a Connect client switches pyspark to remote mode for the whole process
            env = {**os.environ, **sub.env}
            p = subprocess.run([sys.executable, str(SPARK_JOB), *sub.args, "--remote", remote], env=env,
                               capture_output=True, text=True, timeout=300)
            assert p.returncode == 0, p.stderr[-3000:]
    return json.loads((out.parent / (out.name + ".json")).read_text())


def test_state_then_tail_answers_as_a_full_pass_and_survives_a_killed_refresh(bed, target, names, tmp_path,
                                                                               monkeypatch):
    rnd = random.Random(17)
    topics = {}
    for i in (1, 2):
        alias = f"st{i}{names['group'][-6:]}"
        topics[alias] = f"{alias}.checkpoints.internal"
        target.create_topic(topics[alias], 2)
    state_dir = tmp_path / "archive" / "latest-state"
    monkeypatch.setenv("MM2_FAILOVER_ARCHIVE", str(tmp_path / "archive"))
    conf = {"bootstrap.servers": bed.target_bootstrap}

    def refresh(fault: str = "") -> int:
        if fault:
            monkeypatch.setenv("MM2_FAILOVER_FAULT", fault)
        else:
            monkeypatch.delenv("MM2_FAILOVER_FAULT", raising=False)
        with refresh_submission(topics, conf) as sub:
            return spark_submit("local[2]", sub)

    for t in topics.values():
        produce(bed.target_bootstrap, t, batch(rnd, t[:4], 300))
    assert refresh() == 0
    first = json.loads((state_dir / "last-refresh.json").read_text())
    assert first["state"]["full_pass"] == sorted(topics)  # no version yet
    v1 = StateRoot(state_dir).current()["name"]
    assert v1 == first["state_version"] and first["records_read"] == 600

    for t in topics.values():
        produce(bed.target_bootstrap, t, batch(rnd, t[:4], 200))
    assert refresh("kill@state.before_publish") != 0  # the driver dies with its version written, not published
    assert StateRoot(state_dir).current()["name"] == v1
    assert list(state_dir.glob(".tmp-v-*")), "the killed refresh left its staging folder"

    assert refresh() == 0  # the retry converges: publishes v2 and removes what the killed run left
    assert not list(state_dir.glob(".tmp-v-*"))
    v2 = StateRoot(state_dir).current()["name"]
    assert v2 != v1 and json.loads((state_dir / "last-refresh.json").read_text())["tail_offsets"] == 400

    for t in topics.values():
        produce(bed.target_bootstrap, t, batch(rnd, t[:4], 100))
    end = {t: {str(p): o for (_t, p), o in target.offsets([(t, 0), (t, 1)], "latest").items()}
           for t in topics.values()}
    got = compute(bed, topics, end, tmp_path / "from-state", state_dir)
    want = compute(bed, topics, end, tmp_path / "full")
    assert got["state"]["full_pass"] == [] and got["tail_offsets"] == 200 and want["tail_offsets"] == 1200
    assert "state" not in want
    same = ("records_read", "tombstones", "quarantined", "quarantined_by_reason", "checkpoints", "groups",
            "regressions")
    assert {f: got[f] for f in same} == {f: want[f] for f in same}
    assert want["quarantined"] and want["regressions"] and want["tombstones"] and want["checkpoints"]
    assert rows(got["output"]) == rows(want["output"])
    assert rows(got["quarantine_output"]) == rows(want["quarantine_output"])
    assert rows(got["regressions_output"]) == rows(want["regressions_output"])
    assert any(r["metadata"] for r in rows(want["output"]))

    # the same job code on a warm Spark Connect server (the DAG's route when spark_connect_default is defined)
    server = SparkConnectServer.start(tmp_path / "spark-connect", free_port())
    # the warm-up must not switch this process (and every spark-submit it starts later) to Connect mode
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ
    try:
        remote = compute(bed, topics, end, tmp_path / "over-connect", state_dir, remote=server.url)
    finally:
        server.stop()
    assert remote["spark"] == {"route": "spark-connect", "remote": server.url,
                               "session_seconds": remote["spark"]["session_seconds"]}
    assert got["spark"]["route"] == "spark-submit"
    assert {f: remote[f] for f in same} == {f: want[f] for f in same} and remote["tail_offsets"] == 200
    assert rows(remote["output"]) == rows(want["output"])
    assert rows(remote["quarantine_output"]) == rows(want["quarantine_output"])


@pytest.mark.airflow
def test_the_archive_dag_refreshes_the_state_beside_the_archive(bed, target, tmp_path, monkeypatch):
    """The scheduled DAG (Airflow dag.test(), real Spark): refresh_latest_state publishes a version covering MM2's
    checkpoint topic up to its end when the task ran; the archive task is unaffected."""
    from testbed import localenv

    monkeypatch.setenv("MM2_FAILOVER_ARCHIVE", str(tmp_path / "archive"))
    before = target.offsets([(bed.checkpoints_topic, 0)], "latest")[(bed.checkpoints_topic, 0)]
    dr = localenv.run_dag("mm2_sync_archive")
    states = localenv.task_states("mm2_sync_archive", dr.run_id)
    assert states == {"archive_offset_syncs": "success", "refresh_latest_state": "success"}, states
    v = StateRoot(tmp_path / "archive" / "latest-state").current()
    assert v is not None and v["aliases"]["primary"]["topic"] == bed.checkpoints_topic
    assert int(v["aliases"]["primary"]["covers"]["0"]) >= before
    assert v["aliases"]["primary"]["topic_id"] == target.topic_id(bed.checkpoints_topic)
    assert (tmp_path / "archive" / "primary" / "checkpoints" / "manifest.json").exists()
