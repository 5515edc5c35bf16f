"""The latest-checkpoint state on the real bed (issue 17): real Kafka, the job through the venv's spark-submit.

Random checkpoint histories (tombstones, regressions, unusable records, commit metadata, two partitions, two source
aliases) are written into checkpoint topics of the test's own, in three batches. The refresh folds batch 1 into a
state version; the refresh after batch 2 is SIGKILLed after writing its version but before publishing it (the fault
point ``state.before_publish``): the published version stays the previous one; its retry reads only batch 2,
publishes, and removes what the killed run left. After batch 3, the failover-time job starts from that version and
reads only the tail - and answers exactly as a full pass over the same captured range does (every column of every
answer, the counts, the quarantined records, the regressions), both on the warm Spark Connect server (the killed
refresh runs through spark-submit, whose driver is the process the fault kills)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time

import pytest

from mm2_failover.adapters.config import SPARK_JOB, run_dir
from mm2_failover.adapters.runfolder import RunFolder
from mm2_failover.adapters.spark import connect_run, refresh_submission, spark_submit, submission_of, write_options_file
from mm2_failover.adapters.state import StateRoot
from mm2_failover.rules import checkpoints as cpf
from testbed import scenario

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
    from mm2_failover.adapters.answers import read_table

    if not path:
        return []
    return sorted(read_table(path).to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def compute(bed, topics, end, out, state_dir=None, remote=None) -> dict:
    """The failover-time job over [log start, end): from the state (``state_dir``) or a full pass; through the
    venv's spark-submit, or as a plain Python client of the Spark Connect server ``remote``."""
    conf = {"bootstrap.servers": bed.target_bootstrap}
    options = write_options_file(conf, str(out))
    args = ["--bootstrap-servers", bed.target_bootstrap]
    for a, t in topics.items():
        args += ["--checkpoints-topic", f"{a}={t}"]
    args += [
        "--end-offsets",
        json.dumps(end),
        "--output",
        str(out),
        "--summary",
        str(out) + ".json",
        "--max-quarantined",
        "1000000",
        "--kafka-options-file",
        str(options),
    ]
    if state_dir:
        args += ["--state-dir", str(state_dir)]
    with submission_of(args, options) as sub:
        if remote is None:
            assert spark_submit("local[2]", sub) == 0
        else:  # the CLI's Connect route: a client process of its own, the URL in SPARK_REMOTE
            said: list[str] = []
            assert connect_run(remote, sub, said) == 0, said
    return json.loads((out.parent / (out.name + ".json")).read_text())


def test_state_then_tail_answers_as_a_full_pass_and_survives_a_killed_refresh(
    bed, target, names, tmp_path, monkeypatch, connect_server
):
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
        """The refresh on the warm Connect server (the DAG's route); the killed one through spark-submit, whose
        driver is the process the fault kills."""
        if fault:
            monkeypatch.setenv("MM2_FAILOVER_FAULT", fault)
        else:
            monkeypatch.delenv("MM2_FAILOVER_FAULT", raising=False)
        with refresh_submission(topics, conf) as sub:
            return spark_submit("local[2]", sub) if fault else connect_run(connect_server.url, sub, [])

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
    # a quiet cluster: nothing new since, the scheduled refresh succeeds on the version it finds (it crashed comparing
    # a null "quarantined" with --max-quarantined, and the archive DAG failed and mailed every interval: issue 49)
    assert refresh() == 0
    quiet = json.loads((state_dir / "last-refresh.json").read_text())
    assert quiet["state_version"] == v2 and quiet.get("already_published"), quiet
    per_alias = StateRoot(state_dir).current()["aliases"].values()
    assert quiet["records_read"] == 1000 and quiet["quarantined"] == sum(a["quarantined"] for a in per_alias) > 0

    for t in topics.values():
        produce(bed.target_bootstrap, t, batch(rnd, t[:4], 100))
    end = {t: {str(p): o for (_t, p), o in target.offsets([(t, 0), (t, 1)], "latest").items()} for t in topics.values()}
    # the tail on the state against a full pass, both over the warm Connect server (the DAG's route when
    # spark_connect_default is defined; the killed refresh above went through spark-submit): the same answers
    got = compute(bed, topics, end, tmp_path / "from-state", state_dir, remote=connect_server.url)
    want = compute(bed, topics, end, tmp_path / "full", remote=connect_server.url)
    assert got["state"]["full_pass"] == [] and got["tail_offsets"] == 200 and want["tail_offsets"] == 1200
    assert "state" not in want
    # only the touched keys' answers written; the others are the version's, linked into the output
    assert got["output_layout"]["layout"] == "state+delta" and want["output_layout"]["layout"] == "full"
    assert 0 < got["output_layout"]["delta_answers"] <= got["output_layout"]["touched_keys"]
    same = (
        "records_read",
        "tombstones",
        "quarantined",
        "quarantined_by_reason",
        "checkpoints",
        "groups",
        "regressions",
    )
    assert {f: got[f] for f in same} == {f: want[f] for f in same}
    assert want["quarantined"] and want["regressions"] and want["tombstones"] and want["checkpoints"]
    assert rows(got["output"]) == rows(want["output"])
    assert rows(got["quarantine_output"]) == rows(want["quarantine_output"])
    assert rows(got["regressions_output"]) == rows(want["regressions_output"])
    assert any(r["metadata"] for r in rows(want["output"]))

    assert got["spark"] == {
        "route": "spark-connect",
        "remote": connect_server.url,
        "session_seconds": got["spark"]["session_seconds"],
    }
    assert want["spark"]["route"] == "spark-connect"


def readable_offsets(bootstrap: str, topic: str, end: int) -> int:
    """How many offsets of [0, end) partition 0 of ``topic`` still holds (compaction removes some)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "compaction-probe",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    n = 0
    try:
        while True:
            m = c.poll(5)
            if m is None or m.error() or m.offset() >= end:  # the end, or the partition's end (EOF)
                return n
            n += 1
    finally:
        c.close()


ANSWER_COLUMNS = (
    "source_alias",
    "group",
    "topic",
    "partition",
    "upstream_offset",
    "downstream_offset",
    "metadata",
    "checkpoint_partition",
    "checkpoint_offset",
    "checkpoint_timestamp",
    "latest_downstream_offset",
    "latest_checkpoint_offset",
)


def test_compaction_between_the_refresh_and_the_failover_changes_no_answer(
    bed, target, names, tmp_path, connect_server
):
    """MM2's checkpoint topic is compacted: records the state version folded in may be gone by the failover, and
    so may records of the tail. The failover from the version plus the (compacted) tail gives the same answer per
    key as a full pass over what the topic still holds. (What may differ, by design: the counts of records read,
    and the regressions, which the state remembers from records compaction removed since.)"""
    rnd = random.Random(23)
    alias = f"cp{names['group'][-6:]}"
    topic = f"{alias}.checkpoints.internal"
    target.create_topic(
        topic,
        1,
        {
            "cleanup.policy": "compact",
            "segment.ms": "200",
            "min.compaction.lag.ms": "0",
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "100",
        },
    )
    keys = [cpf.encode_key(f"gc-{i % 5}", f"primary.t{i % 3}", i % 4) for i in range(20)]

    def write(n: int) -> None:
        produce(
            bed.target_bootstrap,
            topic,
            [
                (
                    0,
                    rnd.choice(keys),
                    None if rnd.random() < 0.05 else cpf.encode_value(d + 1, d, rnd.choice(["", "m"])),
                )
                for d in (rnd.randrange(10**6) for _ in range(n))
            ],
        )

    write(400)
    state_dir = tmp_path / "latest-state"
    conf = {"bootstrap.servers": bed.target_bootstrap}
    options = write_options_file(conf, str(tmp_path / "refresh"))
    args = [
        "--bootstrap-servers",
        bed.target_bootstrap,
        "--checkpoints-topic",
        f"{alias}={topic}",
        "--end-offsets",
        "latest",
        "--state-dir",
        str(state_dir),
        "--refresh-state",
        "--kafka-options-file",
        str(options),
    ]
    with submission_of(args, options) as sub:
        env = {**os.environ, **sub.env}
        p = subprocess.run(
            [sys.executable, str(SPARK_JOB), *sub.args, "--remote", connect_server.url],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert p.returncode == 0, p.stderr[-3000:]
    covered = int(StateRoot(state_dir).current()["aliases"][alias]["covers"]["0"])
    # more updates of the same keys, written over a few seconds so that segments roll and the cleaner runs
    deadline = time.monotonic() + 90
    while True:
        write(40)
        time.sleep(0.5)
        end = target.offsets([(topic, 0)], "latest")[(topic, 0)]
        held = readable_offsets(bed.target_bootstrap, topic, end)
        if readable_offsets(bed.target_bootstrap, topic, covered) < covered and held < end - covered:
            break  # compaction removed records the version folded in, and records of the tail
        assert time.monotonic() < deadline, f"the log cleaner did not compact {topic} ({held} of {end} held)"
    ends = {topic: {"0": end}}
    got = compute(bed, {alias: topic}, ends, tmp_path / "from-state", state_dir, remote=connect_server.url)
    want = compute(bed, {alias: topic}, ends, tmp_path / "full", remote=connect_server.url)
    assert got["state"]["full_pass"] == [] and got["tail_offsets"] == end - covered
    assert want["records_read"] < end  # the full pass reads what compaction left
    assert got["checkpoints"] == want["checkpoints"] > 0 and got["groups"] == want["groups"]

    def answers(path):
        return sorted(([r[c] for c in ANSWER_COLUMNS] for r in rows(path)), key=lambda r: r[:4])

    assert answers(got["output"]) == answers(want["output"])


@pytest.mark.airflow
def test_the_dags_run_the_job_on_the_warm_server_and_the_failover_reads_only_the_tail(
    prepared, connect_server, tmp_path, monkeypatch
):
    """Through the real DAGs (Airflow dag.test()) with ``spark_connect_default`` pointing at the warm server: the
    scheduled ``mm2_sync_archive`` DAG's refresh_latest_state publishes a version covering MM2's checkpoint topic up
    to its end (beside the archive task); then a failover DAG run (dry run) computes the latest checkpoints on the
    same server, from that version plus the tail, and its plan is the one MM2's checkpoints give. Issue 34: the
    archive, and so the state, are in an object store (S3Proxy), and the two runs are on two "hosts": the refresh
    works on one copy of the state and pushes its version to the store, the failover pulls it into another."""
    from mm2_failover.adapters import store
    from testbed import localenv
    from testbed.objectstore import ObjectStore

    bed, target = prepared.bed, prepared.target
    g = prepared.names["group"]
    from testbed.objectstore import forget_filesystems

    s3 = ObjectStore.start(tmp_path / "s3")
    try:
        s3.use(monkeypatch)
        monkeypatch.setenv("MM2_FAILOVER_ARCHIVE", s3.url("archive"))
        _dags_on_two_hosts(prepared, connect_server, tmp_path, monkeypatch, s3, store, localenv, bed, target, g)
    finally:
        s3.stop()
        forget_filesystems()


def _dags_on_two_hosts(prepared, connect_server, tmp_path, monkeypatch, s3, store, localenv, bed, target, g):
    monkeypatch.setenv("MM2_FAILOVER_STATE", str(tmp_path / "host-a" / "state"))
    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_CONNECT_DEFAULT",
        json.dumps({"conn_type": "spark_connect", "host": "127.0.0.1", "port": connect_server.port}),
    )
    before = target.offsets([(bed.checkpoints_topic, 0)], "latest")[(bed.checkpoints_topic, 0)]
    dr = localenv.run_dag("mm2_sync_archive")
    states = localenv.task_states("mm2_sync_archive", dr.run_id)
    assert states == {"archive_offset_syncs": "success", "refresh_latest_state": "success"}, states
    state_dir = tmp_path / "host-a" / "state"
    v = StateRoot(state_dir).current()
    assert v is not None and v["aliases"]["primary"]["topic"] == bed.checkpoints_topic
    assert int(v["aliases"]["primary"]["covers"]["0"]) >= before
    assert v["aliases"]["primary"]["topic_id"] == target.topic_id(bed.checkpoints_topic)
    assert json.loads((state_dir / "last-refresh.json").read_text())["spark"]["route"] == "spark-connect"
    kept = store.listing(s3.url("archive", "latest-state"))  # pushed: the version's files, then the pointer
    assert f"{v['name']}/version.json" in kept and "CURRENT.json" in kept
    assert any(k.startswith(f"{v['name']}/buffers/") for k in kept)
    assert any(k.startswith("primary/checkpoints/manifests/") for k in store.listing(s3.url("archive")))

    monkeypatch.setenv("MM2_FAILOVER_STATE", str(tmp_path / "host-b" / "state"))  # another host: no copy yet
    state_dir = tmp_path / "host-b" / "state"
    dr = localenv.run_dag("mm2_failover", {"groups_regex": g, "dry_run": True, "drain_quiet_seconds": 1})
    states = localenv.task_states("mm2_failover", dr.run_id)
    assert states["compute_latest_checkpoints"] == "success" and states["apply_group_offsets"] == "skipped", states
    art = RunFolder(run_dir("mm2_failover", dr.run_id))
    summary = art.load_summary().raw
    assert summary["spark"]["route"] == "spark-connect"
    assert summary["state"]["full_pass"] == [] and summary["state"]["aliases"]["primary"]["version"] in [
        x["name"] for x in StateRoot(state_dir).versions()
    ]
    assert summary["tail_offsets"] < before, summary["tail_offsets"]  # only what MM2 wrote since the refresh
    assert summary["output_layout"]["layout"] == "state+delta", summary["output_layout"]
    # the answers from version + tail are MM2's latest checkpoints of the group, as Python decodes them
    want = {
        (k.topic, k.partition): c.downstream_offset
        for k, c in scenario.read_checkpoints(target, bed.checkpoints_topic).items()
        if k.group == g
    }
    got = {(r["topic"], r["partition"]): r["downstream_offset"] for r in rows(art.checkpoints) if r["group"] == g}
    assert got == want and len(got) == 3
    assert len(art.plan_csv.read_text().splitlines()) == 3  # the dry run's plan (it writes no report)
