"""The pass on a Spark session, with the arguments already checked
(:func:`mm2_failover.jobs.checkpoint_pass.driver.main` checks them before Spark starts): the stages in order, from the
records to the answers, or to a state version. What the tests and the warm-up (:mod:`mm2_failover.jobs.warm_up`)
call with records of their own."""

from __future__ import annotations

import argparse
import re
import time

from mm2_failover.adapters import faults
from mm2_failover.adapters.answers import DELTA, layout_for
from mm2_failover.jobs.checkpoint_pass.outputs import OUTPUT_SCHEMA, fill_metadata, finish, write_delta
from mm2_failover.jobs.checkpoint_pass.state_layout import StatePlan, base_tables, write_version
from mm2_failover.jobs.checkpoint_pass.transforms import (
    BUFFER_COLUMNS,
    BUFFER_SCHEMA,
    alias_column,
    answers,
    buffers,
    derive,
    merge,
    merges_by_broadcast,
    per_record,
    read_range,
)
from mm2_failover.rules.checkpoints import sql_value_columns


def run(
    spark,
    args: argparse.Namespace,
    topics: dict[str, str],
    end: dict[str, dict[int, int]],
    start: dict[str, dict[int, int]],
    java: dict[str, str] | None = None,
    read=None,
    state: StatePlan | None = None,
) -> dict:
    """The job, with arguments already checked (``main`` does it before Spark starts). ``read``: a function
    returning the records DataFrame (default: :func:`mm2_failover.jobs.checkpoint_pass.transforms.read_range` over
    Kafka; tests pass their own). ``start``: where the read starts (with ``state``: where each alias's tail starts)."""
    from pyspark.sql import Observation  # lazy: optional (pyspark)
    from pyspark.sql import functions as F

    t0 = time.monotonic()
    phases: dict[str, float] = {}
    mark = [t0]

    def lap(name: str) -> None:
        now = time.monotonic()
        phases[name] = round(now - mark[0], 3)
        mark[0] = now

    to_read = {t: {p: o for p, o in ps.items() if o > start.get(t, {}).get(p, 0)} for t, ps in end.items()}
    to_read = {t: ps for t, ps in to_read.items() if ps}
    used = state.used() if state else {}
    summary = {
        "checkpoints_topics": topics,
        "end_offsets": end,
        "start_offsets": start,
        "records_read": 0,
        "tombstones": 0,
        "quarantined": 0,
        "quarantined_by_reason": {},
        "checkpoints": 0,
        "groups": 0,
        "output": args.output,
        "quarantine_output": None,
        "regressions": 0,
        "regressions_output": None,
        "policy": args.policy,
        "tail_offsets": sum(o - start.get(t, {}).get(p, 0) for t, ps in to_read.items() for p, o in ps.items()),
    }
    if state is not None:
        summary["state"] = state.summary()
    else:
        summary["output_layout"] = {"layout": "full", "why": "no --state-dir: a full pass"}
    if not to_read and not used and not (state and state.refresh):
        spark.createDataFrame([], OUTPUT_SCHEMA).write.mode("overwrite").parquet(args.output)
        summary["seconds"] = round(time.monotonic() - t0, 3)
        return summary

    min_partitions = args.min_partitions
    if not min_partitions and to_read:
        cores = default_parallelism(spark)
        if sum(len(ps) for ps in to_read.values()) < cores:
            min_partitions = cores  # MM2's single checkpoint partition, split so that every core reads a range
    summary["min_partitions"] = min_partitions
    tail_read = None
    if to_read:
        if read is None:

            def read():
                return read_range(spark, java or {}, topics, start, to_read, min_partitions)

        tail_read = read

    lap("setup")
    vcols = sql_value_columns("value")
    k = None
    if tail_read is not None:
        k = buffers(
            per_record(tail_read(), vcols),
            args.policy == "max" or state is not None,
            len(to_read) == 1 and not used,
            alias_column(topics, to_read),
        )
    if state is not None and not state.refresh:
        layout, why = layout_for(
            args.policy, args.output, str(state.root.dir), used, {v["path"]: v for v in state.versions.values()}
        )
        summary["output_layout"] = {"layout": layout, "why": why}
        if layout == DELTA:
            counts = write_delta(spark, args.output, state, used, k, tail_read, vcols, summary, lap)
            return finish(spark, args, summary, counts, tail_read, used, lap, phases, t0, delta=True)
    base = base_tables(spark, used, "buffers")
    if base is not None:
        if k is None:
            k = base.select(*BUFFER_COLUMNS)
        else:
            k = merge(base, k, summary["tail_offsets"])
            summary["merge"] = "tail keys broadcast" if merges_by_broadcast(summary["tail_offsets"]) else "all keys"
    if k is None:
        k = spark.createDataFrame([], BUFFER_SCHEMA)
    if state is not None and state.refresh:
        return write_version(spark, state, topics, end, k, tail_read, vcols, summary, lap, phases, t0)

    counts, written = Observation("mm2_failover_counts"), Observation("mm2_failover_output")
    latest = answers(derive(k), args.policy, counts)
    latest = latest.observe(
        written,
        F.count(F.lit(1)).alias("n"),
        F.coalesce(F.sum(F.col("regressed").cast("int")), F.lit(0)).alias("r"),
        F.count(F.when(F.col("metadata").isNull(), 1)).alias("md"),
    )
    lap("plan")
    latest.write.mode("overwrite").parquet(args.output)
    faults.hit("job.after_answers")  # a driver killed here leaves answers without their summary: never read
    lap("read_decode_aggregate_write")
    c, w = counts.get, written.get
    lap("observations")
    summary["checkpoints"], summary["regressions"] = int(w["n"]), int(w["r"])
    if w["md"]:  # some answers carry commit metadata: read those records' values again and fill it in
        fill_metadata(spark, tail_read, args.output, vcols, base_tables(spark, used, "metadata"))
        lap("metadata")
    return finish(
        spark,
        args,
        summary,
        {f: int(c[f]) for f in ("quarantined", "usable", "tombstones")},
        tail_read,
        used,
        lap,
        phases,
        t0,
    )


def default_parallelism(spark) -> int:
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        m = re.fullmatch(r"local\[(\d+)\]", spark.conf.get("spark.master", "") or "")
        return int(m.group(1)) if m else 2
