"""Drill: exact failover vs MM2's checkpoints, eight production patterns, MM2 killed mid-run (issues 16 and 31).

    PYTHONPATH=plugins:. .venv/bin/python bench/exact_drill.py [--runs 2] [--per-partition 200] [--mm2 both]

Each run starts its own bed (two KRaft brokers + MM2 on loopback; the source's log cleaner every second), runs
``testbed.exact_drill.run_drill`` (burst, slow, mixed, transactions with aborts, a compacted topic, a producer's
retry twins, groups behind the source's log start, and transactions through a second MM2 flow with exactly-once
support; MM2 SIGKILLed and restarted while all of them produce; two groups per topic plus a group MM2 never
checkpoints on two topics; a group of the burst topic rewound on the source after MM2's last checkpoint; a topic
whose last records MM2 never copied while re-copies make its replica longer than the source, behind the failover's
drain check with MM2's progress readable, unknown, and with the source lost) and scores every (group, partition)
under ``translation=checkpoint``, ``translation=exact`` and ``translation=exact`` with the source lost (disaster
mode: before and after the archive read the groups' source commits, each beside the newest archived sync at or below
the position), beside what the report says each re-reads; points the drain check refused count as ``drain refused``.
``--mm2 default`` keeps MM2's defaults (its source consumer reads ``read_uncommitted``), ``advised`` follows the
pre-flight audit (``primary.consumer.isolation.level=read_committed``), ``both`` runs each.

Prints the summed table (Markdown, docs/architecture.md's) and writes every point to bench/results/exact-drill-*.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

from testbed import exact_drill
from testbed.bed import Bed


def one(mm2: str, run: int, args, root: Path) -> exact_drill.DrillResult:
    overrides = exact_drill.ADVISED_MM2 if mm2 == "advised" else {}
    bed = Bed(run_dir=root / f"{mm2}-{run}" / "bed", mm2=overrides)
    bed.source.extra.update(exact_drill.SOURCE_BROKER)
    os.environ["MM2_FAILOVER_ARCHIVE"] = str(root / f"{mm2}-{run}" / "archive")
    with bed:
        return exact_drill.run_drill(
            bed,
            root / f"{mm2}-{run}" / "runs",
            per_partition=args.per_partition,
            seed=args.seed + run,
            mm2=mm2,
            eos_alias="eos",
            extras=True,
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2, help="drills per MM2 configuration (default 2)")
    ap.add_argument("--per-partition", type=int, default=200, help="records produced per partition (default 200)")
    ap.add_argument("--mm2", choices=("default", "advised", "both"), default="both")
    ap.add_argument("--seed", type=int, default=16)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    root = Path(os.environ.get("MM2_FAILOVER_BENCH_DIR", "var/bench")) / f"exact-drill-{stamp}"
    results = []
    for mm2 in ("default", "advised") if args.mm2 == "both" else (args.mm2,):
        for run in range(args.runs):
            r = one(mm2, run, args, root)
            print(f"# {mm2} MM2, run {run + 1}: {r.seconds:.0f} s, facts {json.dumps(r.facts)}", flush=True)
            print(exact_drill.render(r.summary()), flush=True)
            results.append(r)
    out = {
        "stamp": stamp,
        "per_partition": args.per_partition,
        "runs": args.runs,
        "results": [r.as_dict() for r in results],
    }
    print()
    for mm2 in sorted({r.mm2 for r in results}):
        points = [p for r in results if r.mm2 == mm2 for p in r.points]
        print(
            f"## MM2 {mm2}: {len([r for r in results if r.mm2 == mm2])} run(s), "
            f"{len({(p.pattern, p.group, p.partition) for p in points})} (group, partition) points per plan"
        )
        print(exact_drill.render(exact_drill.summarize(points)))
        out[f"summary_{mm2}"] = exact_drill.summarize(points)
    path = Path(__file__).parent / "results" / f"exact-drill-{stamp}.json"
    path.write_text(json.dumps(out, indent=1, default=str))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
