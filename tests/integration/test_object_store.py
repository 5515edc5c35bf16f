"""Artifacts in an object store (issue 34 item 1), on a real S3-compatible server: S3Proxy on loopback
(:mod:`testbed.objectstore`), on the session's bed (real Kafka, real MM2). The failover DAG itself runs with its
artifacts and archive only in S3Proxy, on two Celery workers, in tests/e2e/test_ui.py; here, what that run cannot
show:

* two archive writers racing on the same archive in the store (no lock there): every record archived once, the
  loser appends again from the winner's manifest;
* a writer killed between its files and its manifest leaves nothing a reader takes for archived;
* the file lock is refused with artifacts in a store (it cannot keep one writer across hosts).
"""

from __future__ import annotations

import json
import os
import threading
import types

import pytest

from testbed import scenario

pytestmark = [pytest.mark.bed]


@pytest.fixture(scope="module")
def s3(bed):
    from testbed.objectstore import ObjectStore, forget_filesystems

    store = ObjectStore.start(bed.run_dir / "s3proxy")
    yield store
    store.stop()
    forget_filesystems()


@pytest.fixture
def in_store(s3, monkeypatch, names):
    """This test's artifacts and archive under their own prefixes of the bucket, the writers' lock in Kafka."""
    s3.use(monkeypatch)
    art, arch = s3.url(f"artifacts-{names['group']}"), s3.url(f"archive-{names['group']}")
    monkeypatch.setenv("MM2_FAILOVER_ARTIFACTS", art)
    monkeypatch.setenv("MM2_FAILOVER_ARCHIVE", arch)
    monkeypatch.setenv("MM2_FAILOVER_LOCK", "kafka")
    return art, arch


SYNC_TOPIC = "mm2-offset-syncs.backup.internal"  # the bed's MM2 keeps its syncs on the source


def keys(s3, url: str) -> dict[str, int]:
    from mm2_failover.adapters import store

    return store.listing(url)


def test_two_archive_writers_racing_in_the_store_archive_every_record_once(
    bed, source, names, s3, in_store, monkeypatch, caplog
):
    """No lock in the store: each append creates the manifest's next generation exclusively; the loser of a race
    reads the winner's manifest and appends from it. Both writers pause between their files and their manifest
    (a fault point), so both read the same generation: exactly one loses and says so. After both, every sync
    record is archived exactly once and the generations follow each other."""
    import logging

    from mm2_failover.adapters.syncs import SyncArchive

    monkeypatch.setenv("MM2_FAILOVER_FAULT", "sleep2@archive.after_files")
    caplog.set_level(logging.WARNING, logger="mm2_failover.adapters.syncs")

    _art, arch = in_store
    scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        group=names["group"],
        topic=names["topic"],
        partitions=2,
        produced=60,
        consumed_upto={0: 10, 1: 20},
    )
    topic = SYNC_TOPIC
    results, errors = [], []
    barrier = threading.Barrier(2)

    def writer():
        try:
            barrier.wait(10)
            results.append(SyncArchive(arch, "primary").append(source, topic, "source"))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    a = SyncArchive(arch, "primary")
    rows = a.read().rows
    keys_ = [(r["sync_partition"], r["sync_offset"]) for r in rows]
    assert len(keys_) == len(set(keys_)), "a sync record archived twice"
    ends = source.offsets([(topic, p) for (_t, p) in source.partitions([topic])], "latest")
    starts = source.offsets([(topic, p) for (_t, p) in source.partitions([topic])], "earliest")
    assert a.archived_to() == {p: e for (_t, p), e in ends.items()}
    # compaction may have removed records before the first append read them; everything readable is archived
    assert len(keys_) >= sum(ends.values()) - sum(starts.values()) - sum(
        g["to"] - g["from"] for v in a.manifest()["partitions"].values() for g in v.get("gaps", [])
    )
    lost_races = [r for r in caplog.records if "another writer archived at the same time" in r.getMessage()]
    assert len(lost_races) == 1, [r.getMessage() for r in caplog.records]
    gens = a._generations()
    assert gens == [f"{i:012d}.json" for i in range(1, len(gens) + 1)] and len(gens) == 2
    assert sum(r.appended for r in results) == len(keys_)  # the loser appended only what the winner had not


def test_a_writer_killed_between_its_files_and_its_manifest_leaves_nothing_archived(bed, source, names, s3, in_store):
    """SIGKILLed (a fault point) after its Parquet files are in the store and before the manifest's generation: a
    reader finds no manifest naming them; the next append converges."""
    import os
    import subprocess
    import sys

    from mm2_failover.adapters.config import REPO_ROOT
    from mm2_failover.adapters.syncs import SyncArchive

    _art, arch = in_store
    scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        group=names["group"],
        topic=names["topic"],
        partitions=1,
        produced=30,
        consumed_upto={0: 10},
    )
    code = (
        "import sys; from mm2_failover.adapters.kafka.cluster import Cluster; "
        "from mm2_failover.adapters.syncs import SyncArchive; "
        "SyncArchive(sys.argv[1], 'primary').append(Cluster({'bootstrap.servers': sys.argv[2]}, 'source'), "
        "sys.argv[3], 'source')"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, arch, bed.source_bootstrap, SYNC_TOPIC],
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "plugins"), "MM2_FAILOVER_FAULT": "kill@archive.after_files"},
        capture_output=True,
        text=True,
    )
    assert p.returncode == -9, p.stderr[-2000:]
    a = SyncArchive(arch, "primary")
    files = [k for k in keys(s3, arch) if k.endswith(".parquet")]
    assert files, "the killed writer had written its files"
    assert a.manifest() == {} and a.read().rows == []  # files without a manifest are never read
    res = a.append(source, SYNC_TOPIC, "source")  # the retry converges
    assert res.appended == len(a.read().rows) > 0


@pytest.mark.spark
def test_the_job_writes_its_answers_into_the_store_through_s3a_on_either_route(
    bed, names, s3, in_store, connect_server, tmp_path
):
    """Issue 34 item 1, the Spark job on the store's URIs: with run folders in ``s3://`` the job's answers are written
    by Spark itself through S3A (``s3a://``: Hadoop's S3 filesystem, its jars from Maven Central), through
    spark-submit and on the warm Spark Connect server; the task uploads only the summary, once Spark's commit
    marker is there. The answers are MM2's checkpoints, and the same as those of the staged route (the job writes
    on the task's host, the task uploads: ``MM2_FAILOVER_SPARK_IO=stage``), which leaves no commit marker.
    The store's secret key, which the job sets on its Spark session, is nowhere in Spark's event log (its command
    line, properties and every query's settings) or the output."""
    from mm2_failover.adapters import store
    from mm2_failover.adapters.answers import checkpoint_rows
    from mm2_failover.adapters.config import s3a_url
    from mm2_failover.adapters.runfolder import RunFolder
    from testbed.localenv import run_cli

    g = names["group"]
    prep = scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        group=g,
        topic=names["topic"],
        partitions=2,
        produced=40,
        consumed_upto={0: 40, 1: 10},
    )
    want = {(c.topic, p): (c.upstream_offset, c.downstream_offset) for p, c in prep.checkpoints.items()}
    art, _arch = in_store
    from testbed.objectstore import CREDENTIAL

    events = tmp_path / "spark-events"  # Spark's event log of the spark-submit run, plain text: searchable
    events.mkdir()
    logged = json.dumps(
        {
            **json.loads(os.environ.get("MM2_FAILOVER_SPARK_CONF") or "{}"),
            "spark.eventLog.enabled": "true",
            "spark.eventLog.compress": "false",
            "spark.eventLog.dir": events.as_uri(),
        }
    )
    for io, route, remote in (
        ("s3a", "spark-submit", "none"),
        ("s3a", "spark-connect", connect_server.url),
        ("stage", "spark-connect", connect_server.url),
    ):
        run = f"{art}/cli-{io}-{route}"
        r = run_cli(
            "plan",
            "--run-dir",
            run,
            "--groups-regex",
            g,
            "--spark-remote",
            remote,
            bed=bed,
            env={"MM2_FAILOVER_SPARK_IO": io, "MM2_FAILOVER_SPARK_CONF": logged},
        )
        assert r.returncode == 0, (io, route, r.stderr[-3000:])
        assert CREDENTIAL not in r.stdout + r.stderr
        folder = RunFolder(store.as_path(run))
        summary = json.loads(store.read_bytes(folder.checkpoints_summary))
        assert summary["spark"]["route"] == route, summary["spark"]
        marker = store.exists(folder.checkpoints / "_SUCCESS")  # Spark's job commit; an upload skips it
        if io == "s3a":
            assert summary["output"] == s3a_url(store.url_of(folder.checkpoints)) and marker, summary["output"]
        else:
            assert not summary["output"].startswith("s3a://") and not marker, summary["output"]
        got = {
            (c["topic"], c["partition"]): (c["upstream_offset"], c["downstream_offset"])
            for c in checkpoint_rows(folder.checkpoints)
            if c["group"] == g
        }
        assert got == want, (io, route, got, want)
        assert len(store.read_bytes(folder.dir / "plan.csv").decode().splitlines()) == 2  # the plan read them
    files = [f for f in events.rglob("*") if f.is_file()]
    assert files and any(b"SparkListenerSQLExecutionStart" in f.read_bytes() for f in files)  # queries logged
    assert not [f for f in files if CREDENTIAL.encode() in f.read_bytes()]


@pytest.mark.spark
def test_the_state_is_written_and_read_in_the_store_through_s3a_by_jobs_on_two_hosts(
    bed, names, s3, in_store, connect_server, tmp_path
):
    """The latest-checkpoint state through S3A: the refresh on "host" A (its own state folder) has Spark write its
    version into the store, ``s3a://<archive>/latest-state/<version>``, completed by its ``version.json`` there, and
    nothing on A's disk; the failover's job on "host" B (another, empty, state folder) starts from that version, and
    Spark reads the version's tables from the store - not from B's copy, which executors on other hosts could not
    read. The answers are MM2's checkpoints. Each job is first SIGKILLed once (fault points) after Spark's writes and
    before what makes them count (the version.json; the summary): nothing is taken for whole, and the rerun
    converges."""
    from mm2_failover.adapters import store
    from mm2_failover.adapters.answers import checkpoint_rows
    from mm2_failover.adapters.config import s3a_url
    from mm2_failover.adapters.runfolder import RunFolder, RunFolderError
    from mm2_failover.stages.compute_checkpoints import whole_answers
    from testbed.localenv import run_cli

    g = names["group"]
    prep = scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        group=g,
        topic=names["topic"],
        partitions=2,
        produced=40,
        consumed_upto={0: 40, 1: 10},
    )
    want = {(c.topic, p): (c.upstream_offset, c.downstream_offset) for p, c in prep.checkpoints.items()}
    art, arch = in_store
    host_a, host_b = ({"MM2_FAILOVER_STATE": str(tmp_path / h)} for h in ("host-a", "host-b"))
    # the refresh's job SIGKILLed (a fault point) once Spark wrote the version's tables, before its version.json:
    # nothing is published - no CURRENT.json, and a folder without version.json, which is never a version
    r = run_cli(
        "refresh-state",
        "--spark-remote",
        connect_server.url,
        bed=bed,
        env={**host_a, "MM2_FAILOVER_FAULT": "kill@state.before_publish"},
    )
    assert r.returncode != 0 and not store.exists(f"{arch}/latest-state/CURRENT.json"), r.stderr[-3000:]
    killed = [n for n in store.names(f"{arch}/latest-state") if n.startswith("v-")]
    assert killed and not any(store.exists(f"{arch}/latest-state/{n}/version.json") for n in killed), killed
    r = run_cli("refresh-state", "--spark-remote", connect_server.url, bed=bed, env=host_a)  # the retry publishes
    assert r.returncode == 0, r.stderr[-3000:]
    version = json.loads(store.read_bytes(f"{arch}/latest-state/CURRENT.json"))["version"]
    assert [n for n in store.names(f"{arch}/latest-state") if n.startswith("v-")] == [version]  # the killed one's gone
    objs = store.listing(f"{arch}/latest-state/{version}")
    assert "buffers/_SUCCESS" in objs and "version.json" in objs, sorted(
        objs
    )  # Spark's own commit (an upload skips it)
    named = json.loads(store.read_bytes(f"{arch}/latest-state/{version}/version.json"))["files"]
    assert named and all(objs[n] == size for n, size in named.items())  # the files it names, as they are
    assert not list((tmp_path / "host-a").glob("v-*"))  # written in the store, not on the host first
    run = f"{art}/cli-from-state"
    folder = RunFolder(store.as_path(run))
    # the failover's job SIGKILLed once Spark committed its answers into the store, before the summary: they are
    # not read (Spark's commit marker alone vouches for nothing); the plan run again converges
    plan = ["plan", "--run-dir", run, "--groups-regex", g, "--spark-remote", connect_server.url]
    r = run_cli(*plan, bed=bed, env={**host_b, "MM2_FAILOVER_FAULT": "kill@job.after_answers"})
    assert r.returncode != 0 and store.exists(folder.checkpoints / "_SUCCESS"), r.stderr[-3000:]
    with pytest.raises(RunFolderError, match="have no summary"):
        whole_answers(types.SimpleNamespace(folder=folder))
    r = run_cli(*plan, bed=bed, env=host_b)
    assert r.returncode == 0, r.stderr[-3000:]
    st = json.loads(store.read_bytes(folder.checkpoints_summary))["state"]
    assert {a["version"] for a in st["aliases"].values()} == {version}, st  # every alias from the refresh's version
    assert st["read_from"] == [f"{s3a_url(arch)}/latest-state/{version}"], st
    got = {
        (c["topic"], c["partition"]): (c["upstream_offset"], c["downstream_offset"])
        for c in checkpoint_rows(folder.checkpoints)
        if c["group"] == g
    }
    assert got == want, (got, want)


def test_the_file_lock_is_refused_with_artifacts_in_a_store(s3):
    from mm2_failover.adapters.config import WriterLockSettings

    with pytest.raises(ValueError, match="MM2_FAILOVER_LOCK=kafka"):
        WriterLockSettings.from_env({"MM2_FAILOVER_ARTIFACTS": s3.url("artifacts")})
    assert (
        WriterLockSettings.from_env({"MM2_FAILOVER_ARTIFACTS": s3.url("a"), "MM2_FAILOVER_LOCK": "kafka"}).kind
        == "kafka"
    )
    assert json.dumps(s3.env)  # the store's settings are plain AWS variables
