"""Random histories of MM2 checkpoint records for the Spark job's differential tests (``tests/spark/``): the job
against the Python oracle, and the kept state against a full pass."""

from __future__ import annotations

import random

from mm2_failover.rules import checkpoints as cpf
from mm2_failover.rules.latest import Record

TOPICS = {"a": "a.checkpoints.internal", "b": "b.checkpoints.internal"}


def history(seed: int, keys: int = 150) -> list[Record]:
    """Random histories per key, interleaved as they would arrive; downstream offsets unique per key (so that the
    'highest' record of the max policy is never a tie)."""
    rnd = random.Random(seed)
    per_key = []
    for i in range(keys):
        alias = rnd.choice("ab")
        group = rnd.choice([f"g{i}", f"caf\u00e9-{i}", f"grp {i}"])
        key = cpf.encode_key(group, f"{alias}.t{i % 5}", rnd.randrange(4))
        r = rnd.random()
        if r < 0.03:
            key = key[: rnd.randrange(len(key))]  # a key that does not decode: every record of it is quarantined
        elif r < 0.04:
            key = None  # a record some other producer wrote without a key: quarantined (null_key)
        downs = rnd.sample(range(1000), rnd.randint(1, 8))
        recs = []
        for d in downs:
            r = rnd.random()
            if r < 0.12:
                value = None  # tombstone
            elif r < 0.18:
                value = rnd.choice(
                    [
                        cpf.encode_value(d + 5, d)[:-2],
                        cpf.encode_value(d + 5, d, version=3),
                        cpf.encode_value(-1, d),
                        cpf.encode_value(d + 5, d) + b"x",
                    ]
                )
            else:
                value = cpf.encode_value(d + rnd.randrange(50), d, rnd.choice(["", "", "m", "\u00e9t\u00e9"]))
            recs.append((alias, key, value))
        per_key.append(recs)
    out, offsets, ts = [], {}, 1_700_000_000_000
    while any(per_key):
        recs = rnd.choice([r for r in per_key if r])
        alias, key, value = recs.pop(0)
        part = rnd.randrange(2)
        off = offsets.get((alias, part), 0)
        offsets[(alias, part)] = off + 1
        ts += 1
        out.append(Record(alias, key, value, part, off, ts))
    return out
