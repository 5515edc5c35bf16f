"""The latest-checkpoint state (issue 17): refreshing a state version range by range and answering from the newest
version plus the tail gives exactly what one full pass over the whole range gives - every column of every answer,
the counts, the quarantined records and the regressions - over random histories with tombstones, regressions,
unusable records (null keys included), commit metadata, two partitions and two source aliases, under both policies; cut at random places
(a cut may fall anywhere in a key's history), with 0, 1 or 2 refreshes before the failover, and with an empty tail."""

from __future__ import annotations

import argparse
import random
from datetime import datetime, timezone
from pathlib import Path

import pytest

from mm2_failover.adapters import state as st
from mm2_failover.jobs import warm_up
from mm2_failover.jobs.checkpoint_pass import spark_pass, state_layout, transforms
from testbed.checkpoint_histories import TOPICS, history

pytestmark = [pytest.mark.spark]
IDS = {t: f"id-{t}" for t in TOPICS.values()}
SCHEMA = (
    "source_alias string, key binary, value binary, checkpoint_partition int, checkpoint_offset bigint, "
    "checkpoint_timestamp timestamp"
)


def frame(spark, records):
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
    return spark.createDataFrame(rows, SCHEMA)


def ends_of(records) -> dict[str, dict[int, int]]:
    return {
        TOPICS[a]: {
            p: 1 + max([r.offset for r in records if (r.source_alias, r.partition) == (a, p)], default=-1)
            for p in (0, 1)
        }
        for a in TOPICS
    }


def step(
    spark, root: Path, records, upto: dict[str, dict[int, int]], out: Path | None, policy: str, refresh: bool
) -> dict:
    """One run of the job over the records below ``upto``: a refresh (writes a version) or a failover (answers),
    from the newest usable version of ``root`` and its tail, exactly as ``main`` plans it."""
    sroot = st.StateRoot(root)
    versions = sroot.versions()
    start = {t: {p: 0 for p in ps} for t, ps in upto.items()}
    choices = st.choose(versions, TOPICS, IDS, start, upto)
    plan = state_layout.StatePlan(sroot, refresh, IDS, start, choices, {v["name"]: v for v in versions})
    tail_start = {c.topic: dict(c.read_from) for c in choices}
    by_topic = {a: t for a, t in TOPICS.items()}
    tail = [
        r
        for r in records
        if tail_start[by_topic[r.source_alias]][r.partition] <= r.offset < upto[by_topic[r.source_alias]][r.partition]
    ]
    args = argparse.Namespace(
        output=str(out) if out else "", policy=policy, min_partitions=2, max_quarantined=0, summary=""
    )
    df = frame(spark, tail)
    return spark_pass.run(spark, args, TOPICS, upto, tail_start, read=lambda: df, state=plan)


def full_pass(spark, records, end, out: Path, policy: str) -> dict:
    args = argparse.Namespace(output=str(out), policy=policy, min_partitions=2, max_quarantined=0, summary="")
    df = frame(spark, records)
    return spark_pass.run(spark, args, TOPICS, end, {}, read=lambda: df)


def rows(path: str | None, key) -> list[dict]:
    """Every row of a table the job wrote; answers through the one reader of both layouts (mm2_failover.adapters.answers)."""
    from mm2_failover.adapters.answers import read_table

    if path is None:
        return []
    return sorted(read_table(path).to_pylist(), key=key)


def answer_key(r):
    return (r["source_alias"], r["group"], r["topic"], r["partition"])


def position_key(r):
    return (r["source_alias"], r["checkpoint_partition"], r["checkpoint_offset"])


@pytest.mark.parametrize(
    "seed,refreshes,policy,merge",
    [
        (12, 1, "max", "tail keys broadcast"),
        (13, 2, "latest", "tail keys broadcast"),
        (14, 2, "max", "all keys"),
        (15, 1, "latest", "all keys"),
    ],
)
def test_state_plus_tail_answers_as_the_full_pass(spark, tmp_path, monkeypatch, seed, refreshes, policy, merge):
    if merge == "all keys":  # the merge of a long tail, on these short ones
        monkeypatch.setattr(transforms, "BROADCAST_TAIL_RECORDS", -1)
    records = history(seed, keys=120)
    assert any(r.key is None for r in records)  # keys that are null on both sides of a cut: one key (<=> joins)
    end = ends_of(records)
    rnd = random.Random(seed * 7 + refreshes)
    cuts = []
    for _ in range(refreshes):
        prev = cuts[-1] if cuts else {t: {p: 0 for p in ps} for t, ps in end.items()}
        cuts.append({t: {p: rnd.randint(prev[t][p], o) for p, o in ps.items()} for t, ps in end.items()})
    root = tmp_path / "latest-state"
    for i, upto in enumerate(cuts):
        s = step(spark, root, records, upto, None, policy, refresh=True)
        assert s["state_version"] and (root / s["state_version"] / "version.json").exists()
        assert s["state"]["full_pass"] == ([] if i else sorted(TOPICS)), s["state"]
    got = step(spark, root, records, end, tmp_path / "from-state", policy, refresh=False)
    want = full_pass(spark, records, end, tmp_path / "full", policy)
    assert got.get("merge") == (merge if refreshes else None), got.get("merge")
    # the latest policy answers in the state + delta layout: only the touched keys' answers are written
    assert got["output_layout"]["layout"] == ("state+delta" if refreshes and policy == "latest" else "full")
    if got["output_layout"]["layout"] == "state+delta":  # Spark, not knowing the layout, refuses it: never a part
        with pytest.raises(Exception, match="(?i)parquet|magic|footer|schema"):
            spark.read.parquet(got["output"]).collect()
    if refreshes:
        assert (
            got["state"]["full_pass"] == []
            and got["tail_offsets"] < want["tail_offsets"]
            or got["tail_offsets"] == want["tail_offsets"] == 0
        )
    for f in (
        "records_read",
        "tombstones",
        "quarantined",
        "quarantined_by_reason",
        "checkpoints",
        "groups",
        "regressions",
    ):
        assert got[f] == want[f], f
    assert rows(got["output"], answer_key) == rows(want["output"], answer_key)
    assert rows(got["quarantine_output"], position_key) == rows(want["quarantine_output"], position_key)
    rk = answer_key
    assert rows(got["regressions_output"], rk) == rows(want["regressions_output"], rk)
    assert want["quarantined"] and want["regressions"] and want["tombstones"]


def test_a_refresh_with_nothing_new_and_a_failover_with_an_empty_tail(spark, tmp_path):
    records = history(21, keys=60)
    end = ends_of(records)
    root = tmp_path / "latest-state"
    first = step(spark, root, records, end, None, "latest", refresh=True)
    again = step(spark, root, records, end, None, "latest", refresh=True)  # nothing new: the same version
    assert again["state_version"] == first["state_version"] and again.get("already_published")
    # the figures of the version it found, not nulls (the archive DAG's refresh crashed comparing a null
    # "quarantined" with --max-quarantined on a quiet cluster: issue 49)
    for f in ("records_read", "quarantined", "tombstones", "keys"):
        assert again[f] == first[f] and isinstance(again[f], int), (f, again[f], first[f])
    assert [v["name"] for v in st.StateRoot(root).versions()] == [first["state_version"]]
    got = step(spark, root, records, end, tmp_path / "out", "latest", refresh=False)
    want = full_pass(spark, records, end, tmp_path / "full", "latest")
    assert got["tail_offsets"] == 0 and got["state"]["full_pass"] == []
    assert rows(got["output"], answer_key) == rows(want["output"], answer_key)
    assert got["checkpoints"] == want["checkpoints"] > 0


def test_the_warm_up_runs_the_jobs_plans_on_every_kind_of_record(spark, tmp_path):
    """The Spark Connect server's warm-up (``mm2_failover.jobs.warm_up``) runs a full pass, a refresh and a state + tail answer on
    made-up records that hold every kind the job meets; both answers agree."""
    seconds = warm_up.warm_up(spark, str(tmp_path))
    assert set(seconds) == {"full_pass", "refresh", "state_and_tail"}
    full, from_state = rows(str(tmp_path / "full"), answer_key), rows(str(tmp_path / "from-state"), answer_key)
    assert full == from_state
    assert len(full) == 39  # 40 keys, one ending in a tombstone
    assert [r["metadata"] for r in full if r["partition"] == 2] == ["md"]
    assert [r["partition"] for r in full if r["regressed"]] == [1]
    quarantined = rows(str(tmp_path / "full_quarantine"), position_key)
    assert [r["reason"] for r in quarantined] and len(quarantined) == 1
