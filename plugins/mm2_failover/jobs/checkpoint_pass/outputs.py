"""Writing a failover's results once the pass has its answers: the answers (the full layout, or the state + delta
layout of :mod:`mm2_failover.adapters.answers`), their commit metadata, the quarantined records, the regressions and
the counts of the summary."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from mm2_failover.adapters import answers as am
from mm2_failover.adapters import faults
from mm2_failover.jobs.checkpoint_pass.state_layout import QUARANTINE_SCHEMA, StatePlan, base_tables, write_table
from mm2_failover.jobs.checkpoint_pass.transforms import (
    BUFFER_SCHEMA,
    MD_COLUMNS,
    answers,
    derive,
    merge_all,
    merges_by_broadcast,
    metadata_rows,
    quarantine_rows,
    union,
)
from mm2_failover.rules.checkpoints import REASONS

OUTPUT_SCHEMA = (
    "source_alias string, `group` string, topic string, partition int, upstream_offset bigint, "
    "downstream_offset bigint, metadata string, checkpoint_partition int, checkpoint_offset bigint, "
    "checkpoint_timestamp timestamp, regressed boolean, latest_downstream_offset bigint, "
    "latest_checkpoint_offset bigint, max_downstream_offset bigint, max_checkpoint_offset bigint"
)


def finish(
    spark,
    args,
    summary: dict,
    counts: dict[str, int],
    tail_read,
    used: dict,
    lap,
    phases: dict,
    t0: float,
    delta: bool = False,
) -> dict:
    """What every failover-time run ends with, once its answers are written: the counts, the groups, the quarantined
    records and the regressions (Spark reads the answers of the full layout; pyarrow those of the state + delta
    layout, which is local - :mod:`mm2_failover.adapters.answers`)."""
    summary["quarantined"] = counts["quarantined"]
    summary["records_read"] = counts["usable"] + counts["quarantined"]
    summary["tombstones"] = counts["tombstones"]
    table = None
    if delta:  # the answers as every reader sees them (and checked whole)
        import pyarrow.compute as pc  # lazy: heavy (pyarrow)

        table = am.read_table(args.output, ["source_alias", "group", "regressed"])
        summary["checkpoints"] = table.num_rows
        summary["regressions"] = int(pc.sum(table.column("regressed").cast("int64")).as_py() or 0)
        summary["groups"] = table.group_by(["source_alias", "group"]).aggregate([]).num_rows
    else:
        summary["groups"] = count_groups(spark, args.output)
    lap("count_groups")
    if summary["quarantined"]:  # rare: a second bounded read, through the full decoder, for the bad records only
        qpath = args.output.rstrip("/") + "_quarantine"
        q = quarantine_rows(tail_read) if tail_read is not None else None
        write_table(spark, union(q, base_tables(spark, used, "quarantine")), QUARANTINE_SCHEMA, qpath)
        by_reason = {
            r["reason"]: int(r["count"]) for r in spark.read.parquet(qpath).groupBy("reason").count().collect()
        }
        summary["quarantined_by_reason"] = {r: by_reason[r] for r in sorted(by_reason) if r in REASONS}
        if sum(by_reason.values()) != summary["quarantined"]:
            raise RuntimeError(
                f"internal error: the first pass counted {summary['quarantined']} unusable records, "
                f"the full decoder {by_reason} (please report this)"
            )
        summary["quarantine_output"] = qpath
        lap("quarantine")
    if summary["regressions"]:
        rpath = args.output.rstrip("/") + "_regressions"
        renamed = {
            "max_downstream_offset": "from_downstream_offset",
            "latest_downstream_offset": "to_downstream_offset",
            "max_checkpoint_offset": "from_checkpoint_offset",
            "latest_checkpoint_offset": "to_checkpoint_offset",
        }
        if table is not None:
            import pyarrow.parquet as pq  # lazy: heavy (pyarrow)

            cols = ["source_alias", "group", "topic", "partition", *renamed]
            r = am.read_table(args.output, ["regressed", *cols]).filter(pc.field("regressed")).select(cols)
            r = r.rename_columns([renamed.get(c, c) for c in r.column_names])
            am.clear(rpath)
            am.local_path(rpath).mkdir(parents=True)
            pq.write_table(r, str(am.local_path(rpath) / "part-00000.parquet"))
            summary["regressions_sample"] = r.slice(0, 20).to_pylist()
        else:
            (
                spark.read.parquet(args.output)
                .where("regressed")
                .selectExpr(
                    "source_alias", "`group`", "topic", "partition", *(f"{a} AS {b}" for a, b in renamed.items())
                )
                .write.mode("overwrite")
                .parquet(rpath)
            )
            summary["regressions_sample"] = [r.asDict() for r in spark.read.parquet(rpath).limit(20).collect()]
        summary["regressions_output"] = rpath
        lap("regressions")
    summary["phases"] = phases
    summary["seconds"] = round(time.monotonic() - t0, 3)
    return summary


def write_delta(
    spark,
    output: str,
    state: StatePlan,
    used: dict[str, list[str]],
    tail,
    tail_read,
    vcols: dict[str, str],
    summary: dict,
    lap,
) -> dict[str, int]:
    """The state + delta layout (:mod:`mm2_failover.adapters.answers`, rule 2): only the keys the tail touched are merged
    with their state buffers and answered; the other answers are the versions' own (their files linked into the
    output). Returns the counts over the whole range: the versions' totals, changed by what the merge changed."""
    from pyspark.sql import Observation  # lazy: optional (pyspark)
    from pyspark.sql import functions as F

    out = am.local_path(output)
    am.clear(out)  # what an earlier (maybe killed) job left: never mixed with these answers
    if tail is None:
        tail = spark.createDataFrame([], BUFFER_SCHEMA)
    else:  # computed once, kept in memory: the touched keys, the join and the merge all read it
        tail = tail.localCheckpoint()
    touched = Observation("mm2_failover_touched")
    tail.select("source_alias", "key").observe(touched, F.count(F.lit(1)).alias("n")).write.parquet(
        str(out / "touched")
    )
    keys = tail.selectExpr("source_alias AS _alias", "key AS _key")
    broadcast = merges_by_broadcast(summary["tail_offsets"])
    if broadcast:
        keys = F.broadcast(keys)
    summary["merge"] = "tail keys broadcast" if broadcast else "all keys"
    on = (F.col("source_alias") == F.col("_alias")) & F.col("key").eqNullSafe(F.col("_key"))
    merged = merge_all(base_tables(spark, used, "buffers").join(keys, on, "left_semi"), tail, base_counts=True)
    counts, written = Observation("mm2_failover_counts"), Observation("mm2_failover_output")
    delta = answers(derive(merged), "latest", counts, keep_key=True, base_counts=True)
    delta = delta.observe(
        written, F.count(F.lit(1)).alias("n"), F.count(F.when(F.col("metadata").isNull(), 1)).alias("md")
    )
    lap("plan")
    delta.write.parquet(str(out / "delta"))
    lap("read_decode_aggregate_write")
    c, w = counts.get, written.get
    if w["md"]:  # the touched keys' answers that carry commit metadata
        fill_metadata(spark, tail_read, str(out / "delta"), vcols, base_tables(spark, used, "metadata"))
        lap("metadata")
    bases, how = [], set()
    by_path = {v["path"]: v for v in state.versions.values()}
    for i, (path, aliases) in enumerate(sorted(used.items())):
        v = by_path[path]
        how.add(am.link_tree(Path(path) / "answers", out / "base" / str(i)))
        bases.append(
            {
                "dir": f"base/{i}",
                "version": v["name"],
                "answers": {a: int(v["aliases"][a]["answers"]) for a in sorted(aliases)},
            }
        )
    am.write_manifest(out, {"layout": am.DELTA, "bases": bases, "touched": int(touched.get["n"]), "delta": int(w["n"])})
    faults.hit("job.after_answers")  # a driver killed here leaves answers without their summary: never read
    lap("base_answers")
    summary["output_layout"].update(
        {
            "touched_keys": int(touched.get["n"]),
            "delta_answers": int(w["n"]),
            "base": bases,
            "base_files": " and ".join(sorted(how)),
        }
    )
    mine = [state.versions[ch.version]["aliases"][ch.alias] for ch in state.choices if ch.version]
    before = {f: sum(int(m.get(f, 0)) for m in mine) for f in ("records", "quarantined", "tombstones")}
    before["usable"] = before["records"] - before["quarantined"]
    return {f: before[f] + int(c[f]) - int(c[f"b_{f}"]) for f in ("quarantined", "usable", "tombstones")}


def count_groups(spark, output: str) -> int:
    """How many (source alias, group) the answers hold: read back by pyarrow when the output is a local path (a
    fraction of a second at a million answers, where a Spark job costs about one second), else by Spark."""
    if not am.is_local(output):
        return spark.read.parquet(output).select("source_alias", "group").distinct().count()
    return am.count_groups(output)


def fill_metadata(spark, read, output: str, vcols: dict[str, str], base_md=None) -> None:
    """Fill in the commit metadata of the answers whose record carries some (NULL after the first pass): decoded
    from the tail's records (one more bounded read, joined on (source alias, checkpoint partition, offset)) or taken
    from the state versions'; the output is rewritten (through a copy: no Hadoop calls, so that Spark Connect can
    run it too)."""
    from pyspark.sql import functions as F  # lazy: optional (pyspark)

    need = spark.read.parquet(output).where("metadata IS NULL").select(*MD_COLUMNS)
    md = metadata_rows(read, need, vcols, base_md).withColumnRenamed("metadata", "_metadata")
    tmp = output.rstrip("/") + "_with_metadata.tmp"
    current = spark.read.parquet(output)
    (
        current.join(md, list(MD_COLUMNS), "left")
        .withColumn("metadata", F.coalesce(F.col("metadata"), F.col("_metadata")))
        .select(*current.columns)
        .write.mode("overwrite")
        .parquet(tmp)
    )
    spark.read.parquet(tmp).write.mode("overwrite").parquet(output)
    if am.is_local(output):
        shutil.rmtree(am.local_path(tmp), ignore_errors=True)
    if spark.read.parquet(output).where("metadata IS NULL").limit(1).count():
        raise RuntimeError(f"internal error: some answers in {output} still lack their metadata (please report this)")
