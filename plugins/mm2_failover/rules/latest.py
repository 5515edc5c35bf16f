"""Which checkpoint record answers for a key: the rule of the latest-checkpoints job, in plain Python (pure).

The Spark job (:mod:`mm2_failover.jobs.checkpoint_pass.transforms`) applies these rules with Spark SQL over millions of
records; this module is the same rules over a list, written for clarity, as the oracle the Spark tests compare the
job against. For the records of one checkpoints topic range (any order), per key = (source alias, raw key bytes):

1. **Quarantine** - a record whose key is not a checkpoint key, or whose value (when not null) is not a checkpoint
   value we understand, is quarantined with its reason (:func:`mm2_failover.rules.checkpoints.decode`); it never answers.
   Every record of a key that does not decode is quarantined.
2. **Latest wins** - the usable record with the highest position (partition, then offset) is the key's latest.
3. **Tombstones** - a null value is usable: when it is the latest, the key has no answer (as after compaction).
4. **Regressions** - a key *regressed* when a live (non-tombstone) usable record has a higher downstream offset than
   the latest's (an MM2 restart can checkpoint backwards).
5. **Policy** - ``latest``: the answer is the latest record; ``max``: for a regressed key, the live record with the
   highest downstream offset instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from mm2_failover.rules import checkpoints as cpf


@dataclass(frozen=True)
class Record:
    source_alias: str
    key: bytes | None
    value: bytes | None
    partition: int
    offset: int
    timestamp_ms: int = 0

    @property
    def position(self) -> tuple[int, int]:
        return (self.partition, self.offset)


@dataclass(frozen=True, kw_only=True)
class Answer(cpf.Checkpoint):
    """The latest checkpoint of a key (its alias set), plus where it was read and what rules 4-5 saw."""

    checkpoint_partition: int
    checkpoint_offset: int
    regressed: bool
    latest_downstream_offset: int
    max_downstream_offset: int


@dataclass
class Result:
    answers: dict[tuple[str, str, str, int], Answer] = field(default_factory=dict)  # (alias, group, topic, partition)
    records_read: int = 0
    tombstones: int = 0
    quarantined_by_reason: dict[str, int] = field(default_factory=dict)

    @property
    def quarantined(self) -> int:
        return sum(self.quarantined_by_reason.values())


def latest_per_key(records: Iterable[Record], policy: str = "latest") -> Result:
    if policy not in ("latest", "max"):
        raise ValueError(f"policy must be latest or max, not {policy!r}")
    out = Result()
    by_key: dict[tuple[str, bytes | None], list[tuple[Record, object]]] = {}
    for r in records:
        out.records_read += 1
        try:
            decoded = cpf.decode(r.key, r.value)  # rule 1
        except cpf.MalformedCheckpoint as e:
            out.quarantined_by_reason[e.reason] = out.quarantined_by_reason.get(e.reason, 0) + 1
            continue
        if r.value is None:
            out.tombstones += 1
        by_key.setdefault((r.source_alias, r.key), []).append((r, decoded))
    for (alias, _key), usable in by_key.items():
        latest_rec, latest = max(usable, key=lambda x: x[0].position)  # rule 2
        if isinstance(latest, cpf.CheckpointKey):
            continue  # rule 3: deleted
        live = [(rec, d) for rec, d in usable if isinstance(d, cpf.Checkpoint)]
        top = max(d.downstream_offset for _rec, d in live)
        regressed = top > latest.downstream_offset  # rule 4
        rec, chosen = latest_rec, latest
        if policy == "max" and regressed:  # rule 5 (ties: the latest of the highest)
            rec, chosen = max(((rec, d) for rec, d in live if d.downstream_offset == top), key=lambda x: x[0].position)
        out.answers[(alias, chosen.group, chosen.topic, chosen.partition)] = Answer(
            group=chosen.group,
            topic=chosen.topic,
            partition=chosen.partition,
            upstream_offset=chosen.upstream_offset,
            downstream_offset=chosen.downstream_offset,
            metadata=chosen.metadata,
            source_alias=alias,
            checkpoint_partition=rec.partition,
            checkpoint_offset=rec.offset,
            regressed=regressed,
            latest_downstream_offset=latest.downstream_offset,
            max_downstream_offset=top,
        )
    return out
