"""One writer per target across hosts (mm2_failover/rules/lease.py), by rule: who holds the lease, decided from the lock
records alone, and when a holder must stop writing - property-tested over interleavings of several writers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mm2_failover.rules import lease as L
from mm2_failover.rules.lease import CLAIM, MAX_HOLD_MS, RELEASE, RENEW, Record, replay, topic_problems

LEASE = 10_000


def recs(*rows) -> list[Record]:
    return [Record(op, h, ts, LEASE, i) for i, (op, h, ts) in enumerate(rows)]


# ------------------------------------------------------------------------------------------ 1. claim


def test_a_claim_on_a_free_lock_is_granted_and_its_offset_is_the_token():
    s, g = L.replay(recs((CLAIM, "a", 1000)))
    assert (s.holder, s.since_ms, s.expires_ms, s.token) == ("a", 1000, 11_000, 0) and g == {0: True}


def test_a_claim_while_another_holds_it_is_ignored_and_one_after_it_ran_out_is_granted():
    s, g = L.replay(recs((CLAIM, "a", 1000), (CLAIM, "b", 10_999), (CLAIM, "b", 11_000)))
    assert g == {0: True, 1: False, 2: True} and (s.holder, s.token) == ("b", 2)


def test_the_holder_claiming_again_renews():
    s, g = L.replay(recs((CLAIM, "a", 1000), (CLAIM, "a", 5000)))
    assert g == {0: True, 1: True} and (s.holder, s.since_ms, s.expires_ms, s.token) == ("a", 1000, 15_000, 0)


# ------------------------------------------------------------------------------------------ 2. renew


def test_a_renew_in_time_extends_the_lease_and_a_late_one_is_lost():
    s, g = L.replay(recs((CLAIM, "a", 1000), (RENEW, "a", 9000), (RENEW, "a", 19_001)))
    assert g == {0: True, 1: True, 2: False} and s.expires_ms == 19_000


def test_a_renew_by_anyone_but_the_holder_is_ignored():
    _s, g = L.replay(recs((CLAIM, "a", 1000), (RENEW, "b", 2000)))
    assert g == {0: True, 1: False}


def test_nobody_holds_a_target_past_the_longest_hold():
    t = L.MAX_HOLD_MS
    held = L.State("a", since_ms=0, expires_ms=t + 5000, token=0)
    assert L.step(held, Record(RENEW, "a", t - 1, LEASE))[1] is True
    assert L.step(held, Record(RENEW, "a", t, LEASE))[1] is False


# ------------------------------------------------------------------------------------------ 3. release


def test_a_release_by_the_holder_frees_it_at_once_and_by_another_is_ignored():
    s, g = L.replay(recs((CLAIM, "a", 1000), (RELEASE, "b", 2000), (RELEASE, "a", 3000), (CLAIM, "b", 3001)))
    assert g == {0: True, 1: False, 2: True, 3: True} and s.holder == "b"


def test_an_unknown_op_is_ignored():
    s, g = L.replay([Record("steal", "b", 5, LEASE, 0)])
    assert g == {0: False} and s.holder is None


# ------------------------------------------------------------------------------------------ 4. the holder's stop


def test_the_holder_stops_its_margin_before_the_lease_runs_out_on_its_own_clock():
    assert L.valid_until(100.0, 60_000, 20.0) == 140.0


@pytest.mark.parametrize(
    "lease_s,margin_s,renew_s,timeout_s,match",
    [(60, 20, 45, 15, "renew interval"), (60, 20, 0, 15, "renew interval"), (60, 10, 5, 15, "must exceed one write")],
)
def test_settings_that_would_let_a_holder_write_after_its_lease_are_refused(
    lease_s, margin_s, renew_s, timeout_s, match
):
    with pytest.raises(ValueError, match=match):
        L.check_timing(lease_s, margin_s, renew_s, timeout_s)
    L.check_timing(60, 20, 10, 15)


# ------------------------------------------------------------------------------------------ the whole path


@st.composite
def histories(draw):
    """Writers a..c sending claims, renews and releases; each record's broker time is its send time plus a delay
    (the network), in the order the broker appended them. Returns the records and, for each, its send time."""
    n = draw(st.integers(1, 40))
    sends = []
    t = 0
    for _ in range(n):
        t += draw(st.integers(0, 6000))
        sends.append((t, draw(st.sampled_from(OPS_W)), draw(st.sampled_from("abc")), draw(st.integers(0, 3000))))
    appended = sorted(sends, key=lambda x: x[0] + x[3])  # the broker stamps at arrival, in arrival order
    out, sent_at, last_ts = [], [], 0
    for i, (sent, op, h, delay) in enumerate(appended):
        ts = max(last_ts, sent + delay)  # LogAppendTime never goes back within a partition
        last_ts = ts
        out.append(Record(op, h, ts, LEASE, i))
        sent_at.append(sent)
    return out, sent_at


OPS_W = [CLAIM, CLAIM, RENEW, RENEW, RELEASE]


def stop(sent_ms: int, margin_ms: int) -> float:
    """Rule 4's stop in ms (its clock in seconds)."""
    return L.valid_until(sent_ms / 1000, LEASE, margin_ms / 1000) * 1000


@settings(max_examples=400, deadline=None)
@given(histories(), st.integers(0, 4000), st.data())
def test_no_two_writers_ever_write_at_once(h, margin, data):
    """Rules 1-4 together: each holder writes from the broker time its claim was granted (it learns later) until its
    own stop - the send time of its newest granted record + lease - margin (by rule 4 the broker stamped it no
    earlier than it was sent) - plus one write's duration (at most the margin), or until it released; no two such
    windows overlap, whatever the network's delays and the interleavings."""
    write = data.draw(st.integers(0, margin))
    records, sent_at = h
    windows: dict[str, list[list[float]]] = {}
    state = L.State()
    for r in records:
        before = state.holder
        state, ok = L.step(state, r)
        mine = windows.setdefault(r.holder, [])
        if ok and r.op in (CLAIM, RENEW) and before != r.holder:  # a new tenure from this record's time
            mine.append([r.ts_ms, stop(sent_at[r.offset], margin) + write])
        elif ok and r.op in (CLAIM, RENEW):
            mine[-1][1] = max(mine[-1][1], stop(sent_at[r.offset], margin) + write)
        elif ok and r.op == RELEASE and mine:
            mine[-1][1] = min(mine[-1][1], r.ts_ms)  # released: it wrote nothing after sending the release
    spans = sorted((a, b, w) for w, ws in windows.items() for a, b in ws if b > a)
    for (_a1, b1, w1), (a2, _b2, w2) in zip(spans, spans[1:]):
        assert b1 <= a2 or w1 == w2, (spans, records)


def test_a_history_that_lost_the_holders_claim_grants_a_second_writer_which_the_topic_check_refuses():
    """Issue 50 item 8, on the pure rules: A claims and renews; a compacted topic keeps only the newest record of the
    one key (A's renew), a short retention drops the claim: the replay no longer knows A holds it, and B's claim is
    granted while A still renews. The topic's configuration is refused for exactly these settings."""
    a_claim, a_renew = Record(CLAIM, "A", 1_000, 60_000, 0), Record(RENEW, "A", 30_000, 60_000, 1)
    b_claim = Record(CLAIM, "B", 40_000, 60_000, 2)
    assert replay([a_claim, a_renew, b_claim])[1][2] is False  # the whole history: B waits
    assert replay([a_renew, b_claim])[1][2] is True  # the claim forgotten: B is granted while A holds it
    ok = {
        "message.timestamp.type": "LogAppendTime",
        "cleanup.policy": "delete",
        "retention.ms": "604800000",
        "retention.bytes": "-1",
    }
    assert topic_problems(ok, 60_000) == []
    assert topic_problems({**ok, "retention.ms": "-1"}, 60_000) == []
    for bad in (
        {"cleanup.policy": "compact"},
        {"retention.ms": str(MAX_HOLD_MS)},
        {"retention.bytes": "100"},
        {"message.timestamp.type": "CreateTime"},
    ):
        (problem,) = topic_problems({**ok, **bad}, 60_000)
        k, v = next(iter(bad.items()))
        assert problem.startswith(f"{k}={v}:"), problem
