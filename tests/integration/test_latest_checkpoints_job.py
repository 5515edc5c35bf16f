"""The latest-checkpoint Spark job on checkpoint records MM2 wrote: bounded by the captured end offsets,
tombstones, quarantine of bad records, regressions and the `max` policy. Bad records are forged with the
project's encoder next to MM2's real ones (MM2 itself never writes them). So that the forged records do not
reach the other tests on the shared bed, the test copies MM2's real records (raw bytes) of its group into a
checkpoint topic of its own, under its own source alias, and adds the forged ones there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mm2_failover.adapters.spark import job_submission, spark_submit
from mm2_failover.rules import checkpoints as cpf
from mm2_failover.rules.report import checkpoint_warnings
from mm2_failover.stages.build_plan import make_plan
from mm2_failover.stages.snapshot import capture_snapshot

pytestmark = [pytest.mark.bed, pytest.mark.spark]
REPO = Path(__file__).resolve().parents[2]


def produce_raw(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for k, v in records:
        p.produce(topic, key=k, value=v, partition=0)
    assert p.flush(30) == 0


def read_parquet(path) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(str(path)).to_pylist()


def test_job_is_bounded_handles_tombstones_quarantines_bad_records_and_reports_regressions(prepared):
    p = prepared
    g = p.names["group"]
    rt = p.prep[g].replica_topic
    real = p.prep[g].checkpoints
    alias = "jobtest" + p.names["group"][-6:]
    cp_topic = f"{alias}.checkpoints.internal"
    p.target.create_topic(cp_topic, 1)
    mm2_records = [
        (k, v)
        for _t, _p, _o, k, v, _ts in p.target.read(p.target.offsets([(p.bed.checkpoints_topic, 0)]))
        if k and k.startswith(cpf.encode_key(g, rt, 0)[: 2 + len(g.encode())])
    ]
    assert len(mm2_records) >= 3  # what MM2 wrote for the group, byte for byte
    produce_raw(p.bed.target_bootstrap, cp_topic, mm2_records)
    gone, back, meta = g + "-gone", g + "-back", g + "-meta"
    bad = [
        (cpf.encode_key(g + "-x", rt, 0), cpf.encode_value(5, 5)[:-3]),  # value truncated
        (cpf.encode_key(g + "-x", rt, 0)[:5], cpf.encode_value(5, 5)),  # key truncated
        (cpf.encode_key(g + "-x", rt, 0), cpf.encode_value(5, 5, version=7)),  # unknown version
        (cpf.encode_key(g + "-x", rt, 0), cpf.encode_value(-4, 5)),  # negative offset
        (b"\x00\x02\xff\xfe" + cpf.encode_key("", rt, 0)[2:], cpf.encode_value(5, 5)),  # group not UTF-8
    ]
    produce_raw(
        p.bed.target_bootstrap,
        cp_topic,
        [
            (cpf.encode_key(gone, rt, 0), cpf.encode_value(10, 10)),
            (cpf.encode_key(gone, rt, 0), None),  # tombstone: the key is deleted
            (cpf.encode_key(back, rt, 0), cpf.encode_value(60, 50, "hi")),
            (cpf.encode_key(back, rt, 0), cpf.encode_value(61, 10, "lo")),  # went backwards (an MM2 restart)
            # commit metadata: the answer's own, never an older record's (the job fills it in by position)
            (cpf.encode_key(meta, rt, 0), cpf.encode_value(1, 1, "older")),
            (cpf.encode_key(meta, rt, 0), cpf.encode_value(2, 2)),
            (cpf.encode_key(meta, rt, 1), cpf.encode_value(1, 1)),
            (cpf.encode_key(meta, rt, 1), cpf.encode_value(3, 3, "\u00e9t\u00e9")),
            *bad,
        ],
    )
    ctx = p.ctx(groups_regex=f"{g}.*", source_alias=alias)
    snap = capture_snapshot(ctx)
    # written after the snapshot: must not influence the result, although it is in the topic when Spark reads
    produce_raw(p.bed.target_bootstrap, cp_topic, [(cpf.encode_key(g, rt, 0), cpf.encode_value(99, 99))])

    with job_submission(ctx.params, p.art, snap, p.target.conf) as sub:
        assert spark_submit("local[2]", sub) == 3  # more bad records than max_quarantined_records=0
    summary = json.loads(p.art.checkpoints_summary.read_text())
    assert summary["quarantined"] == 5
    assert summary["quarantined_by_reason"] == {
        "invalid_utf8": 1,
        "key_truncated": 1,
        "negative_offset": 1,
        "unknown_version": 1,
        "value_truncated": 1,
    }
    quarantine = read_parquet(summary["quarantine_output"])
    assert sorted(r["reason"] for r in quarantine) == sorted(summary["quarantined_by_reason"])
    assert all(r["source_alias"] == alias and r["checkpoint_offset"] >= 0 for r in quarantine)
    assert {bytes.fromhex(r["key_hex"]) for r in quarantine} == {k for k, _ in bad}

    rows = {(r["group"], r["partition"]): r for r in read_parquet(p.art.checkpoints)}
    # the real MM2 checkpoints of the group, not the one written after the capture
    assert {k[1]: r["downstream_offset"] for k, r in rows.items() if k[0] == g} == {
        part: c.downstream_offset for part, c in real.items()
    }
    assert {k[1]: r["metadata"] for k, r in rows.items() if k[0] == g} == {part: c.metadata for part, c in real.items()}
    assert (gone, 0) not in rows
    assert rows[(back, 0)]["downstream_offset"] == 10 and rows[(back, 0)]["regressed"]
    assert rows[(back, 0)]["metadata"] == "lo"
    assert [(rows[(meta, q)]["downstream_offset"], rows[(meta, q)]["metadata"]) for q in (0, 1)] == [
        (2, ""),
        (3, "\u00e9t\u00e9"),
    ]
    assert summary["regressions"] == 1
    reg = read_parquet(summary["regressions_output"])
    assert [(r["group"], r["from_downstream_offset"], r["to_downstream_offset"]) for r in reg] == [(back, 50, 10)]
    assert reg[0]["from_checkpoint_offset"] < reg[0]["to_checkpoint_offset"]
    assert any("went backwards" in w for w in checkpoint_warnings(summary))
    assert summary["records_read"] == len(mm2_records) + 8 + 5  # every record of the range, whatever its group

    # the operator's choice: keep the highest checkpoint for keys that went backwards
    params = p.params(groups_regex=f"{g}.*", source_alias=alias, checkpoint_policy="max", max_quarantined_records=5)
    with job_submission(params, p.art, snap, p.target.conf) as sub:
        assert spark_submit("local[2]", sub) == 0
    rows = {(r["group"], r["partition"]): r for r in read_parquet(p.art.checkpoints)}
    assert (rows[(back, 0)]["downstream_offset"], rows[(back, 0)]["upstream_offset"], rows[(back, 0)]["metadata"]) == (
        50,
        60,
        "hi",
    )
    assert rows[(g, 0)]["downstream_offset"] == real[0].downstream_offset


def test_a_driver_killed_mid_run_leaves_nothing_the_plan_reads_and_its_retry_answers_the_same(prepared, monkeypatch):
    """Fault drill 2 (issue 18): the Spark driver SIGKILLed right after writing its answers, before its summary
    (fault point ``job.after_answers``): the answers on disk are not read by the next step; the retry rewrites
    them and they are MM2's checkpoints of the group."""
    from mm2_failover.adapters.runfolder import RunFolderError

    p = prepared
    g = p.names["group"]
    ctx = p.ctx()
    snap = capture_snapshot(ctx)
    monkeypatch.setenv("MM2_FAILOVER_FAULT", "kill@job.after_answers")
    with job_submission(ctx.params, p.art, snap, p.target.conf) as sub:
        assert spark_submit("local[2]", sub) not in (0, 3)  # the driver died
    assert p.art.checkpoints.exists() and not p.art.checkpoints_summary.exists()
    with pytest.raises(RunFolderError, match="did not finish"):
        make_plan(ctx)
    monkeypatch.delenv("MM2_FAILOVER_FAULT")
    with job_submission(ctx.params, p.art, snap, p.target.conf) as sub:  # the task's retry
        assert spark_submit("local[2]", sub) == 0
    rows = {r["partition"]: r["downstream_offset"] for r in read_parquet(p.art.checkpoints) if r["group"] == g}
    assert rows == {part: c.downstream_offset for part, c in p.prep[g].checkpoints.items()}
    assert {(r.topic, r.partition) for r in make_plan(ctx).rows if r.group == g} == {
        (p.prep[g].replica_topic, part) for part in rows
    }


# ------------------------------------------------------------------------------------------ the driver's checks


def job(*args):
    """The job's entry point as spark-submit runs it, but with plain Python: the driver's checks run before Spark
    starts, so a refused argument never costs a Spark start."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(REPO / "plugins")}
    return subprocess.run(
        [sys.executable, str(REPO / "spark_jobs" / "latest_checkpoints.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize("case", ["past_end", "no_partition", "below_start", "no_topic", "deleted_since"])
def test_the_driver_checks_offsets_against_the_topic_before_spark_starts(bed, target, names, case):
    """Issue 14 item 15: offsets outside the log, partitions or topics that do not exist, and records deleted since
    the snapshot are refused with the partition named (exit 2, or 5), within seconds (the old job exited 0 with an
    empty answer, stalled ~120 s per split, or failed with a Java trace)."""
    import time

    topic = f"{names['topic']}.checkpoints.internal"
    target.create_topic(topic, 1)
    produce_raw(bed.target_bootstrap, topic, [(cpf.encode_key("g", "t", 0), cpf.encode_value(i, i)) for i in range(10)])
    end, start, want = {topic: {"0": 10}}, {topic: {"0": 0}}, 2
    if case == "past_end":
        end = {topic: {"0": 11}}
    elif case == "no_partition":
        end = {topic: {"0": 10, "1": 3}}
    elif case == "below_start":
        target.delete_records({(topic, 0): 8})
        end, start = {topic: {"0": 5}}, {}
    elif case == "no_topic":
        end = {topic + "-x": {"0": 1}}
    elif case == "deleted_since":
        target.delete_records({(topic, 0): 4})
        want = 5
    args = [
        "--bootstrap-servers",
        bed.target_bootstrap,
        "--checkpoints-topic",
        f"a={topic if case != 'no_topic' else topic + '-x'}",
        "--end-offsets",
        json.dumps(end),
        "--output",
        "/nonexistent/out",
    ] + (["--start-offsets", json.dumps(start)] if start else [])
    t0 = time.monotonic()
    r = job(*args)
    assert r.returncode == want, r.stderr[-2000:]
    assert time.monotonic() - t0 < 30
    assert "Traceback" not in r.stderr
    says = {
        "past_end": "end offset 11 is past the log end 10",
        "no_partition": f"{topic}[1]",
        "below_start": "end offset 5 is below the log start 8",
        "no_topic": "not found",
        "deleted_since": "records [0, 4) of the range were deleted since the snapshot",
    }[case]
    assert says in r.stderr
