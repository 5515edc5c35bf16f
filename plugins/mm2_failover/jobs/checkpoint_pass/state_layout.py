"""The latest-checkpoint state's layout as the job reads and writes it (the versions themselves, their folders and
``version.json``: :mod:`mm2_failover.adapters.state`): which version each alias starts from (:class:`StatePlan`), a
version's tables (``buffers``, ``metadata``, ``quarantine``, ``answers``) and writing the next version
(``--refresh-state``)."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from mm2_failover.adapters import store
from mm2_failover.adapters.kafka.cluster import Cluster
from mm2_failover.adapters.runfolder import now_iso
from mm2_failover.adapters.state import StateRoot, choose, point_in_store, publish_in_store, version_name
from mm2_failover.jobs.checkpoint_pass.cluster_checks import driver_check
from mm2_failover.jobs.checkpoint_pass.job_args import BadArguments
from mm2_failover.jobs.checkpoint_pass.transforms import (
    MD_COLUMNS,
    QUARANTINED_SQL,
    TOMBSTONES_SQL,
    answers,
    decoded_keys,
    derive,
    metadata_rows,
    quarantine_rows,
    union,
)

MD_SCHEMA = "source_alias string, checkpoint_partition int, checkpoint_offset bigint, metadata string"
QUARANTINE_SCHEMA = (
    "source_alias string, checkpoint_partition int, checkpoint_offset bigint, reason string, "
    "key_hex string, value_hex string"
)


@dataclass
class StatePlan:
    """The state this run starts from (per alias: a version, or a full pass; :func:`mm2_failover.adapters.state.choose`),
    and whether it writes the next version instead of answers."""

    root: object  # mm2_failover.adapters.state.StateRoot
    refresh: bool
    topic_ids: dict[str, str]  # topic -> topic id
    log_start: dict[str, dict[int, int]]  # topic -> partition -> the log start captured (or current)
    choices: list  # [mm2_failover.adapters.state.AliasChoice]
    versions: dict[str, dict] = field(default_factory=dict)  # version name -> its version.json (and "path")
    url: str = ""  # the same state in an object store (--state-url): read from there; a refresh publishes there

    def used(self) -> dict[str, list[str]]:
        """version folder -> the aliases it answers for"""
        out: dict[str, list[str]] = {}
        for c in self.choices:
            if c.version:
                out.setdefault(self.versions[c.version]["path"], []).append(c.alias)
        return out

    def summary(self) -> dict:
        read = sorted({self.versions[c.version]["path"] for c in self.choices if c.version})
        return {
            "dir": str(self.root.dir),
            "refresh": self.refresh,
            "read_from": read,
            "aliases": {c.alias: c.as_dict() for c in self.choices},
            "full_pass": sorted(c.alias for c in self.choices if not c.version),
        }


def write_table(spark, df, schema: str, path: str) -> None:
    """Write ``df`` to ``path`` as Parquet, or an empty table of ``schema`` when there is none."""
    (df if df is not None else spark.createDataFrame([], schema)).write.mode("overwrite").parquet(path)


def base_tables(spark, used: dict[str, list[str]], table: str):
    """The union of the versions' ``table`` (buffers, metadata or quarantine), each for the aliases it answers for."""
    from pyspark.sql import functions as F  # lazy: optional (pyspark)

    return union(
        *(
            spark.read.parquet(f"{path}/{table}").where(F.col("source_alias").isin(aliases))
            for path, aliases in sorted(used.items())
        )
    )


def plan_state(args, conf: dict, topics: dict[str, str], end: dict, start: dict) -> tuple[StatePlan, dict]:
    """Which state version each alias starts from (:func:`mm2_failover.adapters.state.choose`), and where its tail starts."""
    with driver_check():
        c = Cluster(conf, "target", args.timeout)
        ids = {t: c.topic_id(t) for t in topics.values()}
    root = StateRoot(Path(args.state_dir))
    try:
        versions = root.versions()
    except OSError as e:
        raise BadArguments(f"--state-dir {args.state_dir}: {e}") from None
    choices = choose(versions, topics, ids, start, end)
    for line in root.said:
        print(f"latest_checkpoints: {line}", file=sys.stderr)
    for ch in choices:
        print(f"latest_checkpoints: {ch.alias} ({ch.topic}): {ch.reason}", file=sys.stderr)
    url = args.state_url.rstrip("/")
    if url:  # the store's copy of each version, for Spark's reads
        versions = [{**v, "path": f"{url}/{v['name']}"} for v in versions]
    plan = StatePlan(root, args.refresh_state, ids, start, choices, {v["name"]: v for v in versions}, url)
    tail_start = {t: dict(ps) for t, ps in start.items()}
    for ch in choices:
        tail_start[ch.topic] = dict(ch.read_from)
    return plan, tail_start


def write_version(
    spark,
    state: StatePlan,
    topics: dict[str, str],
    end: dict[str, dict[int, int]],
    k,
    tail_read,
    vcols: dict[str, str],
    summary: dict,
    lap,
    phases: dict,
    t0: float,
) -> dict:
    """Refresh mode: write ``k`` (the buffers up to ``end``) as the next state version, with the commit metadata
    of its chosen records and its quarantined records, and publish it (:class:`mm2_failover.adapters.state.StateRoot`)."""
    from pyspark.sql import functions as F  # lazy: optional (pyspark)

    aliases = {
        a: {
            "topic": t,
            "topic_id": state.topic_ids[t],
            "covers": dict(end[t]),
            "log_start": dict(state.log_start.get(t, {})),
        }
        for a, t in topics.items()
    }
    name = version_name(aliases)
    summary["state_version"] = name
    used = state.used()
    root = state.root
    # through S3A (--state-url): Spark writes the version where it will stay, complete once its version.json is
    # there (state.publish_in_store); else a staging folder on this host, renamed into place (StateRoot.publish)
    meta_path = store.as_path(f"{state.url}/{name}/version.json") if state.url else root.dir / name / "version.json"
    if meta_path.exists():  # a retry after the version was published: converge
        meta = json.loads(meta_path.read_bytes())
        if state.url:
            point_in_store(state.url, name, meta, root.keep)
        else:
            root.point_at(name, meta)
        summary.update(version_totals(meta))
        summary["seconds"] = round(time.monotonic() - t0, 3)
        summary["already_published"] = True
        return summary
    stg = f"{state.url}/{name}" if state.url else str(root.staging(name))
    k.write.mode("overwrite").parquet(f"{stg}/buffers")
    lap("read_decode_aggregate_write")
    kk = decoded_keys(derive(spark.read.parquet(f"{stg}/buffers")))
    c_needs_md = "key_reason IS NULL AND c_flagged IS NOT NULL AND NOT c_plain AND NOT c_is_tombstone"
    m_needs_md = "key_reason IS NULL AND m_flagged IS NOT NULL AND NOT m_plain"
    per_alias = {
        r["source_alias"]: r.asDict()
        for r in kk.groupBy("source_alias")
        .agg(
            F.sum(F.expr(QUARANTINED_SQL)).alias("quarantined"),
            F.sum("n").alias("records"),
            F.sum(F.expr(TOMBSTONES_SQL)).alias("tombstones"),
            F.count(F.lit(1)).alias("keys"),
            F.count(F.when(F.expr(f"({c_needs_md}) OR ({m_needs_md})"), 1)).alias("with_metadata"),
        )
        .collect()
    }
    for a in aliases:
        r = per_alias.get(a) or {}
        aliases[a].update({f: int(r.get(f) or 0) for f in ("records", "quarantined", "tombstones", "keys")})
    lap("counts")
    md = None
    if any(int(r.get("with_metadata") or 0) for r in per_alias.values()):  # else no read of the tail for it
        need = (
            kk.where(c_needs_md)
            .selectExpr(
                "source_alias",
                "c_checkpoint_partition AS checkpoint_partition",
                "c_checkpoint_offset AS checkpoint_offset",
            )
            .unionByName(
                kk.where(m_needs_md).selectExpr(
                    "source_alias",
                    "m_checkpoint_partition AS checkpoint_partition",
                    "m_checkpoint_offset AS checkpoint_offset",
                )
            )
            .distinct()
        )
        md = metadata_rows(tail_read, need, vcols, base_tables(spark, used, "metadata"))
    write_table(spark, md, MD_SCHEMA, f"{stg}/metadata")
    lap("metadata")
    per_alias_answers = write_answers(spark, stg)
    for a in aliases:
        aliases[a]["answers"] = per_alias_answers.get(a, 0)
    lap("answers")
    base_q = {
        c.alias: int(state.versions[c.version]["aliases"][c.alias].get("quarantined", 0))
        for c in state.choices
        if c.version
    }
    new_q = sum(aliases[a]["quarantined"] for a in aliases) - sum(base_q.values())
    q = quarantine_rows(tail_read) if tail_read is not None and new_q > 0 else None
    write_table(spark, union(q, base_tables(spark, used, "quarantine")), QUARANTINE_SCHEMA, f"{stg}/quarantine")
    lap("quarantine")
    meta = {
        "name": name,
        "created_at": now_iso(),
        "aliases": {
            a: {
                **v,
                "covers": {str(p): o for p, o in sorted(v["covers"].items())},
                "log_start": {str(p): o for p, o in sorted(v["log_start"].items())},
            }
            for a, v in aliases.items()
        },
        "base": {c.alias: c.version for c in state.choices},
        "tail_offsets": summary["tail_offsets"],
    }
    if state.url:
        publish_in_store(state.url, meta, root.keep)
    else:
        root.publish(Path(stg), meta)
    lap("publish")
    summary.update(
        {
            **version_totals(meta),
            "state_path": stg if state.url else str(root.dir / name),
            "phases": phases,
            "seconds": round(time.monotonic() - t0, 3),
        }
    )
    return summary


def version_totals(meta: dict) -> dict[str, int]:
    """A state version's figures in the job's summary, summed over its aliases from its ``version.json``: the same
    for the refresh that wrote it and for a refresh that found it already published (nothing new to read)."""
    per = meta["aliases"].values()
    return {
        "records_read": sum(int(v["records"]) for v in per),
        "quarantined": sum(int(v["quarantined"]) for v in per),
        "tombstones": sum(int(v["tombstones"]) for v in per),
        "keys": sum(int(v["keys"]) for v in per),
    }


def write_answers(spark, stg: str) -> dict[str, int]:
    """A state version's ``answers/`` table: the answer of every usable key of the version under the latest policy,
    its commit metadata in place and its raw key bytes beside it - what a failover from this version reuses for the
    keys its tail leaves alone (:mod:`mm2_failover.adapters.answers`). Returns the number of answers per alias."""
    from pyspark.sql import Observation  # lazy: optional (pyspark)
    from pyspark.sql import functions as F

    a = answers(derive(spark.read.parquet(f"{stg}/buffers")), "latest", keep_key=True)
    md = spark.read.parquet(f"{stg}/metadata").withColumnRenamed("metadata", "_metadata")
    missing = Observation("mm2_failover_answers")
    (
        a.join(md, list(MD_COLUMNS), "left")
        .withColumn("metadata", F.coalesce(F.col("metadata"), F.col("_metadata")))
        .select(*a.columns)
        .observe(missing, F.count(F.when(F.col("metadata").isNull(), 1)).alias("md"))
        .write.mode("overwrite")
        .parquet(f"{stg}/answers")
    )  # in the store, a killed try's may be there
    if missing.get["md"]:
        raise RuntimeError(
            f"internal error: {missing.get['md']} answer(s) of {stg} lack their metadata (please report this)"
        )
    return {
        r["source_alias"]: int(r["count"])
        for r in spark.read.parquet(f"{stg}/answers").groupBy("source_alias").count().collect()
    }
