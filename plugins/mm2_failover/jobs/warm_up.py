"""Warm a Spark Connect server up for the latest-checkpoints job (issue 17): run the job's own plans once on
made-up records, so that the first failover on the server does not pay the JIT, the decoder's code generation and
the first Parquet writes (measured at 10M checkpoint records: the first failover-time run on a server warmed with a
trivial query took 20.6 s, on one warmed by this 12.7 s).

    python -m mm2_failover.jobs.warm_up sc://host:15002 [--folder DIR]

``--folder``: scratch space the server and this client both see (default: a temporary folder here; on a cluster,
a shared path such as the artifacts volume). Prints ``WARM_UP {"full_pass": s, "refresh": s, "state_and_tail": s}``.
Runs as its own process: a Connect session switches pyspark to remote mode for the whole process.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from mm2_failover.adapters.state import StateRoot, choose
from mm2_failover.jobs.checkpoint_pass.spark_pass import run
from mm2_failover.jobs.checkpoint_pass.state_layout import StatePlan
from mm2_failover.rules.checkpoints import encode_key, encode_value

WARM_UP_TOPICS = {"warm-up": "warm-up.checkpoints.internal"}


def warm_up_records(n_keys: int = 40, updates: int = 3) -> list[tuple]:
    """Made-up checkpoint records of every kind the job meets (updates, tombstones, a regression, commit metadata, an
    unusable value), as ``(source_alias, key, value, checkpoint_partition, checkpoint_offset, checkpoint_timestamp)``."""

    out = []
    for u in range(updates):
        for i in range(n_keys):
            key = encode_key(f"warm-up-{i % 7}", f"warm-up.topic-{i % 3}", i)
            down = 100 * (u + 1) + i - (150 if i == 1 and u == updates - 1 else 0)  # key 1 regresses at the end
            value = encode_value(down + 1, down, "md" if i == 2 else "")
            if i == 3 and u == updates - 1:
                value = None  # a tombstone
            elif i == 4 and u == 1:
                value = encode_value(1, 1, version=9)  # an unknown value version: quarantined
            out.append(
                ("warm-up", key, value, 0, len(out), datetime.fromtimestamp(1_700_000_000 + len(out), timezone.utc))
            )
    return out


def warm_up(spark, folder: str) -> dict:
    """The job's own plans once on made-up records (no Kafka, :func:`warm_up_records`): a full pass, a refresh into
    a state version and an answer from that version plus a tail, so that a warm Spark Connect server has compiled
    the decoder, the aggregations, the merge and the Parquet writes before a failover needs them. Returns the
    seconds of each step; ``folder`` is scratch space (removed by the caller)."""
    schema = (
        "source_alias string, key binary, value binary, checkpoint_partition int, checkpoint_offset bigint, "
        "checkpoint_timestamp timestamp"
    )
    records = warm_up_records()
    cut = len(records) * 2 // 3
    (topic,) = WARM_UP_TOPICS.values()
    ids = {topic: "warm-up"}
    seconds = {}

    def one(name: str, rows: list, upto: int, out: str, refresh: bool, root: StateRoot | None):
        t0 = time.monotonic()
        end, start = {topic: {0: upto}}, {topic: {0: 0}}
        plan = None
        if root is not None:
            versions = root.versions()
            choices = choose(versions, WARM_UP_TOPICS, ids, start, end)
            plan = StatePlan(root, refresh, ids, start, choices, {v["name"]: v for v in versions})
            start = {topic: dict(choices[0].read_from)}
        args = argparse.Namespace(output=out, policy="latest", min_partitions=2, max_quarantined=0, summary="")
        tail = [r for r in rows if start[topic][0] <= r[4] < upto]
        df = spark.createDataFrame(tail, schema)
        summary = run(spark, args, WARM_UP_TOPICS, end, start, read=lambda: df, state=plan)
        seconds[name] = round(time.monotonic() - t0, 3)
        return summary

    root = StateRoot(Path(folder) / "latest-state")
    one("full_pass", records, len(records), f"{folder}/full", False, None)
    one("refresh", records, cut, "", True, root)
    one("state_and_tail", records, len(records), f"{folder}/from-state", False, root)
    return seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="warm a Spark Connect server up with the latest-checkpoints job's plans")
    ap.add_argument("remote", help="the server, sc://host:port")
    ap.add_argument("--folder", help="scratch folder the server and this client both see (default: a temporary one)")
    a = ap.parse_args(argv)
    from pyspark.sql import SparkSession  # lazy: optional (pyspark)

    folder = Path(a.folder) / f"warm-up-{time.time_ns()}" if a.folder else Path(tempfile.mkdtemp(prefix="mm2-warm-up-"))
    folder.mkdir(parents=True, exist_ok=True)
    spark = SparkSession.builder.remote(a.remote).getOrCreate()
    try:
        print("WARM_UP " + json.dumps(warm_up(spark, str(folder))), flush=True)
    finally:
        spark.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
