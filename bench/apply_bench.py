"""Benchmark: plan, apply and verify many groups on a real target broker (issue "Safe apply").

    PYTHONPATH=plugins:. .venv/bin/python bench/apply_bench.py --groups 10000 --partitions 10 [--concurrency 16] \
        [--fenced]

Starts the bed's target broker (no MM2 needed: the plan is built from synthetic latest checkpoints for a real
replica topic), then in the same run measures:

* ours: ``apply_plan`` (one ``alter_consumer_group_offsets`` per group, ``--concurrency`` in flight) and
  the verification read-back (``Cluster.commits_many`` + ``plan.verify``);
* baseline: the same requests one at a time (concurrency 1), on a fresh set of groups;
* with ``--fenced``, also ``apply_plan`` under the lease (``MM2_FAILOVER_LOCK=kafka``): every batch one transaction
  of the fenced writer (:mod:`mm2_failover.adapters.fenced`), on a fresh set of groups.

Prints groups/s for apply and verify and the ratio against the baseline; writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from mm2_failover.adapters.kafka.cluster import Cluster
from mm2_failover.rules import plan as planmod
from mm2_failover.rules.checkpoints import Checkpoint
from mm2_failover.stages.apply import apply_plan
from testbed.bed import Bed


def make_plan(prefix: str, groups: int, topic: str, partitions: int, end: int) -> planmod.Plan:
    cps = [
        Checkpoint(f"{prefix}-{g:06d}", topic, p, 100 + g % 50, (g * 7 + p) % end, source_alias="primary")
        for g in range(groups)
        for p in range(partitions)
    ]
    bounds = {(topic, p): planmod.PartitionBounds(0, end) for p in range(partitions)}
    return planmod.build_plan(cps, bounds, {}, {topic: partitions})


def run(target: Cluster, plan: planmod.Plan, concurrency: int, fenced: bool = False) -> dict:
    import contextlib
    import os

    from mm2_failover.stages.apply import writer_lock

    # the lease's margin must exceed this cluster's write timeout (60 s)
    lease = (
        {
            "MM2_FAILOVER_LOCK": "kafka",
            "MM2_FAILOVER_LOCK_LEASE_SECONDS": "150",
            "MM2_FAILOVER_LOCK_MARGIN_SECONDS": "70",
        }
        if fenced
        else {}
    )
    before = {k: os.environ.get(k) for k in lease}
    os.environ.update(lease)
    try:
        with writer_lock(target, "apply bench", 30) if fenced else contextlib.nullcontext() as held:
            t0 = time.monotonic()  # the lease's claim and the writer's start not counted: once per task
            res = apply_plan(target, plan, concurrency, held=held)
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    t1 = time.monotonic()
    committed = target.commits_many(plan.groups(), concurrency)
    mismatches = planmod.verify(plan, committed)
    t2 = time.monotonic()
    n = len(plan.groups())
    assert not res.refused and not mismatches, (res.refused, mismatches[:5])
    return {
        "concurrency": concurrency,
        "groups": n,
        "apply_s": round(t1 - t0, 2),
        "verify_s": round(t2 - t1, 2),
        "apply_groups_per_s": round(n / (t1 - t0), 1),
        "verify_groups_per_s": round(n / (t2 - t1), 1),
        "total_s": round(t2 - t0, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=10000)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--fenced", action="store_true", help="also apply under the lease, through the fenced writer")
    ap.add_argument("--baseline-groups", type=int, default=0, help="groups for the sequential baseline (default: same)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    out = {"groups": args.groups, "partitions": args.partitions}
    with Bed(start_mm2=False) as bed:
        target = Cluster({"bootstrap.servers": bed.target_bootstrap}, "target", timeout=60)
        topic = "primary.bench-orders"
        target.create_topic(topic, args.partitions)
        from testbed.scenario import produce

        produce(bed.target_bootstrap, topic, args.partitions, 100)
        t0 = time.monotonic()
        plan = make_plan("ours", args.groups, topic, args.partitions, 100)
        out["plan_s"] = round(time.monotonic() - t0, 2)
        # warm-up (broker JIT, coordinator load) so that neither variant pays it, then baseline and ours
        run(target, make_plan("warmup", min(500, args.groups), topic, args.partitions, 100), 1)
        base_n = args.baseline_groups or args.groups
        out["baseline"] = run(target, make_plan("seq", base_n, topic, args.partitions, 100), 1)
        out["ours"] = run(target, plan, args.concurrency)
        if args.fenced:
            out["fenced"] = run(
                target, make_plan("fenced", args.groups, topic, args.partitions, 100), args.concurrency, fenced=True
            )
    o, b = out["ours"], out["baseline"]
    out["apply_speedup"] = round(o["apply_groups_per_s"] / b["apply_groups_per_s"], 1)
    out["verify_speedup"] = round(o["verify_groups_per_s"] / b["verify_groups_per_s"], 1)
    print(f"\nplan, apply and verify {args.groups} groups x {args.partitions} partitions on a real broker (2 cores)")
    print(
        f"{'variant':<28} {'groups':>7} {'apply s':>8} {'apply g/s':>10} {'verify s':>9} {'verify g/s':>11} {'total s':>8}"
    )
    rows = [("ours (concurrency %d)" % o["concurrency"], o), ("baseline (one at a time)", b)]
    if "fenced" in out:
        rows.append(("ours under the lease (fenced)", out["fenced"]))
    for name, r in rows:
        print(
            f"{name:<28} {r['groups']:>7} {r['apply_s']:>8} {r['apply_groups_per_s']:>10} {r['verify_s']:>9} "
            f"{r['verify_groups_per_s']:>11} {r['total_s']:>8}"
        )
    print(
        f"plan built in {out['plan_s']} s; speed-up apply x{out['apply_speedup']}, verify x{out['verify_speedup']}; "
        f"ours apply+verify {o['total_s']} s (goal < 60 s)"
    )
    path = Path(__file__).parent / "results" / f"apply-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(out, indent=2))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
