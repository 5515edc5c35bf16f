"""The latest-checkpoint rule (mm2_failover.rules.latest, pure), grouped by rule; the Spark job is compared with it in
tests/spark/test_latest_job_vs_oracle.py."""

from __future__ import annotations

import pytest

from mm2_failover.rules import checkpoints as cpf
from mm2_failover.rules.latest import Record, latest_per_key

K = cpf.encode_key("g", "primary.t", 0)


def rec(value, partition=0, offset=0, key=K, alias="primary"):
    return Record(alias, key, value, partition, offset)


def v(up, down, md=""):
    return cpf.encode_value(up, down, md)


def answer(res, alias="primary"):
    return res.answers.get((alias, "g", "primary.t", 0))


# ------------------------------------------------------------------------------------------ rule 1: quarantine


def test_bad_records_never_answer_and_are_counted_by_reason():
    res = latest_per_key(
        [
            rec(v(5, 5), offset=0),
            rec(v(9, 9)[:-3], offset=1),
            rec(v(1, 1), key=K[:3], offset=2),
            rec(None, key=K[:3], offset=3),
        ]
    )
    assert answer(res).downstream_offset == 5
    assert res.quarantined_by_reason == {"value_truncated": 1, "key_truncated": 2}
    assert res.records_read == 4 and res.quarantined == 3


# ------------------------------------------------------------------------------------------ rule 2: latest wins


def test_the_highest_position_wins_whatever_the_order_of_arrival():
    res = latest_per_key(
        [rec(v(9, 9), partition=0, offset=7), rec(v(3, 3), partition=1, offset=0), rec(v(8, 8), partition=0, offset=9)]
    )
    a = answer(res)
    assert (a.downstream_offset, a.checkpoint_partition, a.checkpoint_offset) == (3, 1, 0)  # partition first


# ------------------------------------------------------------------------------------------ rule 3: tombstones


def test_a_tombstone_as_the_latest_deletes_the_key_an_older_one_does_not():
    assert answer(latest_per_key([rec(v(5, 5), offset=0), rec(None, offset=1)])) is None
    res = latest_per_key([rec(None, offset=0), rec(v(5, 5), offset=1)])
    assert answer(res).downstream_offset == 5 and res.tombstones == 1


# ------------------------------------------------------------------------------------------ rules 4, 5: regressions


def test_regressions_are_flagged_and_the_policy_decides():
    records = [rec(v(60, 50, "hi"), offset=0), rec(v(61, 10, "lo"), offset=1)]
    a = answer(latest_per_key(records))
    assert (a.downstream_offset, a.metadata, a.regressed, a.max_downstream_offset) == (10, "lo", True, 50)
    a = answer(latest_per_key(records, "max"))
    assert (a.downstream_offset, a.upstream_offset, a.metadata, a.checkpoint_offset) == (50, 60, "hi", 0)
    with pytest.raises(ValueError):
        latest_per_key(records, "newest")


def test_aliases_are_separate_keys():
    res = latest_per_key([rec(v(1, 1), alias="a"), rec(v(2, 2), alias="b", offset=1)])
    assert answer(res, "a").downstream_offset == 1 and answer(res, "b").downstream_offset == 2
