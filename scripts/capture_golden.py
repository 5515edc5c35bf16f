"""Capture golden checkpoint bytes from REAL MirrorMaker 2 output, for tests/unit/test_golden.py.

    PYTHONPATH=plugins .venv/bin/python scripts/capture_golden.py                 # starts a bed, runs a scenario
    PYTHONPATH=plugins .venv/bin/python scripts/capture_golden.py --bootstrap H:P  # reads a running target

Writes tests/fixtures/mm2_checkpoints_golden.json: the raw key/value bytes (hex) of every record MM2 wrote to
``<alias>.checkpoints.internal`` (with its partition and offset in that topic), and the decoded expectation.

The expectation is decoded HERE, with struct and Kafka's schema (``Checkpoint.KEY_SCHEMA``, the value header
``version`` INT16 and ``VALUE_SCHEMA_V0``), independently of ``mm2_failover.rules.checkpoints``; the module's
decoder is only cross-checked, so a bug in it cannot leak into the fixture. The Kafka version is read from
the ``connect-mirror-<version>.jar`` the bed ran.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import struct
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "fixtures" / "mm2_checkpoints_golden.json"

GROUP, TOPIC, PARTITIONS, PRODUCED = "golden-app", "golden", 2, 30
# different committed offsets per partition, so that a swapped field or partition shows in the fixture
CONSUMED_UPTO = {0: 30, 1: 12}


def schema_decode(key: bytes, value: bytes | None) -> dict:
    """Kafka's layout, big-endian: key = group STRING, topic STRING, partition INT32; value = version INT16,
    upstreamOffset INT64, offset INT64, metadata STRING (STRING = INT16 length + UTF-8)."""
    pos = 0

    def string(buf: bytes) -> str:
        nonlocal pos
        (n,) = struct.unpack_from(">h", buf, pos)
        s = buf[pos + 2 : pos + 2 + n]
        assert n >= 0 and len(s) == n, "truncated STRING"
        pos += 2 + n
        return s.decode("utf-8")

    group, topic = string(key), string(key)
    (partition,) = struct.unpack_from(">i", key, pos)
    assert pos + 4 == len(key), "trailing bytes in key"
    out = {"group": group, "topic": topic, "partition": partition}
    if value is None:
        return out
    version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
    assert version == 0, f"value version {version}"
    pos = 18
    metadata = string(value)
    assert pos == len(value), "trailing bytes in value"
    return {**out, "upstream_offset": upstream, "downstream_offset": downstream, "metadata": metadata}


def capture(bootstrap: str, topic: str, group: str | None = None) -> list[dict]:
    from mm2_failover.adapters.kafka.cluster import Cluster
    from mm2_failover.rules import checkpoints as cpf

    target = Cluster({"bootstrap.servers": bootstrap}, "target")
    out = []
    for _t, p, o, k, v, _ts in target.read(target.offsets(target.partitions([topic]))):
        want = schema_decode(k, v)
        if group and want["group"] != group:
            continue
        got = cpf.decode(k, v)  # cross-check only: the fixture holds the schema decoder's reading
        mine = got.__dict__ if v is not None else {"group": got.group, "topic": got.topic, "partition": got.partition}
        if dict(mine) != want:
            raise SystemExit(
                f"mm2_failover.rules.checkpoints disagrees with the schema at {topic}[{p}]@{o}: {mine} != {want}"
            )
        out.append(
            {
                "partition": p,
                "offset": o,
                "key_hex": k.hex(),
                "value_hex": None if v is None else v.hex(),
                "decoded": want,
            }
        )
    return out


def kafka_version(jars: Path) -> str:
    found = sorted(jars.glob("connect-mirror-[0-9]*.jar"))
    m = re.match(r"connect-mirror-(.+)\.jar$", found[-1].name) if found else None
    return m.group(1) if m else "unknown"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", help="target cluster of a running bed (default: start one and run the scenario)")
    ap.add_argument("--topic", default="primary.checkpoints.internal")
    ap.add_argument(
        "--group", help=f"keep only this group's checkpoints (default: all; the fresh bed has only {GROUP})"
    )
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    from testbed.bed import DEFAULT_JARS, kafka_jars

    meta = {"kafka_version": kafka_version(kafka_jars(DEFAULT_JARS))}
    if a.bootstrap:
        records = capture(a.bootstrap, a.topic, a.group)
        meta["source"] = f"Apache Kafka {meta['kafka_version']} MirrorMaker 2, target {a.bootstrap}"
    else:
        from testbed import scenario
        from testbed.bed import Bed

        with Bed() as bed:
            prep = scenario.prepare(
                bed.source_bootstrap,
                bed.target_bootstrap,
                group=GROUP,
                topic=TOPIC,
                partitions=PARTITIONS,
                produced=PRODUCED,
                consumed_upto=dict(CONSUMED_UPTO),
            )
            records = capture(bed.target_bootstrap, a.topic, a.group)
        meta["source"] = (
            f"Apache Kafka {meta['kafka_version']} MirrorMaker 2 (dedicated mode) on the local bed (testbed.bed.Bed)"
        )
        meta["scenario"] = {
            "group": GROUP,
            "topic": TOPIC,
            "replica_topic": prep.replica_topic,
            "partitions": PARTITIONS,
            "produced_per_partition": PRODUCED,
            "committed_on_source": {str(p): o for p, o in sorted(CONSUMED_UPTO.items())},
        }
    doc = {
        **meta,
        "captured": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "topic": a.topic,
        "records": records,
    }
    a.out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(records)} record(s) -> {a.out}")
    return 0 if records else 1


if __name__ == "__main__":
    sys.exit(main())
