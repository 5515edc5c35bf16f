"""Benchmark: the proof path's archive read and translation at scale (issue 31 item 13).

    PYTHONPATH=plugins:. .venv/bin/python bench/proof_path_bench.py --partitions 1000 --syncs 100000 \
        --groups-per-partition 10 --old-partitions 10

Writes a synthetic offset-sync archive in the archive's own format (one sync-topic partition, appended in files of
``--rows-per-file`` records in emission order: every source partition's syncs interleaved, as MM2 writes them), then
measures, each in a process of its own (its peak resident set, ``VmHWM``, before and after the work):

* **columnar** (what a failover does now): ``SyncArchive.partition_syncs`` streams the files column-wise into two
  int64 arrays per wanted partition, then a chunk of partitions at a time (``stages.translation.PROVE_SYNCS``) builds each
  ``SyncIndex.from_arrays`` and translates every group's position;
* **dicts** (how the archive was read before): ``SyncArchive.rows()`` (one Python dict per sync) and
  ``index_rows`` (one ``Sync`` object per sync) for every partition at once, then the same translations - only at
  ``--old-partitions`` partitions (at 1,000 x 100k it would need tens of GB), with the columnar path at the same
  scale in the same run for the ratio.

Every translation of the columnar path is checked against the dicts path where both ran. Prints a Markdown table;
writes JSON to bench/results/. The evidence reads that follow (bounded by the read budget per range, read and
indexed once per range however many groups share it) are not part of this figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOPIC = "orders"


def make_archive(root: Path, partitions: int, syncs: int, rows_per_file: int, seed: int = 31) -> list[int]:
    """An archive of ``partitions`` x ``syncs`` offset syncs; returns each partition's highest synced offset."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mm2_failover.adapters.runfolder import write_json

    rng = np.random.default_rng(seed)
    d = root / "primary" / "offset-syncs"
    d.mkdir(parents=True, exist_ok=True)
    shift = rng.integers(0, 50, size=partitions)  # the replica started later: its offsets are shifted
    last_up = np.zeros(partitions, dtype=np.int64)
    last_down = np.zeros(partitions, dtype=np.int64)
    per_t = max(1, rows_per_file // partitions)
    files = []
    for t0 in range(0, syncs, per_t):  # a file at a time, time-major (row t, column p), so that memory stays small
        t1 = min(syncs, t0 + per_t)
        ups = last_up + np.cumsum(rng.integers(1, 100, size=(t1 - t0, partitions)), axis=0)
        downs = np.maximum(np.maximum.accumulate(np.maximum(ups - shift, 0), axis=0), last_down)
        last_up, last_down = ups[-1], downs[-1]
        n = (t1 - t0) * partitions
        first = t0 * partitions
        table = pa.table(
            {
                "sync_partition": np.zeros(n, dtype=np.int32),
                "sync_offset": np.arange(first, first + n, dtype=np.int64),
                "timestamp_ms": np.full(n, 1_700_000_000_000, dtype=np.int64),
                "topic": pa.array([TOPIC] * n),
                "partition": np.tile(np.arange(partitions, dtype=np.int32), t1 - t0),
                "upstream": ups.reshape(-1),
                "downstream": downs.reshape(-1),
            }
        )
        name = f"bench-p0-{first}-{first + n}.parquet"
        pq.write_table(table, str(d / name))
        files.append(name)
    total = syncs * partitions
    write_json(
        d / "manifest.json",
        {
            "alias": "primary",
            "topic": "mm2-offset-syncs.backup.internal",
            "topic_id": "bench",
            "cluster_id": "bench",
            "location": "source",
            "partitions": {"0": {"files": files, "archived_to": total, "ranges": [[0, total]]}},
        },
    )
    return [int(x) for x in last_up]


def positions(top: list[int], groups: int, seed: int = 7) -> dict[int, list[int]]:
    import random

    rnd = random.Random(seed)
    return {p: sorted(rnd.randrange(0, t) for _ in range(groups)) for p, t in enumerate(top)}


def child(mode: str, root: str, partitions: int, groups: int, top: list[int]) -> dict:
    """One measured path, in this (fresh) process."""
    os.environ["MM2_FAILOVER_ARCHIVE"] = root
    import importlib

    from mm2_failover.adapters.syncs import SyncArchive, index_rows
    from mm2_failover.rules import translate as tr
    from mm2_failover.stages.translation import archived_syncs, build_index, prove_chunks

    for m in (
        "numpy",
        "pyarrow.parquet",
        "mm2_failover.adapters.syncs",
    ):  # imported before the clock, as in a running task
        importlib.import_module(m)

    pos = positions(top, groups)
    wanted = {(TOPIC, p) for p in range(partitions)}
    base_rss = _status_mib("VmHWM")
    t0 = time.monotonic()
    answers = {}
    if mode == "columnar":
        raw, bad = archived_syncs("primary", wanted)
        assert not bad, bad
        t_read = time.monotonic() - t0
        for chunk in prove_chunks([(tp, raw.rows(tp)) for tp in raw]):
            idx = {tp: build_index(raw, tp) for tp in chunk}
            for (_t, p), x in idx.items():
                for u in pos[p]:
                    answers[f"{p}:{u}"] = _answer(x.translate(u))
    else:
        rows = [r for r in SyncArchive(Path(root), "primary").rows() if (r["topic"], r["partition"]) in wanted]
        t_read = time.monotonic() - t0
        for (_t, p), syncs in index_rows(rows).items():
            x = tr.SyncIndex(syncs)
            for u in pos[p]:
                answers[f"{p}:{u}"] = _answer(x.translate(u))
    seconds = time.monotonic() - t0
    return {
        "mode": mode,
        "partitions": partitions,
        "seconds": round(seconds, 2),
        "read_seconds": round(t_read, 2),
        "peak_rss_mib": round(_status_mib("VmHWM"), 1),
        "rss_before_mib": round(base_rss, 1),
        "translations": len(answers),
        "answers": answers,
    }


def _status_mib(field: str) -> float:
    """This process's ``VmHWM`` (peak resident set) or ``VmRSS`` from /proc, in MiB: per address space, so that a
    child does not report its parent's peak (``ru_maxrss`` carries it across fork and exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _answer(t) -> list:
    from mm2_failover.rules import translate as tr

    return [t.downstream, t.rule] if isinstance(t, tr.Translation) else ["unproven"]


def run_child(mode: str, root: Path, partitions: int, groups: int, top: list[int]) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "plugins"), str(REPO)])}
    r = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            mode,
            "--root",
            str(root),
            "--partitions",
            str(partitions),
            "--groups-per-partition",
            str(groups),
            "--top",
            json.dumps(top[:partitions]),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    if r.returncode:
        raise RuntimeError(f"{mode} failed: {r.stderr[-3000:]}")
    return json.loads(r.stdout.splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--syncs", type=int, default=100_000, help="syncs per partition")
    ap.add_argument("--groups-per-partition", type=int, default=10)
    ap.add_argument("--old-partitions", type=int, default=10, help="partitions read the old way (dicts)")
    ap.add_argument("--rows-per-file", type=int, default=1_000_000)
    ap.add_argument("--child")
    ap.add_argument("--root")
    ap.add_argument("--top")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.root, a.partitions, a.groups_per_partition, json.loads(a.top))))
        return 0
    with tempfile.TemporaryDirectory(prefix="proof-bench-") as tmp:
        t0 = time.monotonic()
        big = make_archive(Path(tmp) / "big", a.partitions, a.syncs, a.rows_per_file)
        small = make_archive(Path(tmp) / "small", a.old_partitions, a.syncs, a.rows_per_file)
        made = time.monotonic() - t0
        size = sum(f.stat().st_size for f in Path(tmp, "big").rglob("*.parquet"))
        results = [
            run_child("dicts", Path(tmp) / "small", a.old_partitions, a.groups_per_partition, small),
            run_child("columnar", Path(tmp) / "small", a.old_partitions, a.groups_per_partition, small),
            run_child("columnar", Path(tmp) / "big", a.partitions, a.groups_per_partition, big),
        ]
    old, new_small, new_big = results
    assert old["answers"] == new_small["answers"], "the columnar path answered differently"
    print(f"archive: {a.partitions} x {a.syncs} syncs ({size / 2**20:.0f} MiB of Parquet) written in {made:.0f} s")
    print(
        "| path | partitions | syncs | translations | seconds (of which reading) | peak RSS MiB (before) |\n"
        "|---|---:|---:|---:|---:|---:|"
    )
    for r in results:
        print(
            f"| {r['mode']} | {r['partitions']} | {r['partitions'] * a.syncs:,} | {r['translations']:,} | "
            f"{r['seconds']} ({r['read_seconds']}) | {r['peak_rss_mib']} ({r['rss_before_mib']}) |"
        )
    out = REPO / "bench" / "results" / f"proof-path-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(
        json.dumps(
            {
                "args": vars(a),
                "archive_mib": round(size / 2**20),
                "results": [{k: v for k, v in r.items() if k != "answers"} for r in results],
            },
            indent=2,
        )
    )
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
