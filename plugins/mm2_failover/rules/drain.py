"""Is it safe to fail over? Pure evaluation of what the drain check observed.

Normal mode (source reachable), per source partition in scope:

* **producers stopped** - the source end offset did not move across the quiet window;
* **replication caught up** - MM2's own record of progress (the MirrorSourceConnector's committed source
  offset in ``mm2-offsets.<alias>.internal``) has reached the source end: ``last replicated + 1 == end``, or
  the source holds no data record after the last replicated one (only transaction markers or aborted
  records, which raw end offsets cannot tell apart: :func:`after_replicated` reads them, ``read_committed``, and
  stops at the first data record). When MM2's progress is not available (no such topic - MM2 on a Connect cluster
  keeps it in the worker's ``offset.storage.topic``: ``mm2_offsets_topic`` -, or no entry for the partition), the
  records decide (:func:`last_record_copied`): the source's last data record must have a copy in the replica's tail.
  MM2 copies in order and every restarted history starts at or before where the last one stopped, so once the last
  record has a copy, every record before it has one. End offsets prove nothing: MM2 copies at least once, and after a
  restart the replica's duplicates can make it as long as the source, or longer, while the source's last records were
  never copied. A read that fails leaves the partition not drained (``tail unknown``), never drained.
* **nothing unreplicated is gone** - offsets after MM2's last replicated one that are already below the source's
  log start (retention, DeleteRecords) were never replicated and can never be: the run is refused at once
  (:class:`UnreplicatedLoss`), naming how many; only an explicit disaster-mode run (``source_reachable=no``) moves
  such a group. A read that fails there is reported as such (state ``check failed``), not as drained and not as
  "unreachable".

Failing back, a topic that returns home (``primary.orders`` on backup -> ``orders`` on primary) is not replicated by
this flow (MM2 never copies it back: a cycle): only **producers stopped** applies to it (state ``home``).

Disaster mode (source unreachable): only target-side evidence - the replica end offsets and MM2's progress
must be stable across the quiet window; the report gives the newest replicated record's time (the data-loss
window starts there) and the age of MM2's heartbeats.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from mm2_failover.rules import evidence as ev
from mm2_failover.rules.words import listed

DRAINED = "drained"
WRITING = "producers still writing"
BEHIND = "replication behind"
NOT_REPLICATED = "not replicated: replica topic missing on the target"
MOVING = "replica still changing"
PROGRESS_UNKNOWN = "drained (MM2 progress unknown: the source's last record is on the replica)"
TAIL_UNKNOWN = "not known: MM2 progress unknown and the source's last record could not be compared"
HOME = "drained (returns home: not replicated by this flow, no producer writes it)"
GONE = "never replicated and gone from the source"
CHECK_FAILED = "check failed: the records after MM2's progress could not be read"


class UnreplicatedLoss(ValueError):
    """Records MM2 never replicated are gone from the source: no failover with the source up can bring them over."""


@dataclass(frozen=True)
class AfterReplicated:
    """What the source holds after MM2's last replicated offset."""

    data: bool | None  # a data record (True), only markers / aborted records (False), not known (None)
    gone: int = 0  # offsets after the last replicated one that are below the source's log start
    why: str = ""  # why it is not known


def unreplicated_gone(replicated: int, log_start: int) -> int:
    """Offsets after MM2's last replicated offset that are already below the source's log start."""
    return max(0, log_start - (replicated + 1))


def after_replicated(
    source: ev.RecordSource, tp: tuple[str, int], replicated: int, source_end: int, chunk: int = 1000
) -> AfterReplicated:
    """Read the source after MM2's last replicated offset, ``read_committed``, a chunk at a time, up to the first data
    record (never the whole backlog); offsets gone below the log start first (never read: a read there is out of
    range). A read that fails (or is not complete) leaves it unknown, with the reason."""
    start, _end = source.log_bounds([tp])[tp]
    gone = unreplicated_gone(replicated, start)
    if gone:
        return AfterReplicated(None, gone)
    pos = replicated + 1
    while pos < source_end:
        hi = min(source_end, pos + chunk)
        r = source.read_ranges({tp: {(pos, hi)}}, chunk).get((tp, pos, hi))
        if not ev.is_evidence(r):
            return AfterReplicated(None, why=f"{r.status if r else 'not read'}{': ' + r.why if r and r.why else ''}")
        if r.records:
            return AfterReplicated(True)
        pos = hi
    return AfterReplicated(False)


@dataclass(frozen=True)
class TailCheck:
    """Without MM2's progress: has the source's last data record been copied?"""

    copied: bool | None  # a copy in the replica's tail (True), none there (False), not known (None)
    why: str = ""


def last_record_copied(
    source: ev.RecordSource,
    replica: ev.RecordSource,
    source_tp: tuple[str, int],
    replica_tp: tuple[str, int],
    source_end: int,
    replica_end: int,
    chunk: int = 1000,
    scans: int = 10,
    window: int = 2000,
) -> TailCheck:
    """The source's last data record (read backwards from its end, ``read_committed``, a chunk at a time, at most
    ``scans`` chunks), looked up by content in the replica's last ``window`` offsets. No data record left on the
    source: nothing to copy (True). Not found in the window: not copied yet, or still being re-copied after a restart
    (False: wait). A read that fails: not known (None)."""
    start, _end = source.log_bounds([source_tp])[source_tp]
    hi, last = source_end, None
    for _ in range(scans):
        if hi <= start:
            break
        lo = max(start, hi - chunk)
        r = source.read_ranges({source_tp: {(lo, hi)}}, chunk).get((source_tp, lo, hi))
        if not ev.is_evidence(r):
            return TailCheck(
                None, f"source read {lo}..{hi}: {r.status if r else 'not read'}{': ' + r.why if r and r.why else ''}"
            )
        if r.records:
            last = r.records[-1]
            break
        hi = lo
    else:
        if hi > start:
            return TailCheck(None, f"no data record in the source's last {source_end - hi} offsets")
    if last is None:
        if start > 0:  # what retention deleted may never have been copied: without MM2's progress, not known
            return TailCheck(
                None,
                f"the source holds no data record above its log start {start}: whether MM2 copied "
                "what retention deleted is not known without its progress (set mm2_offsets_topic, "
                "or, if the source is lost, run with source_reachable=no)",
            )
        return TailCheck(True, "no data record on the source: nothing to copy")
    rstart, _rend = replica.log_bounds([replica_tp])[replica_tp]
    lo = max(rstart, replica_end - window)
    if lo >= replica_end:
        return TailCheck(False, f"the source's last record (offset {last.offset}) is not copied: the replica is empty")
    r = replica.read_ranges({replica_tp: {(lo, replica_end)}}, window).get((replica_tp, lo, replica_end))
    if not ev.is_evidence(r):
        return TailCheck(
            None,
            f"replica read {lo}..{replica_end}: {r.status if r else 'not read'}{': ' + r.why if r and r.why else ''}",
        )
    if r.copies(lo, replica_end - 1, last.content):
        return TailCheck(True)
    return TailCheck(
        False,
        f"the source's last record (offset {last.offset}) has no copy in the replica's last {replica_end - lo} offsets",
    )


def without_progress(tail: TailCheck | None) -> str:
    """The state of a partition whose MM2 progress is not known, from its :class:`TailCheck`."""
    if tail is None or tail.copied is None:
        return TAIL_UNKNOWN
    return PROGRESS_UNKNOWN if tail.copied else BEHIND


def mm2_progress(records: Iterable[tuple[bytes | None, bytes | None]], alias: str) -> dict[tuple[str, int], int]:
    """MM2's record of replication progress, from the records (key, value) of its Connect offsets topic on the target
    (dedicated mode: ``mm2-offsets.<alias>.internal``): JSON key ``[connector, {cluster, partition, topic}]``, value
    ``{"offset": N}`` = the last source offset the MirrorSourceConnector replicated. Later records win; a null value
    deletes; records of other aliases and the checkpoint/heartbeat connectors' dummy offsets are ignored."""
    out: dict[tuple[str, int], int] = {}
    for key, value in records:
        try:
            _connector, part = json.loads(key)
        except (TypeError, ValueError):
            continue
        if not isinstance(part, dict) or part.get("cluster") != alias or "topic" not in part or "partition" not in part:
            continue
        try:
            tp = (str(part["topic"]), int(part["partition"]))
        except (TypeError, ValueError):
            continue
        if value is None:
            out.pop(tp, None)
            continue
        try:
            out[tp] = int(json.loads(value)["offset"])
        except (TypeError, ValueError, KeyError):
            continue
    return out


@dataclass
class PartitionObservation:
    topic: str  # source topic
    partition: int
    replica_topic: str
    source_end_before: int | None = None  # None in disaster mode
    source_end: int | None = None
    replicated: int | None = None  # MM2's last replicated source offset (None: unknown)
    data_after_replicated: bool | None = None  # any data record in (replicated, source_end)? None: not checked
    replica_end_before: int | None = None
    replica_end: int | None = None  # None: replica missing
    newest_replicated_ms: int | None = None  # timestamp of the replica's last record
    progress_moved: bool = False  # MM2's progress for this partition changed during the quiet window
    alias: str = ""  # the source alias (MM2 flow) this partition belongs to
    home: bool = False  # failing back: the topic returns home to the target (its records came from there)
    gone_unreplicated: int = 0  # offsets after the last replicated one already below the source's log start
    after_check_failed: str = ""  # why the records after the last replicated offset could not be read
    tail: TailCheck | None = None  # without MM2's progress: the source's last record looked up on the replica


@dataclass
class DrainVerdict:
    drained: bool
    disaster: bool
    rows: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    rpo: dict | None = None  # disaster mode only
    disaster_aliases: list[str] = field(default_factory=list)
    observed_ms: int | None = None  # when the (second) observation was made

    def as_dict(self) -> dict:
        return {
            "drained": self.drained,
            "disaster": self.disaster,
            "rows": self.rows,
            "notes": self.notes,
            "groups": self.groups,
            "topics": self.topics,
            "rpo": self.rpo,
            "disaster_aliases": self.disaster_aliases,
            "observed_ms": self.observed_ms,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "DrainVerdict":
        """``drain.json`` back (every field required: a file of another version is refused, not half-read)."""
        return cls(
            bool(d["drained"]),
            bool(d["disaster"]),
            list(d["rows"]),
            list(d["notes"]),
            list(d["groups"]),
            list(d["topics"]),
            d["rpo"],
            list(d["disaster_aliases"]),
            d.get("observed_ms"),
        )

    def not_drained(self) -> list[dict]:
        return [r for r in self.rows if r["state"] not in (DRAINED, PROGRESS_UNKNOWN, HOME)]

    def progress(self, seconds_left: float, seconds_waited: float = 0.0) -> str:
        """One line on a wait that goes on (the CLI's drain wait, each poll): how many partitions are not drained,
        by state, how far MM2 is behind where that is known (source end - 1 - MM2's replicated offset), and how
        long it waited and has left - so that the line changes while nothing else does."""
        left = self.not_drained()
        states: dict[str, int] = {}
        for r in left:
            states[r["state"]] = states.get(r["state"], 0) + 1
        behind = [
            (r["source_end"] - 1 - r["replicated"], r)
            for r in left
            if r["state"] == BEHIND and r["source_end"] is not None and r["replicated"] is not None
        ]
        worst = listed(
            (f"{r['topic']}[{r['partition']}] {n}" for n, r in sorted(behind, key=lambda x: -x[0])), limit=3, sep=", "
        )
        lag = f"; MM2 {sum(n for n, _r in behind)} record(s) behind ({worst})" if behind else ""
        by_state = " (" + ", ".join(f"{n} {s}" for s, n in sorted(states.items())) + ")" if states else ""
        return (
            f"{len(left)} of {len(self.rows)} partition(s) not drained{by_state}{lag}; waited "
            f"{seconds_waited:.0f} s, {max(0.0, seconds_left):.0f} s left"
        )

    def unreplicated_loss(self) -> str | None:
        """The refusal when records never replicated are gone from the source (None: none)."""
        gone = [r for r in self.rows if r["state"] == GONE]
        if not gone:
            return None
        parts = listed(
            (
                f"{r['topic']}[{r['partition']}]: {r['gone_unreplicated']} record offset(s) after MM2's last "
                f"replicated offset {r['replicated']}"
                for r in gone
            ),
            sep="; ",
        )
        return (
            f"{sum(r['gone_unreplicated'] for r in gone)} record offset(s) were never replicated and are gone from "
            f"the source (its log start passed them: retention or DeleteRecords): {parts}"
            f"{' ...' if len(gone) > 20 else ''}. Nothing was written: no failover with the source up can bring them "
            "over. To move the groups anyway, accepting that loss, run again with source_reachable=no (disaster "
            "mode, CLI --source-reachable no); the report then carries the loss window."
        )

    def table(self) -> str:
        head = (
            f"{'alias':<10} {'topic':<32} {'part':>4} {'source end':>11} {'moved':>6} {'replicated':>11} "
            f"{'replica end':>12}  state"
        )
        lines = [head]
        for r in self.rows:

            def f(v):
                return "-" if v is None else str(v)

            lines.append(
                f"{r.get('alias', ''):<10} {r['topic']:<32} {r['partition']:>4} {f(r['source_end']):>11} "
                f"{f(r['moved']):>6} {f(r['replicated']):>11} {f(r['replica_end']):>12}  {r['state']}"
            )
        return "\n".join(lines)


def evaluate(obs: list[PartitionObservation], disaster: bool | set[str]) -> DrainVerdict:
    """``disaster``: True (every alias lost), or the set of aliases decided lost."""
    lost = disaster if isinstance(disaster, set) else None
    v = DrainVerdict(True, bool(disaster))
    for o in obs:
        in_disaster = (o.alias in lost) if lost is not None else bool(disaster)
        moved = None if o.source_end is None or o.source_end_before is None else o.source_end - o.source_end_before
        if o.replica_end is None:
            state = NOT_REPLICATED
        elif in_disaster:
            state = MOVING if o.replica_end_before != o.replica_end or o.progress_moved else DRAINED
        elif moved:
            state = WRITING
        elif o.home:
            state = HOME
        elif o.gone_unreplicated:
            state = GONE
        elif o.after_check_failed:
            state = CHECK_FAILED
        elif o.replicated is not None:
            caught_up = o.replicated + 1 >= o.source_end or o.data_after_replicated is False
            state = DRAINED if caught_up else BEHIND
        else:
            state = without_progress(o.tail)
        v.drained &= state in (DRAINED, PROGRESS_UNKNOWN, HOME)
        v.rows.append(
            {
                "alias": o.alias,
                "topic": o.topic,
                "partition": o.partition,
                "replica_topic": o.replica_topic,
                "source_end": o.source_end,
                "moved": moved,
                "replicated": o.replicated,
                "replica_end": o.replica_end,
                "newest_replicated_ms": o.newest_replicated_ms,
                "state": state,
                **({"gone_unreplicated": o.gone_unreplicated} if o.gone_unreplicated else {}),
                **(
                    {"why": o.after_check_failed or (o.tail.why if o.tail else "")}
                    if o.after_check_failed or (o.tail and o.tail.why)
                    else {}
                ),
            }
        )
    return v


def loss_window_text(rpo: dict | None) -> str:
    """The data-loss window of :func:`rpo_estimate` in words, for people (the approval request, the report, the
    drain sensor's log): what was lost, from when, with what is not known said so."""
    if not rpo:
        return "not known"
    newest, oldest = rpo.get("newest_replicated_record_ms"), rpo.get("oldest_partition_tail_ms")
    hb = rpo.get("seconds_since_mm2_heartbeat")
    beat = f"MM2's heartbeat was {hb:.1f} s old" if hb is not None else "no heartbeat of MM2's"
    if newest is None or rpo.get("seconds_since_newest_replicated_record") is None:
        return f"not known: no record MM2 copied from the lost source was found on the target, and {beat}"
    when = datetime.fromtimestamp(newest / 1000, timezone.utc).isoformat(timespec="seconds")
    furthest = ""
    if oldest is not None and oldest != newest:
        behind = rpo["seconds_since_newest_replicated_record"] + round((newest - oldest) / 1000, 1)
        furthest = f"; {behind:.1f} s on the partition furthest behind"
    return (
        f"records produced on the lost source after {when} (the newest record MM2 copied, "
        f"{rpo['seconds_since_newest_replicated_record']:.1f} s before the check{furthest}) never reached the "
        f"target; {beat}"
    )


def rpo_estimate(obs: list[PartitionObservation], now_ms: int, heartbeat_ms: int | None) -> dict:
    """What a disaster-mode run can say about data loss: records produced on the source after the newest
    replicated record are lost (their number is unknown without the source)."""
    newest = max((o.newest_replicated_ms for o in obs if o.newest_replicated_ms), default=None)
    oldest_tail = min((o.newest_replicated_ms for o in obs if o.newest_replicated_ms), default=None)
    return {
        "newest_replicated_record_ms": newest,
        "oldest_partition_tail_ms": oldest_tail,
        "seconds_since_newest_replicated_record": None if newest is None else round((now_ms - newest) / 1000, 1),
        "mm2_heartbeat_ms": heartbeat_ms,
        "seconds_since_mm2_heartbeat": None if heartbeat_ms is None else round((now_ms - heartbeat_ms) / 1000, 1),
        "meaning": "records produced on the source after the newest replicated record (per partition: after "
        "its tail time) never reached the target; the loss window is at most 'seconds since newest "
        "replicated record' if the source failed just now",
    }
