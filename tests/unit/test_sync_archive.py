"""The offset-sync archive (mm2_failover.adapters.syncs) against an in-memory sync topic: safe file names, durability, one
writer at a time, and files that cannot be read (issue 31 item 9). The archive against MM2's real topic, killed
mid-append, is tested on the bed (tests/integration/test_exact_translation.py)."""

from __future__ import annotations

import threading
import time

import pytest

from mm2_failover.adapters.syncs import SyncArchive
from mm2_failover.rules import translate as tr


class FakeSyncCluster:
    """The few calls append() makes, over an in-memory sync topic of one partition whose end can move; ``gate``
    (an Event) holds a read until it is set."""

    name = "source"

    def __init__(self, end: int = 2, gate: threading.Event | None = None):
        self.end, self.gate = end, gate

    def topic_id(self, topic):
        return "ab/c+d=="

    def cluster_id(self):
        return "cid"

    def partitions(self, topics):
        return [(topics[0], 0)]

    def offsets(self, tps, spec="latest"):
        return {tp: (0 if spec == "earliest" else self.end) for tp in tps}

    def read(self, ends, start=None, timeout=0):
        if self.gate is not None:
            self.gate.wait(30)
        for o in range(start[("syncs", 0)], ends.get(("syncs", 0), 0)):
            k, v = tr.encode_sync("orders", 0, 10 * o, 10 * o)
            yield "syncs", 0, o, k, v, 1000


def test_archive_file_names_never_contain_a_path_separator(tmp_path):
    """Topic ids are base64 (they may hold '/' and '+'): the archive names its files safely."""
    import pyarrow.parquet as pq

    a = SyncArchive(tmp_path, "primary")
    res = a.append(FakeSyncCluster(), "syncs", "source")
    assert res.appended == 2 and all("/" not in f for f in res.files)
    assert [r["upstream"] for r in a.rows()] == [0, 10] and a.archived_to() == {0: 2}
    assert a.append(FakeSyncCluster(), "syncs", "source").appended == 0  # nothing new: nothing twice
    assert len(pq.read_table(str(a.dir / res.files[0]))) == 2


def test_a_file_is_on_disk_before_the_manifest_names_it(tmp_path, monkeypatch):
    import os

    synced, order = set(), []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        synced.add(os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    def replace(src, dst):
        order.append((str(dst), str(src) in synced))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    a = SyncArchive(tmp_path, "primary")
    res = a.append(FakeSyncCluster(), "syncs", "source")
    data = [ok for dst, ok in order if dst.endswith(".parquet")]
    assert data == [True]  # the data fsynced before the rename
    assert str(a.dir) in synced  # and the folder after it
    assert [dst for dst, _ok in order].index(str(a.manifest_path)) > [dst for dst, _ok in order].index(
        str(a.dir / res.files[0])
    )


def test_two_writers_never_rewrite_the_manifest_from_a_stale_copy(tmp_path):
    """Issue 31 item 9: writer A (a failover's capture) read the manifest and is slow reading the topic; writer B
    (the 5-minute DAG) appends meanwhile. Without one writer at a time, A then wrote its manifest from its stale copy:
    archived_to went backwards (B's file forgotten) or records were held twice."""
    gate = threading.Event()
    slow, fast = FakeSyncCluster(end=4, gate=gate), FakeSyncCluster(end=6)
    a = SyncArchive(tmp_path, "primary")
    t = threading.Thread(target=lambda: a.append(slow, "syncs", "source"))
    t.start()
    time.sleep(0.5)  # A holds the manifest it read, waiting on the topic
    done = threading.Event()
    b = threading.Thread(target=lambda: (SyncArchive(tmp_path, "primary").append(fast, "syncs", "source"), done.set()))
    b.start()
    time.sleep(1.0)
    assert not done.is_set()  # B waits for A's lock
    gate.set()
    t.join(30)
    b.join(30)
    held = [r["sync_offset"] for r in a.rows()]
    assert sorted(held) == list(range(6)) and a.archived_to() == {0: 6}


def test_a_file_that_cannot_be_read_is_named_never_raised(tmp_path):
    a = SyncArchive(tmp_path, "primary")
    first = a.append(FakeSyncCluster(end=2), "syncs", "source")
    a.append(FakeSyncCluster(end=4), "syncs", "source")
    path = a.dir / first.files[0]
    path.write_bytes(path.read_bytes()[:20])  # truncated (a disk that lost its tail, a hand)
    got = a.read()
    assert [r["sync_offset"] for r in got.rows] == [2, 3]
    assert len(got.unreadable) == 1 and str(path) in got.unreadable[0]


@pytest.mark.parametrize("broken", ["missing", "not json"])
def test_a_manifest_that_cannot_be_read_is_named_never_raised(tmp_path, broken):
    a = SyncArchive(tmp_path, "primary")
    a.append(FakeSyncCluster(), "syncs", "source")
    if broken == "missing":
        a.manifest_path.unlink()
        assert a.read().rows == [] and a.read().unreadable == []  # nothing archived: nothing to say
    else:
        a.manifest_path.write_text("{")
        assert a.read().rows == [] and "manifest.json" in a.read().unreadable[0]


@pytest.mark.parametrize("spill", [False, True], ids=["in-memory", "spilled"])
def test_the_columnar_read_keeps_only_the_wanted_partitions_below_the_end(tmp_path, spill):
    """Issue 31 item 13: the archive is read per partition as two int64 columns (in memory or spilled per partition),
    the same syncs the row-by-row read gives."""
    import numpy as np

    a = SyncArchive(tmp_path, "primary")
    for end in (2, 5, 9):
        a.append(FakeSyncCluster(end=end), "syncs", "source")
    cols, bad = a.partition_syncs({("orders", 0)}, end={0: 7}, batch_rows=2, spill_rows=0 if spill else 10**9)
    assert not bad and list(cols) == [("orders", 0)] and ("orders", 0) in cols and len(cols) == 1
    up, down = cols.pop(("orders", 0))
    assert up.dtype == np.int64 and list(up) == [10 * o for o in range(7)] and list(down) == list(up)
    assert cols.pop(("orders", 0)) is None and len(cols) == 0
    assert a.partition_syncs({("other", 0)})[0].pop(("other", 0)) is None
    everything, _ = a.partition_syncs()
    assert [int(x) for x in everything.pop(("orders", 0))[0]] == [r["upstream"] for r in a.rows()]


def test_partitions_are_proven_in_chunks_of_a_bounded_number_of_syncs():
    from mm2_failover.stages.translation import prove_chunks

    assert prove_chunks([("a", 5), ("b", 5), ("c", 5)], budget=10) == [["a", "b"], ["c"]]
    assert prove_chunks([("big", 50), ("a", 1), ("b", 1)], budget=10) == [["big"], ["a", "b"]]
    assert prove_chunks([("a", 1), ("big", 50), ("b", 1)], budget=10) == [["a"], ["big"], ["b"]]
    assert prove_chunks([], budget=10) == []
