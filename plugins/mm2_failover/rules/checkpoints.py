"""MirrorMaker 2 checkpoint records: the wire format, in one place.

``org.apache.kafka.connect.mirror.Checkpoint`` serialises with Kafka protocol types (big-endian;
STRING = int16 length + UTF-8 bytes):

* key:   ``group`` STRING, ``topic`` STRING, ``partition`` INT32
  (the topic is the *replica* topic on the target, already renamed by the replication policy);
* value: ``version`` INT16 (MM2 writes 0), ``upstreamOffset`` INT64, ``offset`` INT64 (downstream),
  ``metadata`` STRING.

This module is pure: it decodes and encodes single records in Python (used by the tests, the bed and
the CLI), and it renders the *same* rules as Spark SQL expressions (:func:`sql_decode_columns`) so that
the Spark job decodes a whole topic without Python UDFs. Both paths return the same reason codes for
records they refuse; nothing is silently dropped.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

#: The value versions MM2 writes and we understand. Anything else is quarantined, never guessed at.
KNOWN_VERSIONS = (0,)

# Reason codes for records that are not checkpoints we can use (quarantine). Stable strings: they appear
# in reports and in the Spark job's quarantine output.
NULL_KEY = "null_key"
KEY_TRUNCATED = "key_truncated"
KEY_TRAILING_BYTES = "key_trailing_bytes"
VALUE_TRUNCATED = "value_truncated"
VALUE_TRAILING_BYTES = "value_trailing_bytes"
UNKNOWN_VERSION = "unknown_version"
NEGATIVE_OFFSET = "negative_offset"
NEGATIVE_PARTITION = "negative_partition"
INVALID_UTF8 = "invalid_utf8"
REASONS = (
    NULL_KEY,
    KEY_TRUNCATED,
    KEY_TRAILING_BYTES,
    VALUE_TRUNCATED,
    VALUE_TRAILING_BYTES,
    UNKNOWN_VERSION,
    NEGATIVE_OFFSET,
    NEGATIVE_PARTITION,
    INVALID_UTF8,
)


class MalformedCheckpoint(ValueError):
    """A record of the checkpoints topic that is not a checkpoint we can use; ``reason`` is a code above."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True, order=True)
class CheckpointKey:
    group: str
    topic: str  # replica topic on the target, e.g. "primary.orders"
    partition: int


@dataclass(frozen=True)
class CheckpointValue:
    upstream_offset: int  # the group's committed offset on the source
    downstream_offset: int  # the translated offset on the target: what the group should commit there
    metadata: str
    version: int = 0


@dataclass(frozen=True)
class Checkpoint:
    """The one checkpoint type: an MM2 checkpoint record decoded (:func:`decode`: its flow's alias is not in the
    record, so ``source_alias`` is empty), or an answer of the latest-checkpoints job read for planning (the alias
    its checkpoints topic names). :class:`mm2_failover.rules.latest.Answer` is this plus where it was read."""

    group: str
    topic: str  # replica topic on the target, e.g. "primary.orders"
    partition: int
    upstream_offset: int  # the group's committed offset on the source
    downstream_offset: int  # the translated offset on the target
    metadata: str = ""
    source_alias: str = ""  # the MM2 flow (source cluster alias) whose checkpoints topic it came from

    @property
    def key(self) -> CheckpointKey:
        return CheckpointKey(self.group, self.topic, self.partition)


# ---------------------------------------------------------------------------------------------- decode


class _Reader:
    def __init__(self, data: bytes, truncated: str):
        self.data = data
        self.pos = 0
        self.truncated = truncated

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise MalformedCheckpoint(self.truncated, f"need {n} bytes at {self.pos}, have {len(self.data)}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def string_bytes(self) -> bytes:
        n = self.int16()
        if n < 0:
            raise MalformedCheckpoint(self.truncated, f"negative string length {n}")
        return self.take(n)

    def done(self, trailing: str) -> None:
        if self.pos != len(self.data):
            raise MalformedCheckpoint(trailing, f"{len(self.data) - self.pos} bytes after the last field")


def _utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MalformedCheckpoint(INVALID_UTF8, str(e)) from None


# The checks run in one fixed order (structure, then text, then trailing bytes, then ranges); the Spark SQL
# rendering below (sql_key_columns / sql_value_columns) applies them in the same order, so both paths give the
# same reason for the same bytes.


def decode_key(key: bytes | None) -> CheckpointKey:
    if key is None:
        raise MalformedCheckpoint(NULL_KEY)
    r = _Reader(bytes(key), KEY_TRUNCATED)
    group_raw, topic_raw, partition = r.string_bytes(), r.string_bytes(), r.int32()
    group, topic = _utf8(group_raw), _utf8(topic_raw)
    r.done(KEY_TRAILING_BYTES)
    if partition < 0:
        raise MalformedCheckpoint(NEGATIVE_PARTITION, str(partition))
    return CheckpointKey(group, topic, partition)


def decode_value(value: bytes) -> CheckpointValue:
    """Decode a non-null value. A null value is a tombstone: the caller handles it (see :func:`decode`)."""
    r = _Reader(bytes(value), VALUE_TRUNCATED)
    version = r.int16()
    if version not in KNOWN_VERSIONS:
        raise MalformedCheckpoint(UNKNOWN_VERSION, str(version))
    upstream, downstream, metadata_raw = r.int64(), r.int64(), r.string_bytes()
    metadata = _utf8(metadata_raw)
    r.done(VALUE_TRAILING_BYTES)
    if upstream < 0 or downstream < 0:
        raise MalformedCheckpoint(NEGATIVE_OFFSET, f"upstream={upstream} downstream={downstream}")
    return CheckpointValue(upstream, downstream, metadata, version)


def decode(key: bytes | None, value: bytes | None) -> Checkpoint | CheckpointKey:
    """Decode one record. Returns a :class:`Checkpoint`, or the bare key for a tombstone (null value).

    Raises :class:`MalformedCheckpoint` with a reason code for anything else.
    """
    k = decode_key(key)
    if value is None:
        return k
    v = decode_value(value)
    return Checkpoint(k.group, k.topic, k.partition, v.upstream_offset, v.downstream_offset, v.metadata)


# ---------------------------------------------------------------------------------------------- encode


def _string(s: str) -> bytes:
    raw = s.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise ValueError("a Kafka STRING holds at most 32767 bytes")
    return struct.pack(">h", len(raw)) + raw


def encode_key(group: str, topic: str, partition: int) -> bytes:
    return _string(group) + _string(topic) + struct.pack(">i", partition)


def encode_value(upstream_offset: int, downstream_offset: int, metadata: str = "", version: int = 0) -> bytes:
    return struct.pack(">hqq", version, upstream_offset, downstream_offset) + _string(metadata)


def encode(cp: Checkpoint) -> tuple[bytes, bytes]:
    return (
        encode_key(cp.group, cp.topic, cp.partition),
        encode_value(cp.upstream_offset, cp.downstream_offset, cp.metadata),
    )


# ---------------------------------------------------------------------------------------------- Spark SQL


def _sql_u16(col: str, pos: str) -> str:  # int16 read as unsigned 0..65535, NULL if out of bounds
    return f"IF(length({col}) >= {pos} + 1, CAST(conv(hex(substring({col}, {pos}, 2)), 16, 10) AS INT), NULL)"


def _sql_i32(col: str, pos: str) -> str:  # conv of 8 hex digits is unsigned: sign-extend by hand
    u = f"CAST(conv(hex(substring({col}, {pos}, 4)), 16, 10) AS BIGINT)"
    return f"IF(length({col}) >= {pos} + 3, CAST(IF({u} >= 2147483648, {u} - 4294967296, {u}) AS INT), NULL)"


def _sql_i64(col: str, pos: str) -> str:
    return f"IF(length({col}) >= {pos} + 7, CAST(conv(hex(substring({col}, {pos}, 8)), 16, -10) AS BIGINT), NULL)"


# The checks run in the order decode() meets them: the key's checks (decode_key), then, for a non-null value,
# the value's (decode_value). A reason of the key wins over one of the value, as in decode().


def sql_key_columns(key: str = "key") -> dict[str, str]:
    """:func:`decode_key` as Spark SQL expressions (evaluate in order): ``partition``, ``key_reason`` (NULL for
    a usable key) and the raw ``_graw``/``_traw`` bytes of group and topic (cast them to STRING only when
    ``key_reason`` is NULL). Positions are 1-based; key layout ``[g_len:2][group][t_len:2][topic][partition:4]``.
    A length >= 0x8000 is a negative int16: treated as truncated, like decode_key does."""
    cols: dict[str, str] = {}
    cols["_glen"] = _sql_u16(key, "1")
    cols["_tpos"] = "3 + _glen"
    cols["_tlen"] = f"IF(_glen < 32768, {_sql_u16(key, '_tpos')}, NULL)"
    cols["_ppos"] = "_tpos + 2 + _tlen"
    cols["_key_ok"] = (
        f"{key} IS NOT NULL AND _glen IS NOT NULL AND _glen < 32768 AND _tlen IS NOT NULL AND _tlen < 32768"
        f" AND length({key}) >= _ppos + 3"
    )
    cols["_graw"] = f"IF(_key_ok, substring({key}, 3, _glen), NULL)"
    cols["_traw"] = f"IF(_key_ok, substring({key}, _tpos + 2, _tlen), NULL)"
    cols["partition"] = f"IF(_key_ok, {_sql_i32(key, '_ppos')}, NULL)"
    cols["key_reason"] = (
        "CASE"
        f" WHEN {key} IS NULL THEN '{NULL_KEY}'"
        f" WHEN NOT _key_ok THEN '{KEY_TRUNCATED}'"
        f" WHEN NOT is_valid_utf8(CAST(_graw AS STRING)) THEN '{INVALID_UTF8}'"
        f" WHEN NOT is_valid_utf8(CAST(_traw AS STRING)) THEN '{INVALID_UTF8}'"
        f" WHEN length({key}) <> _ppos + 3 THEN '{KEY_TRAILING_BYTES}'"
        f" WHEN partition < 0 THEN '{NEGATIVE_PARTITION}'"
        " ELSE NULL END"
    )
    return cols


def sql_value_columns(value: str = "value") -> dict[str, str]:
    """:func:`decode_value` as Spark SQL expressions (evaluate in order): ``is_tombstone``, ``upstream_offset``,
    ``downstream_offset``, ``value_reason`` (NULL for a usable value and for a tombstone) and the raw ``_mraw``
    metadata bytes. Value layout ``[version:2][upstream:8][downstream:8][m_len:2][metadata]``."""
    cols: dict[str, str] = {}
    cols["is_tombstone"] = f"{value} IS NULL"
    cols["_vraw"] = _sql_u16(value, "1")
    cols["_version"] = "IF(_vraw >= 32768, _vraw - 65536, _vraw)"
    cols["_up"] = _sql_i64(value, "3")
    cols["_down"] = _sql_i64(value, "11")
    cols["upstream_offset"] = "_up"
    cols["downstream_offset"] = "_down"
    cols["_mlen"] = _sql_u16(value, "19")
    cols["_mraw"] = f"IF(_mlen IS NOT NULL AND _mlen < 32768, substring({value}, 21, _mlen), NULL)"
    known = ", ".join(str(v) for v in KNOWN_VERSIONS)
    cols["value_reason"] = (
        "CASE"
        f" WHEN {value} IS NULL THEN NULL"
        f" WHEN _version IS NULL THEN '{VALUE_TRUNCATED}'"
        f" WHEN _version NOT IN ({known}) THEN '{UNKNOWN_VERSION}'"
        f" WHEN _down IS NULL OR _mlen IS NULL OR _mlen >= 32768"
        f" OR length({value}) < 20 + _mlen THEN '{VALUE_TRUNCATED}'"
        f" WHEN NOT is_valid_utf8(CAST(_mraw AS STRING)) THEN '{INVALID_UTF8}'"
        f" WHEN length({value}) <> 20 + _mlen THEN '{VALUE_TRAILING_BYTES}'"
        f" WHEN _up < 0 OR _down < 0 THEN '{NEGATIVE_OFFSET}'"
        " ELSE NULL END"
    )
    return cols


def sql_value_plain_ok(value: str = "value") -> str:
    """A cheap test for the usual value: a known version, non-negative offsets and empty metadata (exactly 20
    bytes). TRUE implies ``value_reason`` IS NULL and metadata ``''``; FALSE (or NULL, for a tombstone) says
    nothing, and the caller falls back to :func:`sql_value_columns`. Byte comparisons only (Spark compares
    binary unsigned), none of the hex/conv work of the full decoder."""
    versions = ", ".join("X'" + struct.pack(">h", v).hex().upper() + "'" for v in KNOWN_VERSIONS)
    return (
        f"(length({value}) = 20 AND substring({value}, 1, 2) IN ({versions})"
        f" AND substring({value}, 19, 2) = X'0000'"
        f" AND substring({value}, 3, 1) < X'80' AND substring({value}, 11, 1) < X'80')"
    )


_SQL_HELPER = re.compile(r"(?<![\w`.'])(_[A-Za-z]\w*)(?!\w)")


def sql_inline(cols: dict[str, str], name: str) -> str:
    """``cols[name]`` with the helper columns it uses (``_``-prefixed names in ``cols``) substituted, recursively:
    one self-contained expression, which Spark evaluates only where it is used (e.g. in one branch of a CASE),
    instead of helper columns that a projection computes for every row."""

    def sub(expr: str) -> str:
        return _SQL_HELPER.sub(lambda m: f"({sub(cols[m.group(1)])})" if m.group(1) in cols else m.group(0), expr)

    return sub(cols[name])


def sql_decode_columns(key: str = "key", value: str = "value") -> dict[str, str]:
    """The same decoding rules as :func:`decode`, as Spark SQL expressions over binary columns.

    Returns an ordered mapping ``column name -> SQL expression``; evaluate them in order with
    ``selectExpr`` stages (later expressions refer to earlier columns). The final columns are
    ``group, topic, partition, upstream_offset, downstream_offset, metadata, is_tombstone, reason``
    where ``reason`` is NULL for a usable record (a checkpoint or a tombstone) and one of the reason codes
    otherwise. Spark 4 runs SQL in ANSI mode, so 64-bit values are converted with ``conv(..., 16, -10)``
    (signed) and every substring is bounds-checked before it is read.
    """
    cols = {**sql_key_columns(key), **sql_value_columns(value)}
    # decode() checks the key first; a tombstone with a usable key is usable (value_reason is NULL for it)
    cols["reason"] = "COALESCE(key_reason, value_reason)"
    cols["group"] = "IF(reason IS NULL, CAST(_graw AS STRING), NULL)"
    cols["topic"] = "IF(reason IS NULL, CAST(_traw AS STRING), NULL)"
    cols["metadata"] = "IF(reason IS NULL AND NOT is_tombstone, CAST(_mraw AS STRING), NULL)"
    return cols
