"""mm2_failover.adapters.store, rule by rule, on a local folder and on fsspec's in-memory filesystem (a store with no
rename, no fsync and no lock, like S3; the real S3 server is in tests/integration/test_object_store.py)."""

from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path

import pytest

from mm2_failover.adapters import store


@pytest.fixture(params=["local", "memory"])
def where(request, tmp_path):
    """A fresh root in a local folder, then in the in-memory store."""
    if request.param == "local":
        return str(tmp_path / "root")
    return f"memory://bucket-{uuid.uuid4().hex[:8]}/root"


# ------------------------------------------------------------------------------------------ 1. one location, two kinds


def test_a_plain_path_or_file_url_is_local_and_any_other_scheme_is_a_store(tmp_path):
    assert store.as_path(str(tmp_path)) == tmp_path and isinstance(store.as_path(str(tmp_path)), Path)
    assert store.as_path(f"file://{tmp_path}") == tmp_path
    assert not store.is_remote(tmp_path) and not store.is_remote(f"file://{tmp_path}")
    for url in ("s3://bucket/prefix", "memory://b/p", "gs://b/p"):
        assert store.is_remote(url)
    p = store.as_path("memory://b/p")
    assert store.as_path(p) is p and store.is_remote(p / "x")
    assert store.url_of(store.as_path("s3://bucket/a/b")) == "s3://bucket/a/b"
    assert store.url_of(tmp_path) == str(tmp_path)


# ------------------------------------------------------------------------------------------ 2. whole objects


def test_write_bytes_replaces_an_object_whole_and_reads_back(where):
    p = store.as_path(where) / "a" / "b.json"
    store.write_bytes(p, b"one")
    store.write_bytes(p, b"two")
    assert store.read_bytes(p) == b"two" and store.exists(p)
    assert store.listing(where) == {"a/b.json": 3}


def test_a_local_write_leaves_no_temporary_file_and_fsyncs_file_and_folder(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd))[1])
    store.write_bytes(tmp_path / "x.json", b"{}")
    assert sorted(os.listdir(tmp_path)) == ["x.json"]
    assert any(s.endswith("x.json.tmp") for s in synced) and str(tmp_path) in synced


# ------------------------------------------------------------------------------------------ 3. immutable first, pointer last


def test_verify_sizes_names_every_file_missing_or_of_another_size(where):
    root = store.as_path(where)
    store.write_bytes(root / "part-0.parquet", b"12345")
    store.write_bytes(root / "part-1.parquet", b"12")
    assert store.verify_sizes(root, {"part-0.parquet": 5, "part-1.parquet": 2}) == []
    assert store.verify_sizes(root, {"part-0.parquet": 5, "part-1.parquet": 3, "part-2.parquet": 1}) == [
        "part-1.parquet: 2 bytes, the manifest says 3",
        "part-2.parquet: missing",
    ]


def test_upload_and_download_a_tree_skip_hidden_files_and_keep_names_and_sizes(where, tmp_path):
    src = tmp_path / "src"
    (src / "delta").mkdir(parents=True)
    (src / "delta" / "part-0.parquet").write_bytes(b"abc")
    (src / "_SUCCESS").write_bytes(b"")
    (src / "delta" / ".part-0.parquet.crc").write_bytes(b"x")
    sizes = store.upload_tree(src, store.as_path(where) / "out")
    assert sizes == {"delta/part-0.parquet": 3} == store.listing(store.as_path(where) / "out")
    got = store.download_tree(store.as_path(where) / "out", tmp_path / "back", sizes)
    assert got == sizes and (tmp_path / "back" / "delta" / "part-0.parquet").read_bytes() == b"abc"


# ------------------------------------------------------------------------------------------ 4. exclusive create


def test_create_writes_only_where_nothing_is_and_says_whether_it_did(where):
    p = store.as_path(where) / "manifests" / "000000000001.json"
    assert store.create(p, b"first") is True
    assert store.create(p, b"second") is False
    assert store.read_bytes(p) == b"first"


def test_racing_creators_exactly_one_wins(where):
    p = store.as_path(where) / "gen.json"
    won, barrier = [], threading.Barrier(8)

    def go(i):
        barrier.wait(5)
        if store.create(p, str(i).encode()):
            won.append(i)

    ts = [threading.Thread(target=go, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)
    assert len(won) == 1 and store.read_bytes(p) == str(won[0]).encode()
    if not store.is_remote(where):
        assert os.listdir(Path(where)) == ["gen.json"]  # no creator's temporary file left


# ------------------------------------------------------------------------------------------ 5. a folder is a prefix


def test_names_listing_and_remove_tree_treat_a_prefix_as_a_folder(where):
    root = store.as_path(where)
    assert store.names(root) == [] and store.listing(root) == {}
    store.write_bytes(root / "run-1" / "report.json", b"{}")
    store.write_bytes(root / "run-1" / "rows" / "part-0.parquet", b"1")
    store.write_bytes(root / "run-2" / "report.json", b"{}")
    assert store.names(root) == ["run-1", "run-2"]
    store.remove_tree(root / "run-1")
    store.remove_tree(root / "never-there")
    assert store.names(root) == ["run-2"]


# ------------------------------------------------------------------------------------------ the readers on a store


def test_a_run_folder_round_trips_its_artifacts_in_a_store():
    from mm2_failover.adapters.runfolder import RunFolder, head_text, read_json, write_rows_parquet

    f = RunFolder(f"memory://bucket-{uuid.uuid4().hex[:8]}/art/mm2_failover/run-1")
    f.save("run.json", {"a": 1})
    assert f.load("run.json") == {"a": 1} and read_json(f.path("run.json")) == {"a": 1}
    write_rows_parquet(f.path("rows.parquet"), [{"g": "x", "n": 1}, {"g": "y", "n": 2}], {"g": "string", "n": "int64"})
    assert f.parquet_rows("rows.parquet", "fix") == [{"g": "x", "n": 1}, {"g": "y", "n": 2}]
    assert f.parquet_rows("rows.parquet", "fix", limit=1) == [{"g": "x", "n": 1}]
    store.write_bytes(f.path("report.md"), "".join(f"line {i}\n" for i in range(400)).encode())
    assert head_text(f.path("report.md"), 3).startswith("line 0\nline 1\nline 2\n\n... 397 more line(s)")


def test_the_answers_are_read_from_a_store_in_both_layouts(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mm2_failover.adapters import answers

    root = store.as_path(f"memory://bucket-{uuid.uuid4().hex[:8]}/run/latest_checkpoints.parquet")
    t = pa.table({"source_alias": ["primary"], "group": ["g"], "topic": ["t"], "partition": [0]})
    local = tmp_path / "full"
    local.mkdir()
    pq.write_table(t, local / "part-0.parquet")
    store.upload_tree(local, root)
    assert answers.read_table(root).to_pylist() == t.to_pylist()
    assert answers.count_groups(root) == 1


def test_the_readiness_history_appends_in_a_store_and_keeps_its_tail(monkeypatch):
    from mm2_failover.stages import assess_readiness as stage

    base = store.as_path(f"memory://bucket-{uuid.uuid4().hex[:8]}/art/mm2_failover_readiness")
    monkeypatch.setattr(stage, "HISTORY_TAIL_BYTES", 300)
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc).isoformat()
    for i in range(10):
        stage.append_history({"i": i, "computed_at": now}, base)
    lines = [json.loads(x) for x in store.read_bytes(base / stage.HISTORY).decode().splitlines()]
    assert [x["i"] for x in lines] == list(range(10 - len(lines), 10)) and 2 <= len(lines) < 10  # whole lines
    assert [h["i"] for h in stage.history(base)][-1] == 9
