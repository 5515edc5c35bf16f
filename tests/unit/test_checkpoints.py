"""The MM2 checkpoint wire format (mm2_failover.rules.checkpoints), property-based.

The encoder below is written from Kafka's schema (``org.apache.kafka.connect.mirror.Checkpoint``), not from
the module: key = group STRING, topic STRING, partition INT32; value = version INT16, upstreamOffset INT64,
offset INT64, metadata STRING; big-endian, STRING = INT16 length + UTF-8 bytes. The module's encoder must
produce the same bytes and its decoder must invert them; every malformed class must be refused with its
reason code, in the documented order (structure, then text, then trailing bytes, then ranges; key first).
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from mm2_failover.rules import checkpoints as cpf

# ------------------------------------------------------------------------------------ schema encoder


def s_string(s: str | bytes) -> bytes:
    raw = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack(">h", len(raw)) + raw


def s_key(group: str | bytes, topic: str | bytes, partition: int) -> bytes:
    return s_string(group) + s_string(topic) + struct.pack(">i", partition)


def s_value(upstream: int, downstream: int, metadata: str | bytes = "", version: int = 0) -> bytes:
    return struct.pack(">h", version) + struct.pack(">q", upstream) + struct.pack(">q", downstream) + s_string(metadata)


# ------------------------------------------------------------------------------------ strategies

# Any encodable code point (no lone surrogates), with a bias towards multi-byte and non-BMP ones so that
# byte lengths (what the length prefix counts) differ from character counts.
_any_char = st.characters(codec="utf-8")
_wide_char = st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF, codec="utf-8")
_mid_char = st.characters(min_codepoint=0x80, max_codepoint=0xFFFF, codec="utf-8")
texts = st.text(st.one_of(_any_char, _wide_char, _mid_char), max_size=80)  # up to 320 bytes
partitions = st.integers(0, 2**31 - 1)
offsets = st.integers(0, 2**63 - 1)
neg_partitions = st.integers(-(2**31), -1)
neg_offsets = st.integers(-(2**63), -1)
int16 = st.integers(-(2**15), 2**15 - 1)


@st.composite
def records(draw):
    g, t, m = draw(texts), draw(texts), draw(texts)
    p, up, down = draw(partitions), draw(offsets), draw(offsets)
    return cpf.Checkpoint(g, t, p, up, down, m)


def encoded(cp: cpf.Checkpoint) -> tuple[bytes, bytes]:
    return s_key(cp.group, cp.topic, cp.partition), s_value(cp.upstream_offset, cp.downstream_offset, cp.metadata)


# Byte sequences that are not UTF-8 (Python's strict codec, which follows Unicode's well-formedness table).
INVALID_UTF8_FRAGMENTS = [
    b"\x80",  # lone continuation byte
    b"\xbf",
    b"\xc3\x28",  # lead byte followed by a non-continuation
    b"\xc0\xaf",  # overlong '/'
    b"\xc1\xbf",  # overlong
    b"\xe0\x80\xaf",  # overlong 3-byte
    b"\xf0\x80\x80\xaf",  # overlong 4-byte
    b"\xed\xa0\x80",  # UTF-16 surrogate U+D800 encoded as UTF-8 (CESU/"WTF-8")
    b"\xed\xbf\xbf",  # U+DFFF
    b"\xf4\x90\x80\x80",  # U+110000, beyond Unicode
    b"\xf5\x80\x80\x80",
    b"\xfe",
    b"\xff",
    b"\xe2\x82",  # truncated 3-byte sequence (euro sign without its last byte)
    b"\xf0\x9f\x99",  # truncated 4-byte sequence
    b"\xc3",  # truncated 2-byte sequence at the end
]


@st.composite
def invalid_utf8(draw):
    prefix = draw(texts).encode()
    suffix = draw(texts).encode()
    bad = prefix + draw(st.sampled_from(INVALID_UTF8_FRAGMENTS)) + suffix
    assume(len(bad) <= 0x7FFF)
    with pytest.raises(UnicodeDecodeError):  # the generator really produces invalid UTF-8
        bad.decode("utf-8")
    return bad


def reason(key, value) -> str:
    with pytest.raises(cpf.MalformedCheckpoint) as e:
        cpf.decode(key, value)
    assert e.value.reason in cpf.REASONS
    assert str(e.value).startswith(e.value.reason)
    return e.value.reason


# ------------------------------------------------------------------------------------ round trips


@settings(max_examples=400, deadline=None)
@given(records())
@example(cpf.Checkpoint("", "", 0, 0, 0, ""))
@example(cpf.Checkpoint("g" * 300, "t" * 300, 2**31 - 1, 2**63 - 1, 2**63 - 1, "m" * 300))
@example(cpf.Checkpoint("\U0010ffff\U0001f642", "primary.\u6f22\u5b57", 7, 1, 2**62, "\x00"))
def test_encode_matches_the_schema_and_decode_inverts_it(cp):
    k, v = encoded(cp)
    assert cpf.encode_key(cp.group, cp.topic, cp.partition) == k
    assert cpf.encode_value(cp.upstream_offset, cp.downstream_offset, cp.metadata) == v
    assert cpf.encode(cp) == (k, v)
    assert cpf.decode(k, v) == cp
    assert cpf.decode_key(k) == cpf.CheckpointKey(cp.group, cp.topic, cp.partition) == cp.key
    assert cpf.decode_value(v) == cpf.CheckpointValue(cp.upstream_offset, cp.downstream_offset, cp.metadata, 0)
    # the length prefixes count UTF-8 bytes, not characters
    assert struct.unpack(">h", k[:2])[0] == len(cp.group.encode("utf-8"))
    assert len(v) == 20 + len(cp.metadata.encode("utf-8"))


@settings(max_examples=100, deadline=None)
@given(records())
def test_decode_accepts_any_bytes_like(cp):
    k, v = encoded(cp)
    assert cpf.decode(bytearray(k), memoryview(v)) == cp


@settings(max_examples=200, deadline=None)
@given(texts, texts, partitions)
def test_a_null_value_is_a_tombstone_returning_the_bare_key(group, topic, partition):
    got = cpf.decode(s_key(group, topic, partition), None)
    assert type(got) is cpf.CheckpointKey
    assert got == cpf.CheckpointKey(group, topic, partition)


def test_an_empty_value_is_not_a_tombstone():
    assert reason(s_key("g", "t", 0), b"") == cpf.VALUE_TRUNCATED


def test_strings_longer_than_a_kafka_string_are_refused_by_the_encoder():
    assert cpf.encode_key("g" * 0x7FFF, "t", 0)[:2] == b"\x7f\xff"  # the largest that fits
    with pytest.raises(ValueError):
        cpf.encode_key("g" * 0x8000, "t", 0)
    with pytest.raises(ValueError):
        cpf.encode_value(1, 1, "\u00e9" * 0x4000)  # 16384 characters, 32768 bytes


# ------------------------------------------------------------------------------------ malformed classes


@settings(max_examples=50, deadline=None)
@given(st.one_of(st.none(), st.binary(max_size=40)))
def test_null_key(value):
    assert reason(None, value) == cpf.NULL_KEY


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_every_truncation_of_the_key(cp):
    k, v = encoded(cp)
    for cut in range(len(k)):
        assert reason(k[:cut], v) == cpf.KEY_TRUNCATED, cut
        assert reason(k[:cut], None) == cpf.KEY_TRUNCATED, cut  # a tombstone needs a good key too


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_every_truncation_of_the_value(cp):
    k, v = encoded(cp)
    for cut in range(len(v)):
        assert reason(k, v[:cut]) == cpf.VALUE_TRUNCATED, cut


@settings(max_examples=150, deadline=None)
@given(records(), st.binary(min_size=1, max_size=30))
def test_trailing_bytes(cp, extra):
    k, v = encoded(cp)
    assert reason(k + extra, v) == cpf.KEY_TRAILING_BYTES
    assert reason(k + extra, None) == cpf.KEY_TRAILING_BYTES
    assert reason(k, v + extra) == cpf.VALUE_TRAILING_BYTES


@settings(max_examples=300, deadline=None)
@given(int16.filter(lambda x: x not in cpf.KNOWN_VERSIONS), records(), st.integers(0, 30))
@example(1, cpf.Checkpoint("g", "t", 0, 1, 1, ""), 30)
@example(-1, cpf.Checkpoint("g", "t", 0, 1, 1, ""), 30)
@example(-(2**15), cpf.Checkpoint("g", "t", 0, 1, 1, ""), 2)
@example(2**15 - 1, cpf.Checkpoint("g", "t", 0, 1, 1, ""), 2)
def test_unknown_versions_are_refused_whatever_follows(version, cp, keep):
    k, _ = encoded(cp)
    v = s_value(cp.upstream_offset, cp.downstream_offset, cp.metadata, version)
    assert reason(k, v) == cpf.UNKNOWN_VERSION
    # the version is checked before the rest is read: a truncated or longer body does not change the reason
    assert reason(k, v[: 2 + keep]) == cpf.UNKNOWN_VERSION
    assert reason(k, v + b"\x00") == cpf.UNKNOWN_VERSION


@settings(max_examples=200, deadline=None)
@given(records(), neg_offsets, offsets, st.sampled_from(["upstream", "downstream", "both"]))
@example(cpf.Checkpoint("g", "t", 0, 0, 0, ""), -1, 0, "upstream")
@example(cpf.Checkpoint("g", "t", 0, 0, 0, ""), -(2**63), 0, "downstream")
def test_negative_offsets(cp, neg, other, which):
    k, _ = encoded(cp)
    up, down = {"upstream": (neg, other), "downstream": (other, neg), "both": (neg, neg)}[which]
    assert reason(k, s_value(up, down, cp.metadata)) == cpf.NEGATIVE_OFFSET


@settings(max_examples=200, deadline=None)
@given(texts, texts, neg_partitions)
@example("g", "t", -1)
@example("g", "t", -(2**31))
def test_negative_partition(group, topic, partition):
    k = s_key(group, topic, partition)
    assert reason(k, s_value(1, 1)) == cpf.NEGATIVE_PARTITION
    assert reason(k, None) == cpf.NEGATIVE_PARTITION  # not a usable tombstone either


@settings(max_examples=200, deadline=None)
@given(invalid_utf8(), texts, partitions, st.sampled_from(["group", "topic", "metadata"]))
def test_invalid_utf8(bad, good, partition, where):
    if where == "group":
        k, v = s_key(bad, good, partition), s_value(1, 2, good)
    elif where == "topic":
        k, v = s_key(good, bad, partition), s_value(1, 2, good)
    else:
        k, v = s_key(good, good, partition), s_value(1, 2, bad)
    assert reason(k, v) == cpf.INVALID_UTF8
    if where != "metadata":
        assert reason(k, None) == cpf.INVALID_UTF8


@pytest.mark.parametrize("length", [0x8000, 0xFFFF, 0xFFFE])
def test_negative_string_lengths_are_truncation(length):
    neg = struct.pack(">H", length)
    assert reason(neg + b"abc" + s_string("t") + b"\x00" * 4, s_value(1, 1)) == cpf.KEY_TRUNCATED
    assert reason(s_string("g") + neg + b"abc" + b"\x00" * 4, s_value(1, 1)) == cpf.KEY_TRUNCATED
    assert reason(s_key("g", "t", 0), struct.pack(">hqq", 0, 1, 1) + neg + b"abc") == cpf.VALUE_TRUNCATED


# ------------------------------------------------------------------------------------ order of the checks


def test_precedence_of_the_reasons():
    good_k, good_v = s_key("g", "t", 1), s_value(1, 1, "m")
    bad = b"\xff"
    # key before value
    assert reason(good_k[:-1], good_v[:-1]) == cpf.KEY_TRUNCATED
    assert reason(s_key("g", "t", -1), s_value(1, 1, version=9)) == cpf.NEGATIVE_PARTITION
    assert reason(good_k + b"\x00", s_value(-1, 1)) == cpf.KEY_TRAILING_BYTES
    # key: structure, then text, then trailing bytes, then range
    assert reason(s_string(bad) + s_string("t"), good_v) == cpf.KEY_TRUNCATED  # no room for the partition
    assert reason(s_key(bad, "t", -1) + b"\x00", good_v) == cpf.INVALID_UTF8
    assert reason(s_key("g", "t", -1) + b"\x00", good_v) == cpf.KEY_TRAILING_BYTES
    # value: version, then structure, then text, then trailing bytes, then range
    assert reason(good_k, s_value(1, 1, version=5)[:5]) == cpf.UNKNOWN_VERSION
    assert reason(good_k, s_value(-1, -1, bad)[:-1]) == cpf.VALUE_TRUNCATED
    assert reason(good_k, s_value(-1, -1, bad) + b"\x00") == cpf.INVALID_UTF8
    assert reason(good_k, s_value(-1, -1, "m") + b"\x00") == cpf.VALUE_TRAILING_BYTES
    assert reason(good_k, s_value(-1, -1, "m")) == cpf.NEGATIVE_OFFSET


# ------------------------------------------------------------------------------------ fuzz vs. an oracle


class _Bad(Exception):
    pass


def oracle(key: bytes | None, value: bytes | None):
    """The documented rules, written independently: returns a Checkpoint / CheckpointKey or a reason string."""
    if key is None:
        return cpf.NULL_KEY

    def read_string(buf, pos, truncated):
        if pos + 2 > len(buf):
            raise _Bad(truncated)
        n = int.from_bytes(buf[pos : pos + 2], "big", signed=True)
        if n < 0 or pos + 2 + n > len(buf):
            raise _Bad(truncated)
        return buf[pos + 2 : pos + 2 + n], pos + 2 + n

    def text(raw):
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _Bad(cpf.INVALID_UTF8) from None

    try:
        g, pos = read_string(key, 0, cpf.KEY_TRUNCATED)
        t, pos = read_string(key, pos, cpf.KEY_TRUNCATED)
        if pos + 4 > len(key):
            raise _Bad(cpf.KEY_TRUNCATED)
        p = int.from_bytes(key[pos : pos + 4], "big", signed=True)
        g, t = text(g), text(t)
        if pos + 4 != len(key):
            raise _Bad(cpf.KEY_TRAILING_BYTES)
        if p < 0:
            raise _Bad(cpf.NEGATIVE_PARTITION)
        if value is None:
            return cpf.CheckpointKey(g, t, p)
        if len(value) < 2:
            raise _Bad(cpf.VALUE_TRUNCATED)
        if int.from_bytes(value[:2], "big", signed=True) not in cpf.KNOWN_VERSIONS:
            raise _Bad(cpf.UNKNOWN_VERSION)
        if len(value) < 18:
            raise _Bad(cpf.VALUE_TRUNCATED)
        up = int.from_bytes(value[2:10], "big", signed=True)
        down = int.from_bytes(value[10:18], "big", signed=True)
        m, pos = read_string(value, 18, cpf.VALUE_TRUNCATED)
        m = text(m)
        if pos != len(value):
            raise _Bad(cpf.VALUE_TRAILING_BYTES)
        if up < 0 or down < 0:
            raise _Bad(cpf.NEGATIVE_OFFSET)
        return cpf.Checkpoint(g, t, p, up, down, m)
    except _Bad as e:
        return e.args[0]


def module(key, value):
    try:
        return cpf.decode(key, value)
    except cpf.MalformedCheckpoint as e:
        return e.reason


@st.composite
def mutated(draw):
    """A valid record, then a few random byte edits (flip, insert, delete, overwrite) in key and/or value."""
    cp = draw(records())
    k, v = (bytearray(b) for b in encoded(cp))
    if draw(st.booleans()):
        v = None
    for buf in (k, v):
        if buf is None:
            continue
        for _ in range(draw(st.integers(0, 3))):
            op = draw(st.sampled_from(["flip", "insert", "delete", "set"]))
            i = draw(st.integers(0, max(0, len(buf) - 1)))
            if op == "insert":
                buf[i:i] = draw(st.binary(min_size=1, max_size=3))
            elif buf and op == "delete":
                del buf[i]
            elif buf and op == "flip":
                buf[i] ^= 1 << draw(st.integers(0, 7))
            elif buf:
                buf[i] = draw(st.integers(0, 255))
    return bytes(k), None if v is None else bytes(v)


@settings(max_examples=1000, deadline=None)
@given(mutated())
def test_mutated_records_decode_as_the_oracle_says(kv):
    assert module(*kv) == oracle(*kv)


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.none(), st.binary(max_size=60)), st.one_of(st.none(), st.binary(max_size=60)))
def test_arbitrary_bytes_never_raise_anything_but_malformed(key, value):
    got = module(key, value)  # any other exception fails the test
    assert got == oracle(key, value)
