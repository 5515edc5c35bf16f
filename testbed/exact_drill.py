"""The exact-failover drill (issue 16): five production patterns, MirrorMaker 2 killed (SIGKILL) and restarted in the
middle of production, real groups consuming part of every partition, one failover planned with MM2's checkpoints
(``translation=checkpoint``) and one with ``translation=exact``, and every (group, partition) scored against the truth
taken from unique payloads.

The truth. Every record carries a unique payload (``topic|partition|index``). The producers record each payload's
source offset (delivery reports) and whether its transaction was aborted; each group's consumer (``read_committed``,
as real applications read transactional data) records the payloads it consumed and commits the offset after the
last one. Scoring a planned replica offset ``d`` for a group whose source position is ``U`` uses every copy MM2 wrote
to the replica partition (:func:`score`):

- **lost**: records at source offsets >= U that the source still holds at failover (committed, not compacted away:
  what the group would read next on the source) with no copy at or after ``d`` - a record MM2 never copied has none
  (the drill waits until MM2 copied everything: only ``tail_never_copied`` has such records, which the failover's
  drain gate exists to keep from being lost);
- **re-read**: copies at or after ``d`` of records before ``U`` (consumed already, or superseded by compaction);
- **phantom**: copies at or after ``d`` of aborted records (MM2's source consumer reading ``read_uncommitted`` copies
  them as plain records, which every consumer of the replica then receives);
- **answered**: the plan commits an offset at all (where MM2 wrote no checkpoint, only translation answers).

The patterns: ``burst`` (three bursts), ``slow`` (one record per partition every 30 ms), ``mixed`` (random bursts and
pauses), ``transactions`` (transactions of 10 records, every 4th aborted after its records reached the log),
``compacted`` (a compacted topic, few keys, the source's log cleaner running every second), ``twins`` (a
non-idempotent producer's retries: every 7th record written again, key, value, timestamp and all, one record later),
``retention`` (mixed production; once MM2 copied it, DeleteRecords moves the source's log start past every group's
position but the furthest one's: those groups' unread records are gone from the source, still on the replica) and,
when the drill runs an exactly-once flow (``eos_alias``), ``exactly_once`` (transactions as above, replicated by a
second MM2 flow with ``exactly.once.source.support=enabled``: commit markers - and, when it is killed, aborted
copies - on the replica too; its offset syncs on the target).

With ``extras`` (issue 50), after MM2's last checkpoint MM2 stops, and two more patterns are scored: ``rewound`` (a
group of the burst topic reset backwards on the source) and ``tail_never_copied`` (a topic of its own, produced like
``mixed``: then ``TAIL_NEW`` more records per partition on the source, never copied, and the replica's last
``TAIL_RECOPIED`` records appended to it again - a restarted MM2's re-copies -, so that the replica's end passes the
source's while the source's last records have no copy). The failover's drain check decides for the latter
(:func:`tail_never_copied`): where it refuses, the failover stops before any write - its points are not answered,
``drain refused`` among the rules -; where it passes, they are planned and scored like every other pattern.

With content twins a payload is no longer unique: **lost** counts, per payload, the source records the group still
had to read beyond the copies left at or after the planned offset (a consumer sees contents: two copies of a twin
deliver both records); **re-read** counts a twin's copies ahead only when the group had read one of its writes (MM2's
duplicates of records not read yet are no re-reads, for a twin as for any record).

Used by ``bench/exact_drill.py`` (docs/architecture.md's table) and ``tests/integration/test_exact_drill.py`` (its targets).
The checkpoints are decoded in Python here (the Spark job that computes them is tested on its own); the snapshot,
the archive of offset syncs, the translation and the plan are the pipeline's own steps.
"""

from __future__ import annotations

import json
import logging
import random
import re
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

from testbed import scenario

log = logging.getLogger(__name__)

PATTERNS = ("burst", "slow", "mixed", "transactions", "compacted", "twins", "retention", "exactly_once")
# a group of the burst topic rewound on the source after MM2's last checkpoint (issue 50 item 1): scored as its own
# pattern (its points: the rewound group's); the other extra translation is the source lost (issue 50 item 7)
REWOUND = "rewound"
LOST = "exact, source lost"  # the archive holds the groups' source commits as its last scheduled run read them
LOST_UNREAD = "exact, source lost, commits not archived"  # as before the archive kept them: MM2's checkpoints alone
# a topic of its own (issue 50 item 2): once MM2 stopped, more records on the source (never copied) and copies of
# records MM2 had copied appended to the replica (a restarted MM2's re-copies): the replica's end at or past the
# source's while the source's last records have no copy. The failover's drain check decides; scored as its own pattern
TAIL = "tail_never_copied"
TAIL_NEW, TAIL_RECOPIED = 10, 15  # per partition: records produced once MM2 stopped, re-copies appended to the replica
NO_PROGRESS = "progress unknown"  # the drain check with mm2_offsets_topic naming a topic that does not exist
NON_TRANSACTIONAL = ("burst", "slow", "mixed")
MAIN_FLOW = PATTERNS[:-1]  # exactly_once: replicated by the drill's exactly-once flow (eos_alias) only
EOS_MM2 = {"backup.exactly.once.source.support": "enabled"}  # + <alias>.consumer.isolation.level=read_committed
COMPACTED_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "500",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "0",
}
# the source broker's cleaner looks for work every second (default 15 s), so that compaction happens during the drill
SOURCE_BROKER = {"log.cleaner.backoff.ms": "1000"}
ADVISED_MM2 = {"primary.consumer.isolation.level": "read_committed"}  # what the pre-flight audit advises


# ----------------------------------------------------------------------------------------------- scoring (pure)
@dataclass(frozen=True)
class Truth:
    """What was produced to one source partition: payload -> source offset, the aborted payloads, and the payloads
    the source still holds at failover (None: all that were not aborted). A record the source's cleaner removed
    before failover is one the group would never have read there either (Kafka's compaction contract): skipping
    its copy is not a loss, reading it again is counted as a re-read."""

    offsets: dict[bytes, int]
    aborted: frozenset[bytes] = frozenset()
    present: frozenset[bytes] | None = None
    twins: dict[bytes, tuple[int, ...]] = field(default_factory=dict)  # payloads written more than once: every offset


class Score(NamedTuple):
    lost: int
    re_read: int
    phantom: int


def score(planned: int, position: int, copies: list[tuple[int, bytes]], truth: Truth, uncopied: bool = False) -> Score:
    """Score resuming at replica offset ``planned`` for a group whose next source offset is ``position``, given every
    copy on the replica partition as ``(replica offset, payload)`` (see the module docstring). ``uncopied``: the
    records the source holds that MM2 never copied count as lost too (the failover's loss, which the drain gate
    exists to prevent, not only the plan's; the drill passes it: it waits for MM2 to copy everything, so that only
    ``tail_never_copied`` has such records)."""
    after = Counter(v for o, v in copies if o >= planned)
    re_read = phantom = 0
    for v, n in after.items():
        if v in truth.aborted:
            phantom += n
        elif v in truth.twins:  # none of its writes read yet: MM2's duplicates ahead, never re-reads (as a
            # non-twin's); some read: the copies ahead beyond the writes not read (an upper bound where MM2 also
            # copied it twice: which copy is which write the payload cannot tell)
            ahead = sum(1 for o in truth.twins[v] if o >= position)
            re_read += 0 if ahead == len(truth.twins[v]) else max(0, n - ahead)
        elif truth.offsets.get(v, position) < position:
            re_read += n
    copied = {v for _o, v in copies}
    lost = 0
    for v in (copied | truth.offsets.keys()) if uncopied else copied:
        if v in truth.aborted or (truth.present is not None and v not in truth.present):
            continue
        need = sum(1 for o in truth.twins.get(v, (truth.offsets.get(v, -1),)) if o >= position)
        lost += max(0, need - after[v])
    return Score(lost=lost, re_read=re_read, phantom=phantom)


def newest_sync_at_or_below(syncs: tuple, position: int, replica_end: int) -> int | None:
    """Issue 50 item 7's bar for a lost source: the copy of the newest archived sync at or below ``position`` (the
    highest downstream offset among them, below the replica's end), plus one unless it is at the position; None
    without such a sync. ``syncs``: (upstream, downstream) arrays."""
    up, down = syncs
    below = [(int(d), int(u)) for u, d in zip(up, down) if u <= position and d < replica_end]
    if not below:
        return None
    d, u = max(below)
    return d + (u != position)


def near(figure: int, truth: int) -> bool:
    """A figure shown is near the truth: within 10 % of it, one record either way for small counts (the bar of
    issue 50 item 7 for every re-read figure - the truth harness, the drill's table, the soak's end)."""
    return abs(figure - truth) <= max(1, truth // 10)


@dataclass
class PointResult:
    pattern: str
    translation: str
    group: str
    partition: int
    position: int  # the group's committed offset on the source
    had_checkpoint: bool  # MM2 wrote a checkpoint for this (group, partition)
    answered: bool  # the plan commits an offset
    rule: str = ""  # the planned offset's rule; where not answered, the row's action and reason (or "no row")
    planned: int | None = None
    lost: int = 0
    re_read: int = 0
    phantom: int = 0
    said: int | None = None  # the report's re-read figure for the point (None: said unknown)
    said_exact: bool = False  # the report calls it a count, not an estimate
    refused: bool = False  # the drain gate refused the failover: it stops before any write (not answered)
    # the source lost (issue 50 item 7's bar): resuming at the newest archived sync at or below the position (MM2's
    # rule over every archived sync: its copy, plus one unless the sync is at the position), scored the same way
    bar_re_read: int | None = None
    bar_lost: int | None = None


def summarize(points: list[PointResult]) -> list[dict]:
    """One row per (pattern, translation): points, answered, points MM2 left without a checkpoint (and how many of
    them were answered), and lost / re-read / phantom records summed over the answered points. Points the drain
    gate refused are counted among the rules as ``drain refused`` (not answered: nothing written)."""
    rows: dict[tuple[str, str], dict] = {}
    for p in points:
        r = rows.setdefault(
            (p.pattern, p.translation),
            {
                "pattern": p.pattern,
                "translation": p.translation,
                "points": 0,
                "answered": 0,
                "no_checkpoint": 0,
                "no_checkpoint_answered": 0,
                "lost": 0,
                "re_read": 0,
                "phantom": 0,
                "said": 0,
                "said_unknown": 0,
                "said_off": 0,
                "rules": {},
                "bar_points": 0,
                "bar_re_read": 0,
                "re_read_at_bar": 0,
                "bar_lossy": 0,
            },
        )
        r["points"] += 1
        r["answered"] += p.answered
        r["no_checkpoint"] += not p.had_checkpoint
        r["no_checkpoint_answered"] += (not p.had_checkpoint) and p.answered
        r["lost"] += p.lost
        r["re_read"] += p.re_read
        r["phantom"] += p.phantom
        if p.refused:
            r["rules"]["drain refused"] = r["rules"].get("drain refused", 0) + 1
        if p.answered:
            r["rules"][p.rule] = r["rules"].get(p.rule, 0) + 1
            if p.said is None:
                r["said_unknown"] += 1
            else:
                r["said"] += p.said
                r["said_off"] += not near(p.said, p.re_read)
            if p.bar_lost == 0:  # the bar where it loses nothing (issue 50 item 7: "checked record by record")
                r["bar_points"] += 1
                r["bar_re_read"] += p.bar_re_read
                r["re_read_at_bar"] += p.re_read
            r["bar_lossy"] += bool(p.bar_lost)
    order = {k: i for i, k in enumerate((*PATTERNS, REWOUND, TAIL))}
    return sorted(rows.values(), key=lambda r: (order.get(r["pattern"], 99), r["translation"]))


def gate_summary(verdict: dict, topic: str) -> dict:
    """A drain verdict (``DrainVerdict.as_dict()``) as the drill records it for one source topic: whether the gate
    passed, each partition's state, and what the rule before issue 50 item 2 - replica end >= source end - would have
    said of each (None: no source end, as in disaster mode)."""
    rows = [r for r in verdict["rows"] if r["topic"] == topic]
    return {
        "drained": bool(verdict["drained"]),
        "states": {int(r["partition"]): r["state"] for r in rows},
        "old_rule_drained": {
            int(r["partition"]): None
            if r["source_end"] is None or r["replica_end"] is None
            else r["replica_end"] >= r["source_end"]
            for r in rows
        },
    }


def refused_by_gate(verdicts: list[dict]) -> bool:
    """The failover is refused when every drain check it could run under refuses (any one that passes lets the plan
    through: it is scored, and a gate that passed a tail never copied shows as lost)."""
    return not any(v["drained"] for v in verdicts)


def said_text(r: dict) -> str:
    """What the report said of a row's re-read: its figures summed, the points it said unknown, and how many of
    its figures were more than 10 % off the truth."""
    out = str(r.get("said", 0))
    if r.get("said_unknown"):
        out += f" + unknown on {r['said_unknown']}"
    if r.get("said_off"):
        out += f" ({r['said_off']} off)"
    return out


def bar_text(r: dict) -> str:
    """Issue 50 item 7's bar beside the plan's re-read on the same points: what resuming at the newest archived sync
    at or below each position re-reads where it loses nothing (and the plan's re-read there), and on how many
    points it would lose records. Empty where the bar was not scored (the source reachable)."""
    if not r.get("bar_points") and not r.get("bar_lossy"):
        return ""
    return f"{r['bar_re_read']} ({r['re_read_at_bar']})" + (f", loses on {r['bar_lossy']}" if r["bar_lossy"] else "")


def render(summary: list[dict]) -> str:
    """The summary as a Markdown table (docs/architecture.md's)."""
    head = (
        "| pattern | translation | points | answered | no checkpoint (answered) | lost | re-read | report said "
        "| phantom | the newest sync: re-read (ours) | rules |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    )
    lines = [head]
    for r in summary:
        rules = ", ".join(f"{k} {v}" for k, v in sorted(r["rules"].items()))
        lines.append(
            f"| {r['pattern']} | {r['translation']} | {r['points']} | {r['answered']} | "
            f"{r['no_checkpoint']} ({r['no_checkpoint_answered']}) | {r['lost']} | {r['re_read']} | "
            f"{said_text(r)} | {r['phantom']} | {bar_text(r)} | {rules} |"
        )
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ producing the truth
@dataclass
class TopicRun:
    pattern: str
    topic: str
    partitions: int
    offsets: dict[int, dict[bytes, int]] = field(default_factory=lambda: defaultdict(dict))
    aborted: set[bytes] = field(default_factory=set)
    next_index: int = 0
    producer: object = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    present: dict[int, frozenset[bytes]] = field(default_factory=dict)
    twins: dict[int, dict[bytes, list[int]]] = field(default_factory=lambda: defaultdict(dict))

    def truth(self, partition: int) -> Truth:
        return Truth(
            dict(self.offsets[partition]),
            frozenset(self.aborted),
            self.present.get(partition),
            {v: tuple(o) for v, o in self.twins[partition].items()},
        )

    def delivered(self, err, msg) -> None:
        if err is None:
            with self.lock:
                p, v = msg.partition(), msg.value()
                if v in self.offsets[p]:  # a twin: the same record written again
                    self.twins[p].setdefault(v, [self.offsets[p][v]]).append(msg.offset())
                    return
                self.offsets[p][v] = msg.offset()


def _producer(bootstrap: str, run: TopicRun):
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "log_level": 3}
    if run.pattern in TRANSACTIONAL:
        conf["transactional.id"] = f"drill-{run.topic}"
    p = Producer(conf)
    if run.pattern in TRANSACTIONAL:
        p.init_transactions(30)
    return p


TRANSACTIONAL = ("transactions", "exactly_once")
TWIN_EVERY = 7  # the twins pattern writes record i - 1 again right after record i when i % TWIN_EVERY == 4


def produce(bootstrap: str, run: TopicRun, count: int, rng: random.Random) -> None:
    """``count`` more records per partition of ``run.topic``, in the run's pattern."""
    if run.producer is None:
        run.producer = _producer(bootstrap, run)
    p = run.producer
    start, end = run.next_index, run.next_index + count
    run.next_index = end

    stamp = int(time.time() * 1000)

    def send(indexes) -> list[bytes]:
        sent = []
        for i in indexes:
            for part in range(run.partitions):
                v = scenario.payload(run.topic, part, i)
                key = f"k{part}-{i % 12}".encode() if run.pattern == "compacted" else None
                p.produce(run.topic, value=v, key=key, partition=part, on_delivery=run.delivered, timestamp=stamp + i)
                sent.append(v)
                if run.pattern == "twins" and i % TWIN_EVERY == 4 and i > start:
                    # a retry of record i - 1 that reached the log after all: the same key, value and timestamp
                    p.produce(
                        run.topic,
                        value=scenario.payload(run.topic, part, i - 1),
                        partition=part,
                        on_delivery=run.delivered,
                        timestamp=stamp + i - 1,
                    )
            p.poll(0)
        return sent

    i = start
    if run.pattern == "burst":
        step = max(1, count // 3)
        while i < end:
            send(range(i, min(end, i + step)))
            p.flush(30)
            i += step
            time.sleep(0.8)
    elif run.pattern == "slow":
        for i in range(start, end):
            send([i])
            p.flush(30)
            time.sleep(0.03)
    elif run.pattern in ("mixed", "compacted", "twins", "retention", TAIL):
        while i < end:
            n = rng.randint(1, 40)
            send(range(i, min(end, i + n)))
            p.flush(30)
            i += n
            time.sleep(rng.choice((0, 0.02, 0.2, 0.5)))
    elif run.pattern in TRANSACTIONAL:
        tx = 0
        while i < end:
            p.begin_transaction()
            sent = send(range(i, min(end, i + 10)))
            p.flush(30)  # the records reach the log before an abort (else librdkafka purges them unsent)
            if tx % 4 == 3:
                p.abort_transaction(30)
                run.aborted.update(sent)
            else:
                p.commit_transaction(30)
            i += 10
            tx += 1
    else:
        raise ValueError(f"unknown pattern {run.pattern!r}")
    if p.flush(30):
        raise RuntimeError(f"could not deliver every record to {run.topic}")


# ------------------------------------------------------------------------------------------- consuming the truth
def consume(
    bootstrap: str, group: str, topic: str, want: dict[int, int | None], timeout: float = 60.0
) -> dict[int, int]:
    """Consume ``want[p]`` more records (None: to the end) of each partition in ``group``, ``read_committed``, from
    its committed offset, and commit the offset after the last record consumed. Returns the committed offsets."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    from mm2_failover.adapters.kafka.cluster import CONSUME_WAIT_S

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "log_level": 3,
        }
    )
    try:
        committed = {tp.partition: tp.offset for tp in _committed(c, [TopicPartition(topic, p) for p in want])}
        c.assign(
            [TopicPartition(topic, p, committed[p] if committed.get(p, -1) >= 0 else OFFSET_BEGINNING) for p in want]
        )
        got = {p: 0 for p in want}
        last: dict[int, int] = {}
        todo = {p for p, n in want.items() if n is None or n > 0}
        deadline = time.monotonic() + timeout
        while todo:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{group} consumed {got} of {topic}, wanted {want}")
            for m in c.consume(500, CONSUME_WAIT_S):  # (cluster.py: consume returns at n messages or the wait)
                p = m.partition()
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        todo.discard(p)
                    continue
                if p not in todo:
                    continue
                got[p] += 1
                last[p] = m.offset()
                if want[p] is not None and got[p] >= want[p]:
                    todo.discard(p)
                    c.pause([TopicPartition(topic, p)])
        if last:
            c.commit(offsets=[TopicPartition(topic, p, o + 1) for p, o in last.items()], asynchronous=False)
        return {p: (last[p] + 1 if p in last else committed.get(p, -1)) for p in want}
    finally:
        c.close()


def rewind(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Reset ``group``'s commits on ``topic`` backwards (an incident's replay: kafka-consumer-groups
    --reset-offsets), the group empty."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "log_level": 3})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def _committed(c, tps, tries: int = 20):
    """The group's committed offsets, retried while a fresh cluster's group coordinator is still loading
    (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS are transient)."""
    from confluent_kafka import KafkaError, KafkaException

    transient = {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError._TIMED_OUT,
    }
    for i in range(tries):
        try:
            return c.committed(tps, 15)
        except KafkaException as e:
            if i == tries - 1 or e.args[0].code() not in transient:
                raise
            time.sleep(0.5)


# ------------------------------------------------------------------------------------------------------ the drill
@dataclass
class DrillResult:
    tag: str
    mm2: str  # "default" or "advised"
    points: list[PointResult]
    seconds: float
    facts: dict  # MM2 restarts, duplicates copied, compaction gaps, checkpoints missing

    def summary(self) -> list[dict]:
        return summarize(self.points)

    def as_dict(self) -> dict:
        return {
            "tag": self.tag,
            "mm2": self.mm2,
            "seconds": round(self.seconds, 1),
            "facts": self.facts,
            "summary": self.summary(),
            "points": [asdict(p) for p in self.points],
        }


def _settled(read, what: str, quiet_s: float, timeout: float, ready=lambda v: True):
    """Wait until ``read()`` returns the same (ready) value for ``quiet_s`` seconds."""
    deadline = time.monotonic() + timeout
    last, since = read(), time.monotonic()
    while True:
        time.sleep(0.5)
        now = read()
        if now != last or not ready(now):
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return now
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not settle within {timeout:.0f}s")


def plan_of(bed, folder: Path, groups: list[str], checkpoints_topic: str | None = None, **params):
    """Snapshot + latest checkpoints (Python decoder) + the pipeline's plan, for ``groups``."""
    from mm2_failover.stages.build_plan import make_plan
    from mm2_failover.stages.snapshot import capture_snapshot

    target = bed.client("target")
    rx = "|".join(re.escape(g) for g in groups)
    ctx = bed.run_context(folder, groups_regex=rx, accept_groups_without_checkpoints=True, **params)
    capture_snapshot(ctx)
    times: dict = {}  # each checkpoint's record timestamp, as the Spark job keeps it (plan rule 1a)
    cps = [
        c
        for k, c in scenario.read_checkpoints(target, checkpoints_topic or bed.checkpoints_topic, times).items()
        if k.group in groups
    ]
    scenario.write_latest(ctx.folder, cps, params.get("source_alias", "primary"), times)
    return make_plan(ctx), cps


def run_drill(
    bed,
    root: Path,
    per_partition: int = 120,
    partitions: int = 3,
    seed: int = 16,
    mm2: str = "advised",
    kill_mm2: bool = True,
    eos_alias: str | None = None,
    extras: bool = False,
) -> DrillResult:
    """The drill on a started bed (see the module docstring). ``mm2`` only labels the result: the bed's MM2
    configuration decides (``ADVISED_MM2`` or MM2's defaults). The archive of offset syncs is wherever
    ``$MM2_FAILOVER_ARCHIVE`` points (the caller gives each drill its own). ``eos_alias``: also run the
    ``exactly_once`` pattern through a second MM2 flow under that alias, with exactly-once support (``EOS_MM2``),
    killed and restarted with the main one. ``extras`` (issue 50): a group of the burst topic rewound on the source
    after MM2's last checkpoint (MM2 stopped, then the reset) scored as pattern ``rewound``, and two more plans per
    flow with the source lost (disaster mode, from the archive and the replica): before the archive read the groups'
    source commits (``exact, source lost, commits not archived``) and after (``exact, source lost``: plan rule 1a),
    each point beside issue 50 item 7's bar (:func:`newest_sync_at_or_below`)."""
    t0 = time.monotonic()
    rng = random.Random(seed)
    tag = uuid.uuid4().hex[:6]
    source = bed.client("source")
    target = bed.client("target")
    patterns = (PATTERNS if eos_alias else MAIN_FLOW) + ((TAIL,) if extras else ())
    runs = {pat: TopicRun(pat, f"drill-{pat}-{tag}", partitions) for pat in patterns}
    for r in runs.values():
        source.create_topic(r.topic, partitions, COMPACTED_CONFIG if r.pattern == "compacted" else None)
    flow = {pat: (eos_alias if pat == "exactly_once" else bed.source_alias) for pat in patterns}
    eos_mm2 = {**EOS_MM2, f"{eos_alias}.consumer.isolation.level": "read_committed"}
    if eos_alias:
        bed.start_extra_mm2(eos_alias, runs["exactly_once"].topic, eos_mm2)
    groups = {pat: [f"drill-{pat}-{tag}-g{i}" for i in range(2)] for pat in patterns}
    topic_of = {pat: pat for pat in patterns}  # a scored pattern -> the pattern whose topic it reads
    if extras:
        groups[REWOUND], topic_of[REWOUND] = [f"drill-burst-{tag}-rewound"], "burst"
    ghosts = {pat: f"console-consumer-drill-{pat}-{tag}" for pat in ("burst", "transactions")}  # MM2 excludes them
    first, second = per_partition // 2, per_partition - per_partition // 2

    def produce_all(count: int) -> None:
        errors: list[BaseException] = []

        def one(r: TopicRun, seed_: int) -> None:
            try:
                produce(bed.source_bootstrap, r, count, random.Random(seed_))
            except BaseException as e:  # noqa: BLE001 - re-raised below
                errors.append(e)

        threads = [threading.Thread(target=one, args=(r, rng.random())) for r in runs.values()]
        for t in threads:
            t.start()
        if kill_mm2 and count == second:  # MM2 dies while every pattern is producing, and comes back
            time.sleep(1.0)
            bed.kill_mm2()
            if eos_alias:  # its exactly-once flow too: its open transaction is aborted on the replica
                bed.extra_mm2[-1].popen.kill()
            time.sleep(2.0)
            bed.start_mm2()
            if eos_alias:
                bed.start_extra_mm2(eos_alias, runs["exactly_once"].topic, eos_mm2)
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    produce_all(first)
    for pat, gs in groups.items():  # the groups consume part of the first half, and commit (MM2 checkpoints that)
        for g in gs:
            consume(
                bed.source_bootstrap,
                g,
                runs[topic_of[pat]].topic,
                {p: rng.randint(1, first // 2) for p in range(partitions)},
            )
    pid_before = bed.mm2.popen.pid
    produce_all(second)
    positions: dict[tuple[str, str], dict[int, int]] = {}
    for pat, gs in groups.items():
        for i, g in enumerate(gs):
            want = {p: rng.randint(1, first) for p in range(partitions)}
            if i == 1:
                want[rng.randrange(partitions)] = None  # one partition consumed to the end
            positions[(pat, g)] = consume(bed.source_bootstrap, g, runs[topic_of[pat]].topic, want)
    for pat, g in ghosts.items():
        positions[(pat, g)] = consume(
            bed.source_bootstrap, g, runs[pat].topic, {p: rng.randint(1, per_partition - 1) for p in range(partitions)}
        )

    # MM2 has copied everything (the replica ends stop moving) and written its checkpoints (the topic stops growing)
    replicas = {pat: f"{flow[pat]}.{r.topic}" for pat, r in runs.items()}
    rtps = [(rt, p) for rt in replicas.values() for p in range(partitions)]
    plain = [pat for pat in patterns if pat not in TRANSACTIONAL and pat != "compacted"]

    def caught_up(ends) -> bool:
        src = source.offsets([(runs[pat].topic, p) for pat in plain for p in range(partitions)])
        if not all(
            ends.get((replicas[pat], p), 0) >= src[(runs[pat].topic, p)] for pat in plain for p in range(partitions)
        ):
            return False
        # a transactional replica's end counts commit markers too: what says it caught up is every committed record
        # there. A restarted exactly-once flow copies nothing until its worker's group has let the killed one go
        # (~60 s on a busy machine: the replica was still empty when this waited for the plain topics alone)
        txn = [(pat, p) for pat in patterns if pat in TRANSACTIONAL for p in range(partitions)]
        got = target.records({(replicas[pat], p): (0, ends.get((replicas[pat], p), 0)) for pat, p in txn}, timeout=60)
        return all(
            {v for v in runs[pat].offsets[p] if v not in runs[pat].aborted}
            <= {r.value for r in got[(replicas[pat], p)]}
            for pat, p in txn
        )

    _settled(lambda: target.offsets(rtps), "the replicas", 4.0, 240.0, caught_up)
    cp_topics = {f: f"{f}.checkpoints.internal" for f in set(flow.values())}
    cp_parts = target.partitions(sorted(cp_topics.values()))
    _settled(lambda: target.offsets(cp_parts), "MM2's checkpoints", 5.0, 120.0)
    tail = None
    if extras:
        # MM2's last checkpoint of the rewound group is written: MM2 stops (it checkpoints every second here; in
        # production every emit.checkpoints.interval.seconds) and the group is reset backwards on the source - an
        # incident's replay - before the failover plans
        bed.stop_mm2()
        if eos_alias:
            bed.extra_mm2[-1].stop()
        [g] = groups[REWOUND]
        back = {p: max(0, o // 3) for p, o in positions[(REWOUND, g)].items()}
        rewind(bed.source_bootstrap, g, runs["burst"].topic, back)
        positions[(REWOUND, g)] = back
        tail = tail_never_copied(bed, root / tag / "drain", runs[TAIL], replicas[TAIL], groups[TAIL], rng)

    for r in runs.values():  # what the source holds now (read_committed: no aborted record; compaction done)
        got = source.records(
            {(r.topic, p): (0, e) for (_t, p), e in source.offsets([(r.topic, p) for p in range(partitions)]).items()},
            timeout=120,
        )
        r.present = {p: frozenset(x.value for x in recs) for (_t, p), recs in got.items()}
    retention = runs["retention"]
    gone_by_retention = 0
    for p in range(partitions):  # every group but the furthest one now behind the source's log start
        ahead = sorted(pos[p] for (pat, _g), pos in positions.items() if pat == "retention")
        start = ahead[-1] - 1 if len(ahead) > 1 else ahead[0]
        if start > ahead[0]:
            source.delete_records({(retention.topic, p): start})
            gone_by_retention += start - ahead[0]
    retention.present = {}  # gone from the source, still to be read by the groups behind: all of them count
    points: list[PointResult] = []
    copies = {
        tp: [(r.offset, r.value) for r in recs]
        for tp, recs in target.records({tp: (0, e) for tp, e in target.offsets(rtps).items()}, timeout=120).items()
    }
    plans = {}
    for f, cp_topic in sorted(cp_topics.items()):
        mine = sorted(g for (pat, g) in positions if flow[topic_of[pat]] == f)
        extra = {} if f == bed.source_alias else {"source_alias": f, "offset_syncs_location": "target"}
        for translation in ("checkpoint", "exact"):
            plans[(f, translation)] = plan_of(
                bed, root / tag / f / translation, mine, cp_topic, translation=translation, **extra
            )
        if extras:  # the source lost (disaster mode): the archive and the replica only - first before the archive
            # read the groups' source commits, then after its scheduled run read them (plan rule 1a)
            from mm2_failover.stages.archive import archive_positions, positions_path

            positions_path(f).unlink(missing_ok=True)
            plans[(f, LOST_UNREAD)] = plan_of(
                bed, root / tag / f / "lost-unread", mine, cp_topic, translation="exact", source_reachable="no", **extra
            )
            archive_positions(bed.run_context(root / tag / f / "archive", **extra), f)
            plans[(f, LOST)] = plan_of(
                bed, root / tag / f / "lost", mine, cp_topic, translation="exact", source_reachable="no", **extra
            )
    from mm2_failover.adapters.runfolder import RunFolder
    from mm2_failover.rules.report import estimate_reread

    # the drain gate of each plan's failover (tail_never_copied only): refused, nothing is written
    refused = {
        t: tail is not None and refused_by_gate([tail["gates"][k] for k in keys])
        for t, keys in (
            ("checkpoint", ("progress readable", NO_PROGRESS)),
            ("exact", ("progress readable", NO_PROGRESS)),
            (LOST, ("source lost",)),
            (LOST_UNREAD, ("source lost",)),
        )
    }
    lost_if_passed: Counter = Counter()

    commits = {(g, replicas[topic_of[pat]], p): u for (pat, g), pos in positions.items() for p, u in pos.items()}
    unanswered: list[dict] = []  # exact points the plan left without an offset, with what the translation had
    for (f, translation), (plan, cps) in plans.items():
        have_cp = {(c.group, c.partition) for c in cps}
        rows = {(r.group, r.topic, r.partition): r for r in plan.rows}
        said = {
            (e["group"], e["topic"], e["partition"]): (e["reread"], bool(e.get("exact")))
            for e in estimate_reread(
                [r.as_dict() for r in plan.rows if r.writes], {} if translation in (LOST, LOST_UNREAD) else commits
            )
        }
        for (pat, g), pos in positions.items():
            if flow[topic_of[pat]] != f:
                continue
            for p, u in pos.items():
                rt = replicas[topic_of[pat]]
                r = rows.get((g, rt, p))
                pr = PointResult(pat, translation, g, p, u, (g, p) in have_cp, bool(r and r.writes))
                if not pr.answered:  # why not, in the test's message: the row's action and reason, or no row at all
                    pr.rule = f"{r.action}: {r.reason}" if r else "no row"
                    if translation == "exact" and not refused[translation]:  # the evidence, to find out why
                        try:
                            unanswered.append(
                                {
                                    **_evidence_of(f, runs[topic_of[pat]], rt, p, u, r, copies[(rt, p)]),
                                    "notes": RunFolder(root / tag / f / translation).load_plan().translation_notes,
                                }
                            )
                        except Exception as e:  # noqa: BLE001 - a diagnostic never hides the failure it explains
                            unanswered.append({"group": g, "partition": p, "evidence not gathered": repr(e)})
                if pat == TAIL and refused[translation]:  # the failover stopped at its drain check: nothing written
                    if pr.answered:  # what it would have lost had the gate let it through (facts)
                        lost_if_passed[translation] += score(
                            r.planned_offset, u, copies[(rt, p)], runs[TAIL].truth(p), uncopied=True
                        ).lost
                    pr.answered, pr.refused = False, True
                elif pr.answered:
                    s = score(r.planned_offset, u, copies[(rt, p)], runs[topic_of[pat]].truth(p), uncopied=True)
                    pr.rule, pr.planned, pr.lost, pr.re_read, pr.phantom = (
                        r.rule,
                        r.planned_offset,
                        s.lost,
                        s.re_read,
                        s.phantom,
                    )
                    pr.said, pr.said_exact = said.get((g, rt, p), (None, False))
                    if translation in (LOST, LOST_UNREAD):
                        end = copies[(rt, p)][-1][0] + 1 if copies[(rt, p)] else 0
                        bar = newest_sync_at_or_below(archived_syncs(f, runs[topic_of[pat]].topic, p), u, end)
                        if bar is not None:
                            b = score(bar, u, copies[(rt, p)], runs[topic_of[pat]].truth(p), uncopied=True)
                            pr.bar_re_read, pr.bar_lost = b.re_read, b.lost
                points.append(pr)
    facts = {
        "mm2_killed": kill_mm2,
        "mm2_pid_before_kill": pid_before,
        "mm2_pid_after": bed.mm2.popen.pid,
        "records_per_partition": per_partition,
        "partitions": partitions,
        "copied_twice": {
            pat: sum(len(c) - len({v for _o, v in c}) for (rt, _p), c in copies.items() if rt == replicas[pat])
            for pat in patterns
        },
        "aborted_records": len(runs["transactions"].aborted),
        "compacted_away_on_source": _compacted_away(runs["compacted"]),
        "twins_written": sum(len(v) for v in runs["twins"].twins.values()),
        "offsets_gone_by_retention": gone_by_retention,
        "exactly_once_flow": eos_alias,
        "replica_markers": {
            pat: sum(
                e - len(copies[(replicas[pat], p)])
                for p, e in ((p, target.offsets([(replicas[pat], p)])[(replicas[pat], p)]) for p in range(partitions))
            )
            for pat in patterns
            if pat in TRANSACTIONAL
        },
    }
    if unanswered:
        facts["exact_unanswered"] = unanswered
        log.warning(
            "drill %s: %d exact point(s) left without an offset: %s",
            tag,
            len(unanswered),
            json.dumps(unanswered, default=str),
        )
    if tail is not None:
        facts[TAIL] = {**tail, "refused": refused, "lost_if_passed": dict(lost_if_passed)}
    for r in runs.values():
        r.producer = None  # its bed stops next: let it go now rather than retry a stopped broker
    log.info("drill %s done in %.0fs: %s", tag, time.monotonic() - t0, facts)
    return DrillResult(tag, mm2, points, time.monotonic() - t0, facts)


def _evidence_of(alias: str, run: TopicRun, replica: str, partition: int, position: int, row, copies: list) -> dict:
    """What an exact point left unanswered had: the plan row, the archived syncs, where each source offset around
    the position was copied on the replica (source offset -> replica offsets, from the payloads) and the aborted
    ones: enough to replay the translation on a unit test's world."""
    truth = run.truth(partition)
    src = {v: o for v, o in truth.offsets.items()}
    where: dict[int, list[int]] = defaultdict(list)
    for o, v in copies:
        if v in src:
            where[src[v]].append(o)
    ups, downs = archived_syncs(alias, run.topic, partition)
    return {
        "replica": replica,
        "partition": partition,
        "position": position,
        "row": row.as_dict() if row is not None else None,
        "syncs": list(zip(map(int, ups), map(int, downs))),
        "copies": {u: where.get(u, []) for u in sorted(src.values())},
        "aborted": sorted(o for v, o in src.items() if v in truth.aborted),
        "replica_end": copies[-1][0] + 1 if copies else 0,
    }


def archived_syncs(alias: str, topic: str, partition: int) -> tuple:
    """The archive's offset syncs of one source partition, as (upstream, downstream) arrays."""
    from mm2_failover.adapters.config import archive_root
    from mm2_failover.adapters.syncs import SyncArchive

    cols, _bad = SyncArchive(archive_root(), alias).partition_syncs({(topic, partition)})
    return cols.pop((topic, partition), ((), ()))


def recopy(bootstrap: str, topic: str, records: dict[int, list]) -> None:
    """Write ``records`` (partition -> records read from ``topic``) to the end of their partitions of ``topic`` again,
    key, value, headers and timestamp, as MM2 writes its copies: a restarted MM2's re-copies."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "log_level": 3})
    for part, recs in sorted(records.items()):
        for r in recs:
            p.produce(
                topic,
                value=r.value,
                key=r.key,
                partition=part,
                timestamp=r.timestamp_ms,
                headers=list(r.headers) or None,
            )
    if p.flush(30):
        raise RuntimeError(f"could not append the re-copies to {topic}")


def tail_never_copied(bed, folder: Path, run: TopicRun, replica: str, groups: list[str], rng: random.Random) -> dict:
    """Issue 50 item 2 (MM2 stopped): ``TAIL_NEW`` more records per partition on the source, never copied, and the
    replica's last ``TAIL_RECOPIED`` records appended to it again (a restarted MM2's re-copies): the replica's end at
    or past the source's, the source's last records without a copy. Then the failover's drain check for ``groups``
    (:func:`mm2_failover.stages.drain_check.drain_check`, as the failover's sensor runs it): with MM2's progress readable,
    with it unknown (``mm2_offsets_topic`` naming a topic that does not exist: MM2 on a Connect cluster, the
    parameter unset) and with the source lost (``source_reachable=no``). Returns the facts: ends, each gate's
    :func:`gate_summary`."""
    from mm2_failover.stages.drain_check import drain_check

    source, target = bed.client("source"), bed.client("target")
    parts = list(range(run.partitions))
    produce(bed.source_bootstrap, run, TAIL_NEW, rng)
    ends = target.offsets([(replica, p) for p in parts])
    last = target.records({(replica, p): (max(0, e - TAIL_RECOPIED), e) for (_t, p), e in ends.items()})
    recopy(bed.target_bootstrap, replica, {p: recs for (_t, p), recs in last.items()})
    rx = "|".join(re.escape(g) for g in groups)
    gates = {}
    for name, params in (
        ("progress readable", {}),
        (NO_PROGRESS, {"mm2_offsets_topic": f"{run.topic}-no-progress"}),
        ("source lost", {"source_reachable": "no"}),
    ):
        ctx = bed.run_context(
            folder / re.sub(r"\W+", "-", name), groups_regex=rx, accept_groups_without_checkpoints=True, **params
        )
        v = drain_check(ctx)
        log.info("drain check on %s, %s:\n%s", run.topic, name, v.table())
        why = {int(r["partition"]): r["why"] for r in v.rows if r["topic"] == run.topic and r.get("why")}
        gates[name] = {**gate_summary(v.as_dict(), run.topic), "why": why}
    src = source.offsets([(run.topic, p) for p in parts])
    rep = target.offsets([(replica, p) for p in parts])
    return {
        "topic": run.topic,
        "never_copied_per_partition": TAIL_NEW,
        "recopied_per_partition": TAIL_RECOPIED,
        "source_end": {p: src[(run.topic, p)] for p in parts},
        "replica_end": {p: rep[(replica, p)] for p in parts},
        "gates": gates,
    }


def _compacted_away(run: TopicRun) -> int:
    """Records of the compacted topic the source's cleaner had removed at failover."""
    return sum(len(v) for v in run.offsets.values()) - sum(len(v) for v in run.present.values())
