"""The plan against the target's commits *now* (pure): what the run page's "live diff" shows - for every partition the
plan writes, where the group's commit on the target is at this moment, next to the planned offset and the commit the
plan saw before the run. Read by an approver before approving (has anything moved since the plan?), and by on-call
after the run (is every group still where we put it, or has a consumer, another tool or a rollback moved it?).
:mod:`mm2_failover.ui.app` reads the plan and the commits (the ``kafka_target`` connection) and renders the rows.

The rules:

1. **State of a partition** (:func:`state_of`), the plan's writes only (a skipped partition is not the plan's):
   ``as planned`` - the commit now is the planned offset; ``not written yet`` - it is still the commit the plan saw
   before the run (none then and none now included); ``moved since`` - any other offset (someone committed after the
   plan or after the run); ``commit gone`` - the plan saw a commit or wrote one, and there is none now (the group was
   deleted or its offsets expired).
2. **Bounded** (:func:`select_groups`): one page reads the commits of at most :data:`MAX_GROUPS` groups - the
   plan's groups in order, those whose name contains the filter when one is given - and says how many it left out;
   a read of 10k groups belongs to verify, not to a page.
3. **Summary** (:func:`summarize`): the partitions in each state, and the groups with any partition not
   ``as planned``, worst first (``moved since``, then ``commit gone``, then ``not written yet``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

AS_PLANNED = "as planned"
NOT_WRITTEN = "not written yet"
MOVED = "moved since"
GONE = "commit gone"
STATES = (MOVED, GONE, NOT_WRITTEN, AS_PLANNED)  # worst first
MAX_GROUPS = 200


def state_of(before: int | None, planned: int, now: int | None) -> str:
    """Rule 1."""
    if now == planned:
        return AS_PLANNED
    if now == before:
        return NOT_WRITTEN
    if now is None:
        return GONE
    return MOVED


def select_groups(groups: list[str], contains: str = "", limit: int = MAX_GROUPS) -> tuple[list[str], int]:
    """Rule 2: the groups to read, and how many matching ones were left out."""
    matching = [g for g in dict.fromkeys(groups) if contains in g]
    return matching[:limit], max(0, len(matching) - limit)


@dataclass
class Diff:
    rows: list[dict] = field(default_factory=list)  # group, topic, partition, before, planned, now, state
    counts: dict[str, int] = field(default_factory=dict)
    groups_off_plan: list[str] = field(default_factory=list)
    groups_read: int = 0
    groups_left_out: int = 0


def diff(writes: list[dict], now: dict[str, dict[tuple[str, int], int]], groups: list[str], left_out: int = 0) -> Diff:
    """Rules 1 and 3. ``writes``: the plan's writing rows (group, topic, partition, current_offset = the commit
    before, planned_offset); ``now``: group -> {(topic, partition): offset} read from the target for ``groups``."""
    read = set(groups)
    rows = []
    for w in writes:
        g = w["group"]
        if g not in read:
            continue
        tp = (w["topic"], int(w["partition"]))
        cur = (now.get(g) or {}).get(tp)
        rows.append(
            {
                "group": g,
                "topic": tp[0],
                "partition": tp[1],
                "before": w.get("current_offset"),
                "planned": w["planned_offset"],
                "now": cur,
                "state": state_of(w.get("current_offset"), w["planned_offset"], cur),
            }
        )
    return summarize(rows, len(read), left_out)


def summarize(rows: list[dict], groups_read: int, left_out: int) -> Diff:
    """Rule 3."""
    rank = {s: i for i, s in enumerate(STATES)}
    counts = {s: 0 for s in STATES}
    worst: dict[str, int] = {}
    for r in rows:
        counts[r["state"]] += 1
        if r["state"] != AS_PLANNED:
            worst[r["group"]] = min(worst.get(r["group"], len(STATES)), rank[r["state"]])
    rows = sorted(rows, key=lambda r: (rank[r["state"]], r["group"], r["topic"], r["partition"]))
    off = sorted(worst, key=lambda g: (worst[g], g))
    return Diff(rows, counts, off, groups_read, left_out)
