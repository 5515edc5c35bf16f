"""The job's DataFrame transforms (Spark SQL expressions from :mod:`mm2_failover.rules.checkpoints`, no Python
UDFs: nothing of the job runs on the executors in Python): the bounded read of the checkpoints topics, what each
record gives, the per-key aggregation buffers and their merge, the decoded keys and their answers, the quarantined
records and the commit metadata. They build DataFrames and write nothing."""

from __future__ import annotations

import json

from mm2_failover.rules.checkpoints import sql_decode_columns, sql_inline, sql_key_columns, sql_value_plain_ok

# Spark's Kafka source polls with the Java consumer's defaults (max.poll.records=500) and lists offsets again
# after every poll; one checkpoint record is ~60 bytes, so larger polls cut the read time several-fold.
# Settings given through the options file, the environment or --kafka-option win.
# The read is bounded (never past the captured end offsets), so a fetch that finds nothing new need not wait for
# records: the consumer's default fetch.max.wait.ms (500 ms) cost every Kafka task ~0.5 s (a 1,000-record tail: 0.68 s
# -> 0.17 s on a warm server).
FAST_FETCH = {
    "max.poll.records": "10000",
    "max.partition.fetch.bytes": str(16 << 20),
    "fetch.max.bytes": str(64 << 20),
    "fetch.max.wait.ms": "10",
}


# A record's position in one signed long, with two flags below it, so that "the latest usable record of a key" is
# a plain max() over fixed-width buffers (Spark then aggregates in a hash map instead of sorting every record):
#
#    63 | 62 ........ 49 | 48 ................................ 2 |  1  |  0
#    0  |  partition     |  offset within the partition           |  T  |  P
#
#   position = partition << POSITION_BITS | offset      (orders a key's records: partition, then offset)
#   flagged  = position << 2 | T << 1 | P               (T: tombstone, P: "plain" value - no metadata)
#
# so the job refuses (before Spark starts) partitions >= 2^14 and offsets >= 2^47.
POSITION_BITS = 47
MAX_PARTITIONS = 1 << (63 - 2 - POSITION_BITS)


def sql_string(s: str) -> str:
    """A Spark SQL string literal for ``s`` (backslashes and quotes escaped)."""
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def alias_column(topics: dict[str, str], to_read: dict) -> str:
    """The SQL expression of the source alias of a record, from its topic (one alias: a constant)."""
    by_topic = {t: a for a, t in topics.items()}
    if len(to_read) == 1:
        return sql_string(by_topic[next(iter(to_read))])
    return (
        "CASE " + " ".join(f"WHEN topic = {sql_string(t)} THEN {sql_string(a)}" for t, a in by_topic.items()) + " END"
    )


def read_range(spark, java: dict[str, str], topics: dict[str, str], start: dict, end: dict, min_partitions: int):
    """The bounded read of every checkpoints topic: ``(source_alias, key, value, checkpoint_partition,
    checkpoint_offset, checkpoint_timestamp)``. Planned again for the rare second passes (never cached)."""
    opts = {f"kafka.{k}": v for k, v in {**FAST_FETCH, **java}.items()}
    reader = (
        spark.read.format("kafka")
        .options(**opts)
        .option("assign", json.dumps({t: sorted(ps) for t, ps in end.items()}))
        .option("startingOffsets", json.dumps({t: {str(p): start[t][p] for p in ps} for t, ps in end.items()}))
        .option("endingOffsets", json.dumps({t: {str(p): o for p, o in ps.items()} for t, ps in end.items()}))
        # the driver checked the range against the log start; a deletion after that fails the read here
        .option("failOnDataLoss", "true")
    )
    if min_partitions:
        reader = reader.option("minPartitions", str(min_partitions))
    return reader.load().selectExpr(
        f"{alias_column(topics, end)} AS source_alias",
        "key",
        "value",
        "partition AS checkpoint_partition",
        "offset AS checkpoint_offset",
        "timestamp AS checkpoint_timestamp",
    )


def per_record(records, vcols: dict[str, str]):
    """Per record only what choosing a key's latest record needs: the raw key bytes, the position, the two offsets
    and whether the value is usable. The usual value (known version, non-negative offsets, no metadata) is
    recognised by byte comparisons; any other goes through the full value decoder."""
    plain_ok = sql_value_plain_ok("value")
    return records.selectExpr(
        "source_alias",
        "key",
        "checkpoint_timestamp",
        f"{vcols['is_tombstone']} AS is_tombstone",
        f"{sql_inline(vcols, 'upstream_offset')} AS upstream_offset",
        f"{sql_inline(vcols, 'downstream_offset')} AS downstream_offset",
        f"shiftleft(CAST(checkpoint_partition AS BIGINT), {POSITION_BITS}) + checkpoint_offset AS pos",
        f"IF(value IS NOT NULL AND {plain_ok}, 1, 0) AS plain",
        f"value IS NOT NULL AND NOT {plain_ok} AND ({sql_inline(vcols, 'value_reason')}) IS NOT NULL AS bad_value",
    )


def buffers(d, with_max_fields: bool, one_alias: bool, alias_sql: str):
    """Per raw key bytes, the aggregation buffers (:data:`BUFFER_COLUMNS`): counts, and two records. ``c_*`` = the
    latest usable record (highest position, a tombstone included); ``m_*`` = the live record with the highest
    downstream offset (regressions; the answer under ``--policy max``: its upstream offset and timestamp are kept when
    ``with_max_fields``). Fixed-width buffers only (longs, timestamps), so Spark aggregates in a hash map."""
    from pyspark.sql import functions as F  # lazy: optional (pyspark)

    u = ~F.col("bad_value")
    live = u & ~F.col("is_tombstone")
    flagged = F.expr("shiftleft(pos, 2) + IF(is_tombstone, 2, 0) + plain")
    cflag, lds = F.when(u, flagged), F.when(live, F.col("downstream_offset"))
    aggs = [
        F.count(F.lit(1)).alias("n"),
        F.count(F.when(F.col("bad_value"), 1)).alias("n_bad_value"),
        F.count(F.when(u & F.col("is_tombstone"), 1)).alias("n_tombstones"),
        F.max(cflag).alias("c_flagged"),
    ]
    aggs += [
        F.max_by(f, cflag).alias(f"c_{f}") for f in ("upstream_offset", "downstream_offset", "checkpoint_timestamp")
    ]
    aggs += [F.max(lds).alias("m_downstream_offset"), F.max_by(flagged, lds).alias("m_flagged")]
    if with_max_fields:
        aggs += [F.max_by(f, lds).alias(f"m_{f}") for f in ("upstream_offset", "checkpoint_timestamp")]
    if one_alias:  # group by the key bytes alone
        return d.groupBy("key").agg(*aggs).selectExpr(f"{alias_sql} AS source_alias", "*")
    return d.groupBy("source_alias", "key").agg(*aggs)


BUFFER_COLUMNS = (
    "source_alias",
    "key",
    "n",
    "n_bad_value",
    "n_tombstones",
    "c_flagged",
    "c_upstream_offset",
    "c_downstream_offset",
    "c_checkpoint_timestamp",
    "m_downstream_offset",
    "m_flagged",
    "m_upstream_offset",
    "m_checkpoint_timestamp",
)


# A tail of at most this many records has at most as many keys: small enough to broadcast (a few MB) to every
# task, so that merging it into a state version moves only the keys it touched (see :func:`merge`).
BROADCAST_TAIL_RECORDS = 200_000


def merges_by_broadcast(tail_records: int) -> bool:
    return tail_records <= BROADCAST_TAIL_RECORDS


def merge(base, tail, tail_records: int):
    """The buffers of two consecutive ranges of the same topics -> the buffers of both (a state version's and its
    tail's): counts add up, the latest record is the one with the highest position, the highest is the one with the
    highest downstream offset (ties: the latest of them). ~1 row per key on each side.

    A tail of at most :data:`BROADCAST_TAIL_RECORDS` records (the usual failover: the records since the last
    refresh) is merged without shuffling the state: its keys are broadcast, the state's rows of the other keys are
    kept as they are, and only the touched keys are aggregated again. A longer tail: one aggregation of both."""
    from pyspark.sql import functions as F  # lazy: optional (pyspark)

    if not merges_by_broadcast(tail_records):
        return merge_all(base, tail)
    # computed once, kept in memory: the plan refers to the tail twice (each would be a read of Kafka of its own)
    tail = tail.localCheckpoint()
    keys = F.broadcast(tail.selectExpr("source_alias AS _alias", "key AS _key"))
    on = (F.col("source_alias") == F.col("_alias")) & F.col("key").eqNullSafe(F.col("_key"))
    untouched = base.join(keys, on, "left_anti").select(*BUFFER_COLUMNS)
    return untouched.unionByName(merge_all(base.join(keys, on, "left_semi"), tail))


COUNT_COLUMNS = ("n", "n_bad_value", "n_tombstones")


def merge_all(base, tail, base_counts: bool = False):
    """:func:`merge` by one aggregation of both sides. ``base_counts``: also ``b_n``, ``b_n_bad_value`` and
    ``b_n_tombstones``, the counts of the base side alone (NULL for a key only the tail has): what the merge changed
    in the base's totals (the state + delta layout's counts)."""
    from pyspark.sql import functions as F  # lazy: optional (pyspark)

    m = F.max(F.struct("m_downstream_offset", "m_flagged", "m_upstream_offset", "m_checkpoint_timestamp")).alias("_m")
    k = (
        base.select(*BUFFER_COLUMNS, F.lit(True).alias("_base"))
        .unionByName(tail.select(*BUFFER_COLUMNS, F.lit(False).alias("_base")))
        .groupBy("source_alias", "key")
        .agg(
            *(F.sum(c).alias(c) for c in COUNT_COLUMNS),
            F.max("c_flagged").alias("c_flagged"),
            *(
                F.max_by(f"c_{f}", "c_flagged").alias(f"c_{f}")
                for f in ("upstream_offset", "downstream_offset", "checkpoint_timestamp")
            ),
            m,
            *(F.sum(F.when(F.col("_base"), F.col(c))).alias(f"b_{c}") for c in COUNT_COLUMNS if base_counts),
        )
    )
    return k.select(
        *(c for c in BUFFER_COLUMNS if not c.startswith("m_")),
        *(F.col(f"_m.{c}").alias(c) for c in BUFFER_COLUMNS if c.startswith("m_")),
        *(f"b_{c}" for c in COUNT_COLUMNS if base_counts),
    )


def derive(k):
    """The buffers' packed positions unpacked: ``{c,m}_checkpoint_partition``, ``{c,m}_checkpoint_offset``,
    ``{c,m}_plain`` and ``c_is_tombstone``."""
    mask = (1 << POSITION_BITS) - 1
    for side in ("c", "m"):
        k = k.selectExpr(
            "*",
            f"CAST(shiftright({side}_flagged, 2 + {POSITION_BITS}) AS INT) AS {side}_checkpoint_partition",
            f"shiftright({side}_flagged, 2) & {mask} AS {side}_checkpoint_offset",
            f"({side}_flagged & 1) = 1 AS {side}_plain",
        )
    return k.selectExpr("*", "(c_flagged & 2) = 2 AS c_is_tombstone")


def count_sql(prefix: str = "") -> dict[str, str]:
    """Per key (after sql_key_columns): how many of its records are quarantined / usable / usable tombstones (a key
    that does not decode quarantines every record of it), from the counts ``{prefix}n``, ``{prefix}n_bad_value`` and
    ``{prefix}n_tombstones``."""
    n, bad, tomb = f"{prefix}n", f"{prefix}n_bad_value", f"{prefix}n_tombstones"
    return {
        "quarantined": f"IF(key_reason IS NOT NULL, {n}, {bad})",
        "usable": f"IF(key_reason IS NULL, {n} - {bad}, 0)",
        "tombstones": f"IF(key_reason IS NULL, {tomb}, 0)",
    }


QUARANTINED_SQL, TOMBSTONES_SQL = count_sql()["quarantined"], count_sql()["tombstones"]


def decoded_keys(k, counts=None, sums: dict[str, str] | None = None):
    """``k`` with its keys decoded (:func:`mm2_failover.rules.checkpoints.sql_key_columns`: ``key_reason``, ``partition``,
    ...) and observed: the sums ``sums`` (default :func:`count_sql`'s) into ``counts`` (default: an observation no one
    reads). Always observed: the observation keeps Spark's optimizer from pushing a later filter on the decoded
    columns down through the decoder, which inlines the decoder into the filter many times over (1M keys: 16.4 s
    instead of 1.6 s to answer and write them, measured)."""
    from pyspark.sql import Observation  # lazy: optional (pyspark)
    from pyspark.sql import functions as F

    for name, expr in sql_key_columns("key").items():
        k = k.withColumn(name, F.expr(expr))
    return k.observe(
        counts if counts is not None else Observation(),
        *(F.coalesce(F.sum(F.expr(sql)), F.lit(0)).alias(name) for name, sql in (sums or count_sql()).items()),
    )


def answers(k, policy: str, counts=None, keep_key: bool = False, base_counts: bool = False):
    """Decode and check each key once (~1 row per key from here on), observe the counts (``counts``), and keep the
    answer per usable key: the latest record unless it is a tombstone, or under ``--policy max`` the highest when it
    regressed. ``keep_key``: the raw key bytes too (the state's answers and a delta's, :mod:`mm2_failover.adapters.answers`);
    ``base_counts``: ``k`` is :func:`merge_all`'s with ``b_*`` columns, whose counts are observed too (``b_*``)."""
    from pyspark.sql import functions as F  # lazy: optional (pyspark)

    sums = count_sql()
    if base_counts:
        sums.update({f"b_{name}": sql for name, sql in count_sql("b_").items()})
    k = decoded_keys(k, counts, sums)
    k = k.where("key_reason IS NULL AND c_flagged IS NOT NULL AND NOT c_is_tombstone")
    k = k.withColumn("regressed", F.expr("m_downstream_offset > c_downstream_offset"))

    def chosen(f: str) -> str:  # the answer's field: the latest record's, or under --policy max the highest one's
        return f"IF(regressed, m_{f}, c_{f})" if policy == "max" else f"c_{f}"

    return k.selectExpr(
        "source_alias",
        "CAST(_graw AS STRING) AS `group`",
        "CAST(_traw AS STRING) AS topic",
        "partition",
        f"{chosen('upstream_offset')} AS upstream_offset",
        f"{chosen('downstream_offset')} AS downstream_offset",
        # NULL = metadata not empty: filled in by a second read of just those records (rare)
        f"IF({chosen('plain')}, '', CAST(NULL AS STRING)) AS metadata",
        f"{chosen('checkpoint_partition')} AS checkpoint_partition",
        f"{chosen('checkpoint_offset')} AS checkpoint_offset",
        f"{chosen('checkpoint_timestamp')} AS checkpoint_timestamp",
        "regressed",
        "c_downstream_offset AS latest_downstream_offset",
        "c_checkpoint_offset AS latest_checkpoint_offset",
        "m_downstream_offset AS max_downstream_offset",
        "m_checkpoint_offset AS max_checkpoint_offset",
        *(["key"] if keep_key else []),
    )


BUFFER_SCHEMA = (
    "source_alias string, key binary, n bigint, n_bad_value bigint, n_tombstones bigint, c_flagged bigint, "
    "c_upstream_offset bigint, c_downstream_offset bigint, c_checkpoint_timestamp timestamp, "
    "m_downstream_offset bigint, m_flagged bigint, m_upstream_offset bigint, "
    "m_checkpoint_timestamp timestamp"
)
MD_COLUMNS = ("source_alias", "checkpoint_partition", "checkpoint_offset")


def union(*frames):
    """The union (by column name) of the frames that are not None; None when there is none."""
    out = None
    for f in frames:
        if f is not None:
            out = f if out is None else out.unionByName(f)
    return out


def quarantine_rows(read):
    """Every record of the read range that is not a usable checkpoint, through the full decoder (rare)."""
    from pyspark.sql import functions as F  # lazy: optional (pyspark)

    q = read()
    for name, expr in sql_decode_columns("key", "value").items():
        q = q.withColumn(name, F.expr(expr))
    return q.where("reason IS NOT NULL").selectExpr(
        "source_alias",
        "checkpoint_partition",
        "checkpoint_offset",
        "reason",
        "hex(key) AS key_hex",
        "hex(value) AS value_hex",
    )


def metadata_rows(read, need, vcols: dict[str, str], base_md=None):
    """The commit metadata of the records at the positions ``need`` (source_alias, checkpoint_partition,
    checkpoint_offset): decoded from the tail's records (``read``; None: no tail), or taken from the versions' tables."""
    tail = (
        None
        if read is None
        else (
            read()
            .where("value IS NOT NULL AND length(value) > 20")
            .join(need, list(MD_COLUMNS))
            .selectExpr(*MD_COLUMNS, f"CAST({sql_inline(vcols, '_mraw')} AS STRING) AS metadata")
        )
    )
    old = None if base_md is None else base_md.join(need, list(MD_COLUMNS)).select(*MD_COLUMNS, "metadata")
    return union(tail, old)
