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
import threading

import pytest

from testbed import scenario

pytestmark = [pytest.mark.bed]


@pytest.fixture(scope="module")
def s3(bed):
    from testbed.objectstore import ObjectStore

    from testbed.objectstore import forget_filesystems

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
    from mm2_failover import store

    return store.listing(url)


def test_two_archive_writers_racing_in_the_store_archive_every_record_once(bed, source, names, s3, in_store,
                                                                          monkeypatch, caplog):
    """No lock in the store: each append creates the manifest's next generation exclusively; the loser of a race
    reads the winner's manifest and appends from it. Both writers pause between their files and their manifest
    (a fault point), so both read the same generation: exactly one loses and says so. After both, every sync
    record is archived exactly once and the generations follow each other."""
    import logging

    from mm2_failover.syncs import SyncArchive

    monkeypatch.setenv("MM2_FAILOVER_FAULT", "sleep2@archive.after_files")
    caplog.set_level(logging.WARNING, logger="mm2_failover.syncs")

    _art, arch = in_store
    scenario.prepare(bed.source_bootstrap, bed.target_bootstrap, group=names["group"], topic=names["topic"],
                     partitions=2, produced=60, consumed_upto={0: 10, 1: 20})
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
        g["to"] - g["from"] for v in a.manifest()["partitions"].values() for g in v.get("gaps", []))
    lost_races = [r for r in caplog.records if "another writer archived at the same time" in r.getMessage()]
    assert len(lost_races) == 1, [r.getMessage() for r in caplog.records]
    gens = a._generations()
    assert gens == [f"{i:012d}.json" for i in range(1, len(gens) + 1)] and len(gens) == 2
    assert sum(r.appended for r in results) == len(keys_)  # the loser appended only what the winner had not


def test_a_writer_killed_between_its_files_and_its_manifest_leaves_nothing_archived(bed, source, names, s3,
                                                                                  in_store):
    """SIGKILLed (a fault point) after its Parquet files are in the store and before the manifest's generation: a
    reader finds no manifest naming them; the next append converges."""
    import os
    import subprocess
    import sys

    from mm2_failover.config import REPO_ROOT
    from mm2_failover.syncs import SyncArchive

    _art, arch = in_store
    scenario.prepare(bed.source_bootstrap, bed.target_bootstrap, group=names["group"], topic=names["topic"],
                     partitions=1, produced=30, consumed_upto={0: 10})
    code = ("import sys; from mm2_failover.kafka_io import Cluster; from mm2_failover.syncs import SyncArchive; "
            "SyncArchive(sys.argv[1], 'primary').append(Cluster({'bootstrap.servers': sys.argv[2]}, 'source'), "
            "sys.argv[3], 'source')")
    p = subprocess.run([sys.executable, "-c", code, arch, bed.source_bootstrap, SYNC_TOPIC], timeout=120,
                       env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "plugins"),
                            "MM2_FAILOVER_FAULT": "kill@archive.after_files"}, capture_output=True, text=True)
    assert p.returncode == -9, p.stderr[-2000:]
    a = SyncArchive(arch, "primary")
    files = [k for k in keys(s3, arch) if k.endswith(".parquet")]
    assert files, "the killed writer had written its files"
    assert a.manifest() == {} and a.read().rows == []  # files without a manifest are never read
    res = a.append(source, SYNC_TOPIC, "source")  # the retry converges
    assert res.appended == len(a.read().rows) > 0


def test_the_file_lock_is_refused_with_artifacts_in_a_store(s3):
    from mm2_failover.config import WriterLockSettings

    with pytest.raises(ValueError, match="MM2_FAILOVER_LOCK=kafka"):
        WriterLockSettings.from_env({"MM2_FAILOVER_ARTIFACTS": s3.url("artifacts")})
    assert WriterLockSettings.from_env({"MM2_FAILOVER_ARTIFACTS": s3.url("a"), "MM2_FAILOVER_LOCK": "kafka"}).kind \
        == "kafka"
    assert json.dumps(s3.env)  # the store's settings are plain AWS variables
