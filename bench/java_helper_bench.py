"""The Java helper's read of many groups' commits, its JVM with and without the class archive (issue 54).

    PYTHONPATH=plugins:. .venv/bin/python bench/java_helper_bench.py [--groups 10000] [--partitions 10] [--runs 5]

A failover at thousands of groups runs ``jvm/KafkaOffsets.java`` six times (the source's commits at capture, the
empty-group gate's describe, the target's commits for the plan, the approval's live diff, apply's backup and
verify), ~1.3 s each at 10k groups, ~0.5 s of that the JVM's start. The helper's classes are kept in a dynamic class
archive (:class:`mm2_failover.adapters.kafka.java_bridge.ClassSharing`) that the next JVMs map.

1. starts one KRaft broker on loopback, a topic of P partitions, and commits G groups on every partition (through
   the helper);
2. reads all G groups' commits back through :func:`~mm2_failover.adapters.kafka.java_bridge.read_with_java`,
   alternately without the archive (``share=False``, as before) and with it, ``--runs`` times each;
3. checks every answer (G groups x P partitions at their committed offsets) and writes
   bench/results/java-helper-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "plugins"), str(ROOT)]

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from mm2_failover.adapters.kafka import java_bridge  # noqa: E402
from mm2_failover.adapters.kafka.cluster import Cluster  # noqa: E402
from testbed.bed import Broker, broker_ready, kafka_jars  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=10000)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    run_dir = Path(tempfile.mkdtemp(prefix="java-helper-bench-"))
    tempfile.tempdir = str(run_dir)  # the helper's private folder (compiled classes, archive): this bench's own
    broker = Broker("bench", run_dir, kafka_jars())
    broker.format_storage()
    broker.start()
    try:
        deadline = time.monotonic() + 90
        while not broker_ready(broker.bootstrap):
            if time.monotonic() > deadline:
                raise SystemExit("the broker did not answer")
            time.sleep(0.3)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept while its future resolves
        admin.create_topics([NewTopic("t", args.partitions, 1)])["t"].result()
        cluster = Cluster({"bootstrap.servers": broker.bootstrap}, "bench", timeout=60)
        groups = [f"g{i:06d}" for i in range(args.groups)]
        want = {g: {("t", p): 1000 + i + p for p in range(args.partitions)} for i, g in enumerate(groups)}
        java_bridge.run_java_offsets(cluster, "commit", java_bridge.commit_lines(want), len(want), share=False)
        t0 = time.perf_counter()
        first = java_bridge.read_with_java(cluster, groups)  # the first call that may share writes the archive
        writing = round(time.perf_counter() - t0, 3)
        assert {g: {tp: c.offset for tp, c in cs.items()} for g, cs in first.items()} == want
        times: dict[str, list[float]] = {"without the archive": [], "with the archive": []}
        for _ in range(args.runs):
            for label, share in (("without the archive", False), ("with the archive", True)):
                t0 = time.perf_counter()
                out = java_bridge.read_with_java(cluster, groups, share=share)
                times[label].append(round(time.perf_counter() - t0, 3))
                got = {g: {tp: c.offset for tp, c in cs.items()} for g, cs in out.items()}
                assert got == want, f"{label}: the read differs from the commits"
        archives = sorted(p.name for p in run_dir.glob("mm2-failover-*/jvm-*/classes-*.jsa"))
        assert archives, "no class archive was written"
    finally:
        broker.process.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "groups": args.groups,
        "partitions": args.partitions,
        "runs": args.runs,
        "cores": os.cpu_count(),
        "seconds": times,
        "first_call_writing_the_archive_s": writing,
        "median_s": med,
        "saved_per_call_s": round(med["without the archive"] - med["with the archive"], 3),
    }
    print(
        f"Java helper, read of {args.groups} groups x {args.partitions} partitions, {args.runs} runs each, every answer checked"
    )
    print("| JVM | seconds | median |")
    print("|---|---|---:|")
    for k, v in times.items():
        print(f"| {k} | {', '.join(map(str, v))} | {med[k]} |")
    print(f"the first call, which writes the archive: {writing} s")
    out = ROOT / "bench" / "results" / f"java-helper-{datetime.now():%Y%m%d-%H%M%S}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"results: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
