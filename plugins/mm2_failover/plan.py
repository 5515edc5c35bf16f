"""The failover plan: from the latest checkpoints and the target's state to one row per
(group, replica topic, partition). Pure functions; every rule lives here once.

Rules, in the order they apply to a row:

1. **Missing checkpoint** - a partition of a replica topic the group has checkpoints for, but no
   checkpoint of its own: ``skip`` (reason ``no_checkpoint``); an offset is never invented.
2. **Clamp** - a checkpointed downstream offset below the replica's log start (records deleted by
   retention) is clamped to the log start (flag ``retention_gap`` = records lost); above the log end it is
   clamped to the log end (flag ``beyond_log_end``). Action ``clamp``.
3. **Existing commits** (``on_existing_target_offsets``) - a group that already has commits on the target
   that differ from the plan: ``fail`` refuses the whole plan (naming the groups), ``skip`` skips the group,
   ``overwrite`` lets rule 4 decide per partition. Commits equal to the plan are not "different": a re-run
   after a successful apply converges instead of failing.
4. **No rewind** - a target commit ahead of the planned offset: ``skip`` (reason ``target_ahead``) unless
   ``allow_rewind``.

Replica partitions named by checkpoints that do not exist on the target raise :class:`PlanError`.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

COMMIT = "commit"
CLAMP = "clamp"
SKIP = "skip"

NO_CHECKPOINT = "no_checkpoint"
RETENTION_GAP = "retention_gap"
BEYOND_LOG_END = "beyond_log_end"
EXISTING_TARGET_OFFSETS = "existing_target_offsets"
TARGET_AHEAD = "target_ahead"


class PlanError(ValueError):
    """The plan cannot be built safely; the message says what is wrong and what to do."""


@dataclass(frozen=True)
class LatestCheckpoint:
    source_alias: str
    group: str
    topic: str  # replica topic on the target
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""


@dataclass(frozen=True)
class PartitionBounds:
    log_start: int
    log_end: int


@dataclass
class PlanRow:
    source_alias: str
    group: str
    topic: str
    partition: int
    upstream_offset: int | None
    downstream_offset: int | None
    current_offset: int | None  # the group's commit on the target before the run (None = none)
    planned_offset: int | None  # None when skipped
    action: str
    reason: str = ""
    log_start: int | None = None
    log_end: int | None = None
    retention_gap: int = 0  # records between the checkpoint and the log start, lost to retention
    metadata: str = ""

    @property
    def writes(self) -> bool:
        return self.action in (COMMIT, CLAMP)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Plan:
    rows: list[PlanRow] = field(default_factory=list)

    def groups(self) -> list[str]:
        return sorted({r.group for r in self.rows})

    def writes(self) -> dict[str, dict[tuple[str, int], int]]:
        """group -> {(topic, partition): offset} for every row that commits."""
        out: dict[str, dict[tuple[str, int], int]] = defaultdict(dict)
        for r in self.rows:
            if r.writes:
                out[r.group][(r.topic, r.partition)] = r.planned_offset
        return dict(out)

    def as_dicts(self) -> list[dict]:
        return [r.as_dict() for r in self.rows]

    @classmethod
    def from_dicts(cls, rows: Iterable[dict]) -> "Plan":
        return cls([PlanRow(**r) for r in rows])

    def to_reset_csv(self) -> str:
        """The rows that commit, as ``kafka-consumer-groups.sh --reset-offsets --from-file`` reads them:
        headerless ``group,topic,partition,offset`` lines."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        for r in sorted(self.rows, key=lambda r: (r.group, r.topic, r.partition)):
            if r.writes:
                w.writerow([r.group, r.topic, r.partition, r.planned_offset])
        return buf.getvalue()

    def counts(self) -> dict[str, int]:
        c = {COMMIT: 0, CLAMP: 0, SKIP: 0}
        for r in self.rows:
            c[r.action] += 1
        return c


def build_plan(
    checkpoints: Iterable[LatestCheckpoint],
    bounds: dict[tuple[str, int], PartitionBounds],
    current: dict[str, dict[tuple[str, int], int]],
    topic_partitions: dict[str, int],
    on_existing_target_offsets: str = "fail",
    allow_rewind: bool = False,
) -> Plan:
    """Build the plan.

    ``bounds``: log start/end per replica partition on the target (from the captured snapshot);
    ``current``: each group's commits on the target now; ``topic_partitions``: partition count of every
    replica topic on the target.
    """
    if on_existing_target_offsets not in ("fail", "skip", "overwrite"):
        raise PlanError(f"on_existing_target_offsets must be fail, skip or overwrite, not {on_existing_target_offsets!r}")
    by_group: dict[str, dict[tuple[str, int], LatestCheckpoint]] = defaultdict(dict)
    for cp in checkpoints:
        by_group[cp.group][(cp.topic, cp.partition)] = cp

    missing_topics = sorted({t for cps in by_group.values() for (t, _p) in cps if t not in topic_partitions})
    missing_parts = sorted({(t, p) for cps in by_group.values() for (t, p) in cps
                            if t in topic_partitions and p >= topic_partitions[t]})
    if missing_topics or missing_parts:
        raise PlanError(
            "checkpoints name replica partitions that do not exist on the target: "
            + ", ".join([f"topic {t}" for t in missing_topics] + [f"{t}[{p}]" for t, p in missing_parts])
            + ". Check the replication policy/separator and that MM2 replicates these topics to this cluster."
        )

    rows: list[PlanRow] = []
    for group in sorted(by_group):
        cps = by_group[group]
        alias = next(iter(cps.values())).source_alias
        cur = current.get(group, {})
        group_rows: list[PlanRow] = []
        for topic in sorted({t for t, _ in cps}):
            for p in range(topic_partitions[topic]):
                b = bounds.get((topic, p))
                cp = cps.get((topic, p))
                row = PlanRow(alias, group, topic, p, None, None, cur.get((topic, p)), None, SKIP, NO_CHECKPOINT,
                              b.log_start if b else None, b.log_end if b else None)
                if cp is not None:
                    row.source_alias = cp.source_alias
                    row.upstream_offset, row.downstream_offset = cp.upstream_offset, cp.downstream_offset
                    row.metadata = cp.metadata
                    _clamp(row)
                group_rows.append(row)
        _existing_and_rewind(group_rows, on_existing_target_offsets, allow_rewind)
        rows.extend(group_rows)

    if on_existing_target_offsets == "fail":
        conflicts = sorted({r.group for r in rows if r.reason == EXISTING_TARGET_OFFSETS})
        if conflicts:
            raise PlanError(
                f"{len(conflicts)} group(s) already have different committed offsets on the target: "
                + ", ".join(conflicts[:20]) + (" ..." if len(conflicts) > 20 else "")
                + ". Nothing was written. Re-run with on_existing_target_offsets=skip to leave them alone, "
                "or =overwrite to replace their commits (a target commit ahead of the checkpoint is still kept "
                "unless allow_rewind=true)."
            )
    return Plan(rows)


def _clamp(row: PlanRow) -> None:
    planned = row.downstream_offset
    row.action, row.reason = COMMIT, ""
    if row.log_start is not None and planned < row.log_start:
        row.retention_gap = row.log_start - planned
        planned, row.action, row.reason = row.log_start, CLAMP, RETENTION_GAP
    elif row.log_end is not None and planned > row.log_end:
        planned, row.action, row.reason = row.log_end, CLAMP, BEYOND_LOG_END
    row.planned_offset = planned


def _existing_and_rewind(rows: list[PlanRow], policy: str, allow_rewind: bool) -> None:
    differs = any(r.current_offset is not None and r.current_offset != r.planned_offset for r in rows)
    if differs and policy in ("fail", "skip"):
        for r in rows:
            if r.writes:
                r.action, r.planned_offset, r.retention_gap = SKIP, None, 0  # nothing moves: nothing lost
            r.reason = EXISTING_TARGET_OFFSETS
        return
    for r in rows:
        if r.writes and r.current_offset is not None and r.current_offset > r.planned_offset and not allow_rewind:
            r.action, r.reason, r.planned_offset, r.retention_gap = SKIP, TARGET_AHEAD, None, 0


# ------------------------------------------------------------------------------------------ verification


@dataclass(frozen=True)
class Mismatch:
    group: str
    topic: str
    partition: int
    planned: int
    committed: int | None


def verify(plan: Plan, committed: dict[str, dict[tuple[str, int], int]]) -> list[Mismatch]:
    """Every committing row must read back exactly as planned."""
    out = []
    for r in plan.rows:
        if r.writes:
            got = committed.get(r.group, {}).get((r.topic, r.partition))
            if got != r.planned_offset:
                out.append(Mismatch(r.group, r.topic, r.partition, r.planned_offset, got))
    return out


def diff_to_apply(plan: Plan, current: dict[str, dict[tuple[str, int], int]]) -> dict[str, dict[tuple[str, int], int]]:
    """What still has to be written: planned commits that the target does not have yet (idempotent retries)."""
    out = {}
    for group, offsets in plan.writes().items():
        todo = {tp: o for tp, o in offsets.items() if current.get(group, {}).get(tp) != o}
        if todo:
            out[group] = todo
    return out
