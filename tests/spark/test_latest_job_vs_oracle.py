"""The Spark job's aggregation (mm2_failover.jobs.checkpoint_pass.spark_pass.run, fed a DataFrame instead of Kafka)
gives, key for key, what the pure rule (mm2_failover.rules.latest.latest_per_key) gives: the same answers, regression
flags, positions and metadata, and the same counts, over random histories with tombstones, regressions, unusable
records, commit metadata, two partitions and two source aliases, under both policies."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone

import pytest

from mm2_failover.jobs.checkpoint_pass import spark_pass
from mm2_failover.rules.latest import Record, latest_per_key
from testbed.checkpoint_histories import TOPICS, history

pytestmark = [pytest.mark.spark]


def run_job(spark, tmp_path, records: list[Record], policy: str) -> tuple[dict, list[dict]]:
    import pyarrow.parquet as pq

    rows = [
        (
            r.source_alias,
            r.key,
            r.value,
            r.partition,
            r.offset,
            datetime.fromtimestamp(r.timestamp_ms / 1000, timezone.utc),
        )
        for r in records
    ]
    df = spark.createDataFrame(
        rows,
        "source_alias string, key binary, value binary, checkpoint_partition int, "
        "checkpoint_offset bigint, checkpoint_timestamp timestamp",
    )
    end = {
        TOPICS[a]: {
            p: 1 + max([r.offset for r in records if (r.source_alias, r.partition) == (a, p)], default=0)
            for p in (0, 1)
        }
        for a in TOPICS
    }
    out = tmp_path / f"out-{policy}"
    args = argparse.Namespace(output=str(out), policy=policy, min_partitions=2, max_quarantined=0, summary="")
    summary = spark_pass.run(spark, args, TOPICS, end, {}, read=lambda: df)
    return summary, pq.read_table(str(out)).to_pylist()


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("policy", ["latest", "max"])
def test_the_job_answers_as_the_rule_does(spark, tmp_path, seed, policy):
    records = history(seed)
    want = latest_per_key(records, policy)
    summary, got = run_job(spark, tmp_path, records, policy)
    fields = (
        "upstream_offset",
        "downstream_offset",
        "metadata",
        "checkpoint_partition",
        "checkpoint_offset",
        "regressed",
        "latest_downstream_offset",
        "max_downstream_offset",
    )
    got_by_key = {(r["source_alias"], r["group"], r["topic"], r["partition"]): {f: r[f] for f in fields} for r in got}
    want_by_key = {k: {f: getattr(a, f) for f in fields} for k, a in want.answers.items()}
    assert got_by_key == want_by_key
    assert (summary["records_read"], summary["tombstones"], summary["quarantined"], summary["checkpoints"]) == (
        want.records_read,
        want.tombstones,
        want.quarantined,
        len(want.answers),
    )
    assert summary["quarantined_by_reason"] == want.quarantined_by_reason
    assert summary["regressions"] == sum(a.regressed for a in want.answers.values())
    assert summary["groups"] == len({(a, g) for a, g, _t, _p in want.answers})
    # the histories really exercise every rule
    assert (
        want.tombstones
        and want.quarantined
        and summary["regressions"]
        and any(a.metadata for a in want.answers.values())
    )
