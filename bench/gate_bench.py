"""Benchmark: the empty-group gate's reads at G groups (issue 33 item 6) - every group described (before) against
the listing first (gate rule 2) - on a source where the groups exist (EMPTY) and a target where they do not yet.

    PYTHONPATH=plugins:. .venv/bin/python bench/gate_bench.py [--groups 10000] [--rounds 3] [--window N]

Every group is described two ways (the same answers demanded): librdkafka, one DescribeGroups request per group, and
Kafka's Java client, one per coordinator and window (what ``describe_groups`` uses above ``JAVA_BULK_GROUPS``).

Starts a bed of its own, commits G groups (10 partitions each) on the source, then times both reads ``--rounds``
times on each cluster and checks they agree (no live group). ``--window`` sets ``cluster.DESCRIBE_WINDOW`` (groups
per DescribeConsumerGroups request); ``--window 10000`` is the request as it was before: with librdkafka 2.16 a
describe of 10k groups that times out aborts the process (librdkafka#4605; docs/performance.md, "The gate at 10k groups").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins"))
sys.path.insert(0, str(REPO))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--window", type=int, default=None)
    args = ap.parse_args()
    from mm2_failover.adapters.kafka import cluster, java_bridge
    from mm2_failover.stages import gate
    from testbed.bed import Bed

    if args.window:
        cluster.DESCRIBE_WINDOW = args.window
    with tempfile.TemporaryDirectory(prefix="gate-bench-") as d, Bed(run_dir=Path(d) / "bed") as bed:
        src, tgt = bed.client("source", 60), bed.client("target", 60)
        src.create_topic("gb", 10)
        groups = [f"gb-{i:05d}" for i in range(args.groups)]
        todo, t = groups, time.monotonic()
        for _ in range(60):  # a new bed's group coordinator may still be loading
            todo = [
                g
                for g, e in src.alter_many({g: {("gb", p): 1 for p in range(10)} for g in todo}, window=64).items()
                if e
            ]
            if not todo:
                break
            time.sleep(1)
        assert not todo, f"{len(todo)} group(s) not committed"
        print(f"committed {args.groups} groups x 10 partitions on the source in {time.monotonic() - t:.1f} s")
        print(
            "| cluster | round | describe every group: librdkafka s | the same: Java client s | listing first "
            "(the gate) s |\n|---|---:|---:|---:|---:|"
        )
        bulk = java_bridge.JAVA_BULK_GROUPS
        for name, c in (("source (groups EMPTY)", src), ("target (groups absent)", tgt)):
            for i in range(args.rounds):
                java_bridge.JAVA_BULK_GROUPS = len(groups)  # librdkafka: a request per group
                t = time.monotonic()
                by_rdkafka = c.describe_groups(groups)
                d_rdk = time.monotonic() - t
                java_bridge.JAVA_BULK_GROUPS = bulk  # Kafka's Java client: a request per coordinator and window
                t = time.monotonic()
                by_java = c.describe_groups(groups)
                d_java = time.monotonic() - t
                t = time.monotonic()
                now = gate.live_groups(c, groups)
                d_list = time.monotonic() - t
                assert by_rdkafka == by_java, [g for g in groups if by_rdkafka[g] != by_java[g]][:3]
                before = [s for s in by_java.values() if not s.is_safe_to_move]
                assert before == now == [], (before[:3], now[:3])
                print(f"| {name} | {i} | {d_rdk:.2f} | {d_java:.2f} | {d_list:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
