"""Golden bytes that real MirrorMaker 2 wrote to primary.checkpoints.internal on the bed
(scripts/capture_golden.py). The expectation in the fixture was decoded by the capture script with struct and
Kafka's schema, not by mm2_failover.rules.checkpoints."""

import json
import re
import struct
from pathlib import Path

import pytest

from mm2_failover.rules import checkpoints as cpf

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "mm2_checkpoints_golden.json").read_text())
RECORDS = GOLDEN["records"]


def test_fixture_holds_real_mm2_records():
    assert GOLDEN["kafka_version"] == "4.3.1"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}Z)?", GOLDEN["captured"])
    assert GOLDEN["topic"] == "primary.checkpoints.internal"
    assert RECORDS, "no records captured"
    assert all(r["value_hex"] is not None for r in RECORDS)
    # the scenario's group and both partitions of its replica topic are there
    sc = GOLDEN["scenario"]
    assert {(r["decoded"]["group"], r["decoded"]["topic"]) for r in RECORDS} == {(sc["group"], sc["replica_topic"])}
    assert {r["decoded"]["partition"] for r in RECORDS} == set(range(sc["partitions"]))
    # MM2 checkpoints the offsets the group committed on the source
    latest = {
        r["decoded"]["partition"]: r["decoded"] for r in sorted(RECORDS, key=lambda r: (r["partition"], r["offset"]))
    }
    assert {str(p): d["upstream_offset"] for p, d in latest.items()} == sc["committed_on_source"]
    for d in latest.values():
        assert 0 <= d["downstream_offset"] <= d["upstream_offset"]  # one producer, no gaps: never ahead


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: f"p{r['partition']}@{r['offset']}")
def test_decodes_to_the_stored_expectation_and_re_encodes_to_the_same_bytes(rec):
    k, v = bytes.fromhex(rec["key_hex"]), bytes.fromhex(rec["value_hex"])
    cp = cpf.decode(k, v)
    assert type(cp) is cpf.Checkpoint
    assert cp == cpf.Checkpoint(**rec["decoded"])
    assert cpf.encode(cp) == (k, v)
    assert cpf.encode_key(cp.group, cp.topic, cp.partition) == k
    assert cpf.encode_value(cp.upstream_offset, cp.downstream_offset, cp.metadata) == v
    assert cpf.decode(k, None) == cp.key  # the same key as a tombstone


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: f"p{r['partition']}@{r['offset']}")
def test_mm2_layout_read_independently(rec):
    """The bytes themselves, read with struct: version 0 header, two int64, an int16-prefixed metadata string."""
    k, v = bytes.fromhex(rec["key_hex"]), bytes.fromhex(rec["value_hex"])
    d = rec["decoded"]
    (glen,) = struct.unpack_from(">h", k, 0)
    assert k[2 : 2 + glen].decode() == d["group"]
    (tlen,) = struct.unpack_from(">h", k, 2 + glen)
    assert k[4 + glen : 4 + glen + tlen].decode() == d["topic"]
    assert struct.unpack_from(">i", k, 4 + glen + tlen) == (d["partition"],) and len(k) == 8 + glen + tlen
    assert struct.unpack_from(">hqqh", v, 0) == (
        0,
        d["upstream_offset"],
        d["downstream_offset"],
        len(d["metadata"].encode()),
    )
    assert len(v) == 20 + len(d["metadata"].encode())
