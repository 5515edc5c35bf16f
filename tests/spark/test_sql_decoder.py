"""The Spark SQL rendering of the checkpoint decoder (checkpoints.sql_decode_columns, what the Spark job runs)
gives, row for row, what the Python decoder gives: the same fields for checkpoints, is_tombstone for null
values, and the same reason code for every malformed class (including every truncation), for MM2's golden
bytes and for a few hundred randomly mutated records.

Spark runs once for the Spark tests (one local session, tests/spark/conftest.py; one DataFrame here); the records come from a seeded generator.
"""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

import pytest

from mm2_failover.rules import checkpoints as cpf

pytestmark = [pytest.mark.spark]

SEED = 20261123
GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "mm2_checkpoints_golden.json"


# ----------------------------------------------------------------------------------- record generator


def s_string(s: str | bytes) -> bytes:  # Kafka STRING, written from the schema (not with the module)
    raw = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack(">h", len(raw)) + raw


def s_key(group, topic, partition: int) -> bytes:
    return s_string(group) + s_string(topic) + struct.pack(">i", partition)


def s_value(up: int, down: int, metadata="", version: int = 0) -> bytes:
    return struct.pack(">hqq", version, up, down) + s_string(metadata)


ALPHABET = [
    "a",
    "b",
    "Z",
    "0",
    "9",
    "-",
    ".",
    "_",
    " ",
    "'",
    '"',
    "\\",
    "%",
    "\x00",
    "\x7f",
    "\u00e9",
    "\u00ff",
    "\u0800",
    "\u6f22",
    "\ufffd",
    "\uffff",
    "\U00010000",
    "\U0001f642",
    "\U0010ffff",
]
INVALID_UTF8 = [
    b"\x80",
    b"\xbf",
    b"\xc3\x28",
    b"\xc0\xaf",
    b"\xc1\xbf",
    b"\xe0\x80\xaf",
    b"\xf0\x80\x80\xaf",
    b"\xed\xa0\x80",
    b"\xed\xbf\xbf",
    b"\xf4\x90\x80\x80",
    b"\xf5\x80\x80\x80",
    b"\xfe",
    b"\xff",
    b"\xe2\x82",
    b"\xf0\x9f\x99",
    b"\xc3",
]
BOUNDARY_OFFSETS = [0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**53 + 1, 2**62, 2**63 - 1]
BOUNDARY_PARTITIONS = [0, 1, 255, 256, 2**15, 2**16, 2**31 - 1]


def generate() -> list[tuple[str, bytes | None, bytes | None]]:
    """(label, key, value) for every class the decoders must agree on."""
    rnd = random.Random(SEED)

    def text(max_len=40):
        return "".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, max_len)))

    def offset():
        return rnd.choice(BOUNDARY_OFFSETS) if rnd.random() < 0.3 else rnd.randint(0, 2**63 - 1)

    def partition():
        return rnd.choice(BOUNDARY_PARTITIONS) if rnd.random() < 0.3 else rnd.randint(0, 2**31 - 1)

    def valid():
        return s_key(text(), text(), partition()), s_value(offset(), offset(), text(15))

    out: list[tuple[str, bytes | None, bytes | None]] = []
    for _ in range(150):
        out.append(("valid", *valid()))
    out.append(("valid-long", s_key("g" * 400, "t" * 400, 2**31 - 1), s_value(2**63 - 1, 2**63 - 1, "m" * 400)))
    out.append(("valid-empty", s_key("", "", 0), s_value(0, 0, "")))
    out.append(("valid-max-strings", s_key("g" * 0x7FFF, "\u00e9" * 0x3FFF, 1), s_value(1, 2, "\U0001f642" * 0x1FFF)))
    for _ in range(20):
        out.append(("tombstone", valid()[0], None))
    out.append(("tombstone-empty-strings", s_key("", "", 0), None))

    k, v = s_key("orders-app", "primary.orders", 2), s_value(50, 1, "meta")
    out += [("null-key", None, v), ("null-key-null-value", None, None), ("empty-key", b"", v), ("empty-value", k, b"")]
    for rec_k, rec_v in [(k, v), valid(), valid(), (s_key("\U0001f642", "\u6f22", 3), s_value(7, 8, "\u00e9"))]:
        out += [(f"key-cut-{c}", rec_k[:c], rec_v) for c in range(len(rec_k))]
        out += [(f"key-cut-{c}-tombstone", rec_k[:c], None) for c in range(0, len(rec_k), 3)]
        out += [(f"value-cut-{c}", rec_k, rec_v[:c]) for c in range(len(rec_v))]
    for _ in range(10):
        extra = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 9)))
        vk, vv = valid()
        out += [
            ("key-trailing", vk + extra, vv),
            ("key-trailing-tombstone", vk + extra, None),
            ("value-trailing", vk, vv + extra),
        ]
    for ver in [1, 2, 255, 256, 2**15 - 1, -1, -2, -(2**15)] + [rnd.randint(1, 2**15 - 1) for _ in range(5)]:
        out += [
            (f"version-{ver}", k, s_value(1, 1, "m", ver)),
            (f"version-{ver}-short", k, s_value(1, 1, "", ver)[:2]),
            (f"version-{ver}-cut", k, s_value(1, 1, "", ver)[:7]),
        ]
    for up, down in [(-1, 0), (0, -1), (-1, -1), (-(2**63), 5), (5, -(2**63)), (-(2**31), 2**63 - 1)]:
        out.append((f"negative-offset-{up}-{down}", k, s_value(up, down, "m")))
    for p in [-1, -2, -(2**31), -256, rnd.randint(-(2**31), -1)]:
        out += [
            (f"negative-partition-{p}", s_key("g", "t", p), v),
            (f"negative-partition-{p}-tombstone", s_key("g", "t", p), None),
        ]
    for frag in INVALID_UTF8:
        bad = text(5).encode() + frag + text(5).encode()
        out += [
            (f"utf8-group-{frag.hex()}", s_key(bad, "t", 0), v),
            (f"utf8-topic-{frag.hex()}", s_key("g", bad, 0), v),
            (f"utf8-group-{frag.hex()}-tombstone", s_key(bad, "t", 0), None),
            (f"utf8-metadata-{frag.hex()}", k, s_value(1, 1, bad)),
        ]
    for n in [0x8000, 0xFFFF]:
        neg = struct.pack(">H", n)
        out += [
            (f"neg-len-group-{n}", neg + b"abcd" + s_string("t") + b"\0" * 4, v),
            (f"neg-len-topic-{n}", s_string("g") + neg + b"abcd" + b"\0" * 4, v),
            (f"neg-len-metadata-{n}", k, struct.pack(">hqq", 0, 1, 1) + neg + b"abcd"),
        ]
    # the usual value (no metadata), which the job recognises by byte comparisons: offsets whose bytes have
    # the high bit set in every position, and negative ones that must not pass
    for o in BOUNDARY_OFFSETS + [0x80, 0x8080808080808080 & (2**63 - 1), 2**56, 2**56 - 1]:
        out += [
            (f"plain-{o}", k, s_value(o, o, "")),
            (f"plain-up-{o}", k, s_value(o, 1, "")),
            (f"plain-down-{o}", k, s_value(1, o, "")),
        ]
    out += [
        ("plain-negative-up", k, s_value(-1, 1, "")),
        ("plain-negative-down", k, s_value(1, -(2**63), "")),
        ("plain-version-1", k, s_value(1, 1, "", 1)),
        ("plain-version-256", k, s_value(1, 1, "", 256)),
        ("plain-21-bytes", k, s_value(1, 1, "") + b"\0"),
        ("plain-19-bytes", k, s_value(1, 1, "")[:-1]),
    ]
    # precedence between reasons
    out += [
        ("prec-utf8-over-trailing", s_key(b"\xff", "t", -1) + b"\0", v),
        ("prec-trailing-over-negative-partition", s_key("g", "t", -1) + b"\0", v),
        ("prec-key-over-value", k[:-1], v[:-1]),
        ("prec-version-over-truncated", k, s_value(1, 1, "", 3)[:5]),
        ("prec-value-utf8-over-trailing", k, s_value(-1, -1, b"\xff") + b"\0"),
        ("prec-value-trailing-over-negative", k, s_value(-1, -1, "m") + b"\0"),
    ]
    # golden bytes from real MM2
    for r in json.loads(GOLDEN.read_text())["records"]:
        out.append(
            (
                f"golden-p{r['partition']}@{r['offset']}",
                bytes.fromhex(r["key_hex"]),
                None if r["value_hex"] is None else bytes.fromhex(r["value_hex"]),
            )
        )
    # fuzz: random edits of valid records, and random bytes
    for i in range(250):
        kk, vv = (bytearray(b) for b in valid())
        for buf in (kk, vv):
            for _ in range(rnd.randint(0, 3)):
                j = rnd.randrange(len(buf) + 1)
                op = rnd.choice("fids")
                if op == "i":
                    buf[j:j] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 3)))
                elif op == "f" and j < len(buf):
                    buf[j] ^= 1 << rnd.randrange(8)
                elif op == "d" and j < len(buf):
                    del buf[j]
                elif j < len(buf):
                    buf[j] = rnd.randrange(256)
        out.append((f"mutated-{i}", bytes(kk), None if rnd.random() < 0.1 else bytes(vv)))
    for i in range(60):
        out.append(
            (
                f"random-{i}",
                bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 30))),
                bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 40))),
            )
        )
    return out


RECORDS = generate()


def python_view(key, value) -> dict:
    try:
        rec = cpf.decode(key, value)
    except cpf.MalformedCheckpoint as e:
        return {"reason": e.reason}
    if isinstance(rec, cpf.CheckpointKey):
        return {
            "reason": None,
            "is_tombstone": True,
            "group": rec.group,
            "topic": rec.topic,
            "partition": rec.partition,
        }
    return {
        "reason": None,
        "is_tombstone": False,
        "group": rec.group,
        "topic": rec.topic,
        "partition": rec.partition,
        "upstream_offset": rec.upstream_offset,
        "downstream_offset": rec.downstream_offset,
        "metadata": rec.metadata,
    }


def spark_view(row) -> dict:
    if row["reason"] is not None:
        # a refused record exposes no decoded text
        return {"reason": row["reason"], "_leak": (row["group"], row["topic"], row["metadata"])}
    got = {
        "reason": None,
        "is_tombstone": row["is_tombstone"],
        "group": row["group"],
        "topic": row["topic"],
        "partition": row["partition"],
    }
    if row["is_tombstone"]:
        assert (row["upstream_offset"], row["downstream_offset"], row["metadata"]) == (None, None, None)
    else:
        got.update(
            upstream_offset=row["upstream_offset"], downstream_offset=row["downstream_offset"], metadata=row["metadata"]
        )
    return got


@pytest.fixture(scope="module")
def decoded(spark):
    """Every generated record through the SQL expressions, in one Spark job: index -> Row."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame(
        [(i, k, v) for i, (_label, k, v) in enumerate(RECORDS)], "i INT, key BINARY, value BINARY"
    )
    cols = cpf.sql_decode_columns()
    for name, sql in cols.items():  # in order: later expressions refer to earlier columns
        df = df.withColumn(name, F.expr(sql))
    final = [
        "group",
        "topic",
        "partition",
        "upstream_offset",
        "downstream_offset",
        "metadata",
        "is_tombstone",
        "reason",
    ]
    assert set(final) <= set(cols)
    rows = {r["i"]: r for r in df.select("i", *final).collect()}
    assert len(rows) == len(RECORDS)
    return rows


def test_generator_covers_every_class():
    views = [python_view(k, v) for _label, k, v in RECORDS]
    assert {w["reason"] for w in views} == set(cpf.REASONS) | {None}
    assert sum(1 for w in views if w["reason"] is None and not w["is_tombstone"]) >= 150
    assert sum(1 for w in views if w["reason"] is None and w["is_tombstone"]) >= 20
    assert len(RECORDS) >= 500


def test_sql_decoder_agrees_with_the_python_decoder(decoded):
    mismatches = []
    for i, (label, k, v) in enumerate(RECORDS):
        want, got = python_view(k, v), spark_view(decoded[i])
        leak = got.pop("_leak", None)
        if got != want or (leak is not None and leak != (None, None, None)):
            mismatches.append(
                f"{label}: key={None if k is None else k.hex()} value={None if v is None else v.hex()}"
                f"\n    python={want}\n    spark ={got} leaked={leak}"
            )
    assert not mismatches, f"{len(mismatches)} of {len(RECORDS)} records differ:\n" + "\n".join(mismatches[:25])


def test_golden_rows_decode_in_spark_as_stored(decoded):
    golden = json.loads(GOLDEN.read_text())["records"]
    by_label = {label: i for i, (label, _k, _v) in enumerate(RECORDS)}
    for r in golden:
        row = decoded[by_label[f"golden-p{r['partition']}@{r['offset']}"]]
        assert row["reason"] is None and row["is_tombstone"] is False
        assert {f: row[f] for f in r["decoded"]} == r["decoded"]


@pytest.fixture(scope="module")
def value_path(spark):
    """The job's per-record value expressions (the plain-value test, and the value checks inlined into one
    expression each, as the job evaluates them): index -> Row, for every record with a value."""
    vcols = cpf.sql_value_columns()
    df = spark.createDataFrame(
        [(i, v) for i, (_label, _k, v) in enumerate(RECORDS) if v is not None], "i INT, value BINARY"
    )
    rows = df.selectExpr(
        "i",
        f"{cpf.sql_value_plain_ok()} AS plain",
        *(f"{cpf.sql_inline(vcols, c)} AS {c}" for c in ("value_reason", "upstream_offset", "downstream_offset")),
    ).collect()
    return {r["i"]: r for r in rows}


def python_value(v: bytes):
    try:
        return cpf.decode_value(v)
    except cpf.MalformedCheckpoint as e:
        return e.reason


def test_plain_value_test_is_exactly_a_usable_value_without_metadata(value_path):
    wrong = []
    for i, (label, _k, v) in enumerate(RECORDS):
        if v is None:
            continue
        val = python_value(v)
        want = isinstance(val, cpf.CheckpointValue) and val.metadata == ""
        if value_path[i]["plain"] is not want:
            wrong.append(f"{label}: value={v.hex()} plain={value_path[i]['plain']} python={val}")
    assert not wrong, "\n".join(wrong[:20])
    assert sum(1 for r in value_path.values() if r["plain"]) >= 40
    assert sum(1 for r in value_path.values() if not r["plain"]) >= 300


def test_inlined_value_checks_agree_with_the_python_decoder(value_path):
    wrong = []
    for i, (label, _k, v) in enumerate(RECORDS):
        if v is None:
            continue
        val, row = python_value(v), value_path[i]
        if isinstance(val, cpf.CheckpointValue):
            ok = row["value_reason"] is None and (row["upstream_offset"], row["downstream_offset"]) == (
                val.upstream_offset,
                val.downstream_offset,
            )
        else:
            ok = row["value_reason"] == val
        if not ok:
            wrong.append(f"{label}: value={v.hex()} python={val} spark={row}")
    assert not wrong, "\n".join(wrong[:20])


def test_sql_inline_substitutes_helper_columns_only():
    cols = {"_a": "length(v)", "_b": "_a + 1", "x_a": "0", "out": "IF(_b > 2, '_a', x_a + _b)"}
    assert cpf.sql_inline(cols, "out") == "IF(((length(v)) + 1) > 2, '_a', x_a + ((length(v)) + 1))"
