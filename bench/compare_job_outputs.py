"""Does a candidate version of the Spark job give the same answers as spark_jobs/latest_checkpoints.py? Runs both
on real brokers over the same forged checkpoint topics (good records, tombstones, a regression, one bad record per quarantine reason, a second
checkpoints topic with two partitions) for several (policy, groups regex, exclude regex, topics) settings, and
compares the summaries (without timings and paths), the output Parquet, the quarantine and the regressions.

    PYTHONPATH=plugins:. .venv/bin/python bench/compare_job_outputs.py --job /path/to/candidate_job.py

(Used to check each rewrite of the job's hot path before it replaced the job.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins"))
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import latest_checkpoints_bench as lb  # noqa: E402

from mm2_failover.rules import checkpoints as cpf  # noqa: E402
from testbed.bed import Bed  # noqa: E402

P1, P2 = "primary.checkpoints.internal", "dc2.checkpoints.internal"


def records() -> dict[str, list[tuple[int, bytes | None, bytes | None]]]:
    k, v = cpf.encode_key, cpf.encode_value
    good = []
    for u in range(3):
        for p in range(3):
            good.append((0, k("g-a", "primary.orders", p), v(100 * u + p + 5, 100 * u + p, f"m{u}")))
        good.append((0, k("g-b", "primary.pay", 0), v(10 * u + 1, 10 * u)))
        good.append((0, k("other-x", "primary.orders", 0), v(u, u)))
    good += [
        (0, k("g-gone", "primary.orders", 0), v(10, 10)),
        (0, k("g-gone", "primary.orders", 0), None),  # tombstone
        (0, k("g-back", "primary.orders", 0), v(60, 50, "hi")),
        (0, k("g-back", "primary.orders", 0), v(61, 10, "lo")),  # went backwards
        (0, k("g-x", "primary.orders", 0), v(5, 5)[:-3]),  # value truncated
        (0, k("g-x", "primary.orders", 0)[:5], v(5, 5)),  # key truncated
        (0, k("g-x", "primary.orders", 0), v(5, 5, version=7)),  # unknown version
        (0, k("g-x", "primary.orders", 0), v(-4, 5)),  # negative offset
        (0, b"\x00\x02\xff\xfe" + k("", "primary.orders", 0)[2:], v(5, 5)),  # group not UTF-8
    ]
    # dc2: two partitions; one key in both (the record in partition 1 is "later" by (partition, offset))
    dc2 = [
        (0, k("g-a", "dc2.orders", 0), v(7, 7)),
        (0, k("g-a", "dc2.orders", 0), v(8, 8)),
        (1, k("g-a", "dc2.orders", 0), v(3, 3)),
        (1, k("g-c", "dc2.orders", 1), v(9, 9)),
    ]
    return {P1: good, P2: dc2}


def produce(bootstrap: str) -> dict:
    from confluent_kafka import Producer

    from mm2_failover.adapters.kafka.cluster import Cluster

    c = Cluster({"bootstrap.servers": bootstrap}, "target", timeout=30)
    c.create_topic(P1, 1, {"cleanup.policy": "compact"})
    c.create_topic(P2, 2, {"cleanup.policy": "compact"})
    errors = []
    p = Producer({"bootstrap.servers": bootstrap})
    for topic, recs in records().items():
        while topic not in c.topics():  # the producer fails records for a topic it cannot see yet
            time.sleep(0.2)
        for part, key, value in recs:
            p.produce(topic, key=key, value=value, partition=part, on_delivery=lambda e, m: e and errors.append(e))
    assert p.flush(30) == 0 and not errors, errors
    ends = {
        t: {str(tp[1]): o for tp, o in c.offsets([(t, q) for q in range(n)]).items()} for t, n in ((P1, 1), (P2, 2))
    }
    assert {t: sum(v.values()) for t, v in ends.items()} == {t: len(r) for t, r in records().items()}, ends
    return ends


def run(
    job: Path, bootstrap: str, ends: dict, out: Path, topics: list[str], extra: list[str]
) -> tuple[int, dict, dict]:
    import subprocess

    from mm2_failover.adapters.spark import spark_submit_cmd

    job_args = [
        "--bootstrap-servers",
        bootstrap,
        "--end-offsets",
        json.dumps({t: ends[t] for t in topics}),
        "--output",
        str(out),
        "--max-quarantined",
        "100",
        *extra,
    ]
    for t in topics:
        job_args += ["--checkpoints-topic", f"{t.split('.')[0]}={t}"]
    cmd = spark_submit_cmd(
        "local[2]",
        {"spark.driver.host": "127.0.0.1", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"},
        job_args,
        job=job,
        name="compare-job-outputs",
        driver_memory="1g",
    )
    env = {
        "PYTHONPATH": str(REPO / "plugins"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": "/usr/bin:/bin",
        "PYSPARK_PYTHON": sys.executable,
    }
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    summary = next(
        (json.loads(x.split(" ", 1)[1]) for x in r.stdout.splitlines() if x.startswith("MM2_FAILOVER_SUMMARY ")), None
    )
    if summary is None:
        raise RuntimeError(f"{job} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    tables = {}
    import pyarrow.parquet as pq

    for suffix in ("", "_quarantine", "_regressions"):
        path = Path(str(out) + suffix)
        if path.exists():
            rows = pq.read_table(str(path)).to_pylist()
            tables[suffix or "output"] = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)
    return r.returncode, summary, tables


def normalise(s: dict) -> dict:
    s = {
        k: v
        for k, v in s.items()
        if k not in ("seconds", "phases", "output", "quarantine_output", "regressions_output", "min_partitions")
    }
    if "regressions_sample" in s:
        s["regressions_sample"] = sorted(json.dumps(r, sort_keys=True) for r in s["regressions_sample"])
    return s


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--job", type=Path, required=True, help="the candidate job file")
    args = ap.parse_args()
    cases = [  # the job answers for every group (the pipeline selects in Python): no group patterns
        ("latest", ".*", "", [P1]),
        ("max", ".*", "", [P1]),
        ("latest", ".*", "", [P1, P2]),
        ("max", ".*", "", [P1, P2]),
    ]
    root = REPO / "var" / "bench" / ("compare-" + time.strftime("%Y%m%d-%H%M%S"))
    bed = Bed(run_dir=root / "bed", start_mm2=False)
    bed.start()
    failures = 0
    try:
        ends = produce(bed.target_bootstrap)
        for i, (policy, inc, exc, topics) in enumerate(cases):
            extra = ["--policy", policy]
            a = run(lb.DEFAULT_JOB, bed.target_bootstrap, ends, root / f"c{i}-job", topics, extra)
            b = run(args.job, bed.target_bootstrap, ends, root / f"c{i}-candidate", topics, extra)
            same = a[0] == b[0] and normalise(a[1]) == normalise(b[1]) and a[2] == b[2]
            failures += not same
            print(
                f"case {i} policy={policy} groups={inc!r} exclude={exc!r} topics={topics}: exit {a[0]}/{b[0]}, "
                f"summary {'same' if normalise(a[1]) == normalise(b[1]) else 'DIFFERENT'}, outputs "
                f"{'same' if a[2] == b[2] else 'DIFFERENT'} ({ {k: len(v) for k, v in a[2].items()} }); "
                f"checkpoints={a[1]['checkpoints']} quarantined={a[1]['quarantined']} regressions={a[1]['regressions']}"
                f"; seconds {a[1]['seconds']} vs {b[1]['seconds']}",
                flush=True,
            )
            if not same:
                print("  job:  ", json.dumps(normalise(a[1]), sort_keys=True))
                print("  cand: ", json.dumps(normalise(b[1]), sort_keys=True))
                for key in sorted(set(a[2]) | set(b[2])):
                    if a[2].get(key) != b[2].get(key):
                        print(f"  {key}: job {a[2].get(key)}\n  {key}: candidate {b[2].get(key)}")
    finally:
        bed.stop()
    print("ALL SAME" if not failures else f"{failures} case(s) differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
