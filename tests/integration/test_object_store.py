"""Artifacts in an object store (issue 34 item 1), on a real S3-compatible server: S3Proxy on loopback
(:mod:`testbed.objectstore`), on the session's bed (real Kafka, real MM2, real Spark, real Airflow's dag.test()).

* the failover DAG with ``MM2_FAILOVER_ARTIFACTS`` and ``MM2_FAILOVER_ARCHIVE`` in ``s3://``: 0 lost, 0 re-read, and
  every artifact of the run, the archive's, in the store - none in a local folder; the report read back from it, and
  the report pages serve it;
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

pytestmark = [pytest.mark.bed, pytest.mark.spark, pytest.mark.airflow]


@pytest.fixture(scope="module")
def s3(bed):
    from testbed.objectstore import ObjectStore

    store = ObjectStore.start(bed.run_dir / "s3proxy")
    yield store
    store.stop()


@pytest.fixture
def in_store(s3, monkeypatch, names):
    """This test's artifacts and archive under their own prefixes of the bucket, the writers' lock in Kafka."""
    for k, v in s3.env.items():
        monkeypatch.setenv(k, v)
    art, arch = s3.url(f"artifacts-{names['group']}"), s3.url(f"archive-{names['group']}")
    monkeypatch.setenv("MM2_FAILOVER_ARTIFACTS", art)
    monkeypatch.setenv("MM2_FAILOVER_ARCHIVE", arch)
    monkeypatch.setenv("MM2_FAILOVER_LOCK", "kafka")
    return art, arch


SYNC_TOPIC = "mm2-offset-syncs.backup.internal"  # the bed's MM2 keeps its syncs on the source


def keys(s3, url: str) -> dict[str, int]:
    from mm2_failover import store

    return store.listing(url)


def test_failover_dag_keeps_its_artifacts_and_the_archive_in_the_object_store(bed, target, names, s3, in_store,
                                                                            tmp_path):
    from testbed import localenv
    from mm2_failover.config import run_dir
    from mm2_failover.runfolder import RunFolder

    art, arch = in_store
    local_before = {p for p in (bed.run_dir).rglob("*") if "s3proxy" not in p.parts}
    prep = scenario.prepare(bed.source_bootstrap, bed.target_bootstrap, group=names["group"], topic=names["topic"],
                            partitions=3, produced=120, consumed_upto={0: 30, 1: 75, 2: 120})
    dr = localenv.run_dag("mm2_failover", {"groups_regex": names["group"], "drain_quiet_seconds": 2,
                                           "mm2_config": str(bed.run_dir / "mm2" / "mm2.properties")})
    assert dr.state == "success"

    # the group resumes exactly where it stopped on the source
    committed = target.committed(names["group"])
    assert committed == {(prep.replica_topic, p): o for p, o in prep.consumed_upto.items()}
    first = scenario.first_records_on_target(bed.target_bootstrap, names["group"], prep.replica_topic, 3)
    for o in scenario.compare(prep, committed, first):
        assert o.lost == 0 and o.re_read == 0

    # every artifact of the run is in the store, read back through the same code
    folder = run_dir("mm2_failover", dr.run_id)
    assert str(folder).startswith(art.removeprefix("s3://")) or art in str(folder)
    objs = keys(s3, f"{art}/mm2_failover")
    run_prefix = next(iter(objs)).split("/", 1)[0]
    names_in_run = {k.split("/", 1)[1] for k in objs if k.startswith(run_prefix + "/")}
    for want in ("run.json", "snapshot.json", "drain.json", "audit.json", "plan.json", "plan.csv", "backup.json",
                 "apply.json", "report.json", "report.md", "report_partitions.parquet", "summary.json",
                 "latest_checkpoints.summary.json"):
        assert want in names_in_run, (want, sorted(names_in_run))
    assert any(n.startswith("latest_checkpoints.parquet/") and n.endswith(".parquet") for n in names_in_run)
    rf = RunFolder(folder)
    rep = rf.load_report()
    assert rep.outcome == "succeeded" and rep.totals["committed"] == 3 and rep.totals["mismatches"] == 0
    assert len(rep.partitions) == 3
    assert rf.load_summary()["groups"] >= 1

    # the archive the capture appended to: files first, then a manifest generation naming them
    arc = keys(s3, arch)
    gens = sorted(k for k in arc if "/offset-syncs/manifests/" in k)
    assert gens, sorted(arc)
    from mm2_failover.syncs import SyncArchive

    a = SyncArchive(arch, "primary")
    named = [f for v in a.manifest()["partitions"].values() for f in v.get("files", [])]
    assert named and all(f"primary/offset-syncs/{n}" in arc for n in named)
    assert a.read().unreadable == []

    # nothing of the run on a local disk: no run folder, no archive under the bed's folders
    local_new = {p for p in bed.run_dir.rglob("*") if p not in local_before and "s3proxy" not in p.parts}
    assert not [p for p in local_new if dr.run_id.replace(":", "_") in str(p) or "offset-syncs" in str(p)], local_new

    # the report pages read the run from the store
    from fastapi.testclient import TestClient

    from mm2_failover.ui import create_app

    client = TestClient(create_app(art))  # open access: who may read is tested in test_ui_pages
    page = client.get("/")
    assert page.status_code == 200 and dr.run_id in page.text
    run_page = client.get(f"/runs/mm2_failover/{dr.run_id}")
    assert run_page.status_code == 200 and names["group"] in run_page.text, run_page.text[-600:]
    csv = client.get(f"/runs/mm2_failover/{dr.run_id}/plan.csv")
    assert csv.status_code == 200 and names["group"] in csv.text
    rows = client.get(f"/runs/mm2_failover/{dr.run_id}/report_partitions.parquet")  # streamed from the store
    import io

    import pyarrow.parquet as pq

    assert rows.status_code == 200 and pq.read_table(io.BytesIO(rows.content)).num_rows == 3


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
