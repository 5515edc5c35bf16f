"""Stage 1, drain: have producers stopped and MM2 replicated everything (the rules: :mod:`mm2_failover.rules.drain`)?
Observed per source alias; a lost alias (disaster mode) on target-side evidence only."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mm2_failover.adapters.kafka.cluster import Cluster
from mm2_failover.adapters.kafka.kafka_errors import OutOfRange
from mm2_failover.rules import drain as drainmod
from mm2_failover.rules.naming import checkpoint_topic_aliases
from mm2_failover.rules.selection import compile_pattern
from mm2_failover.rules.values import TP
from mm2_failover.stages.context import RunContext
from mm2_failover.stages.errors import ConfigurationError

log = logging.getLogger(__name__)


class NotDrained(RuntimeError):
    """Producers still write or MM2 has not replicated everything (the CLI's drain wait timed out)."""


@dataclass
class _AliasScope:
    alias: str
    policy: object
    source: Cluster | None
    topics: list[str]  # source topic names in scope
    groups: list[str] = field(default_factory=list)


def _scope(ctx: RunContext, target_topics: dict[str, int]) -> list[_AliasScope]:
    """Per alias, the source topics whose producers must have stopped and whose replication must have caught up:
    ``topics_regex``, else the topics the selected groups commit on (on a lost source: every replica)."""
    rx = compile_pattern(ctx.params.topics_regex, "topics_regex") if ctx.params.topics_regex else None
    out = []
    for alias in ctx.aliases:
        policy, source = ctx.policies[alias], ctx.source(alias)
        replicated = [policy.source_topic(t) for t in policy.replica_topics(target_topics)]
        groups: list[str] = []
        if source is None:
            topics = [t for t in replicated if rx is None or rx.fullmatch(t)]
        elif rx is not None:
            topics = [t for t in source.topics() if not policy.is_internal_topic(t) and rx.fullmatch(t)]
        else:
            groups = ctx.selection.select(source.groups())
            commits = source.commits_many(groups, ctx.params.apply_concurrency)
            topics = sorted({t for cs in commits.values() for t, _ in cs if not policy.is_internal_topic(t)})
        out.append(_AliasScope(alias, policy, source, sorted(set(topics)), groups))
    # several aliases may read the same source cluster: a topic only one of them replicates is not missing for the
    # others (a topic no alias replicates stays in scope: "replica topic missing on the target")
    present = {t for s in out for t in s.topics if s.policy.replica_topic(t) in target_topics}
    for s in out:
        s.topics = [t for t in s.topics if s.policy.replica_topic(t) in target_topics or t not in present]
    return out


def check_aliases(ctx: RunContext, target_topics: dict[str, int]) -> dict[str, str]:
    """alias -> its checkpoints topic; ConfigurationError at once when one is not on the target (a mistyped
    source_alias, a wrong separator, or no MirrorCheckpointConnector for that flow), naming the aliases whose
    checkpoints topics do exist - before anything waits on that alias."""
    cp_topics = {a: ctx.policies[a].checkpoints_topic for a in ctx.aliases}
    missing = {a: t for a, t in cp_topics.items() if t not in target_topics}
    if missing:
        found = checkpoint_topic_aliases(target_topics)
        raise ConfigurationError(
            f"checkpoints topic(s) {', '.join(missing.values())} for source alias(es) {', '.join(missing)} not found on "
            f"the target ({ctx.target.conf.get('bootstrap.servers')}). Checkpoint topics that do exist: "
            f"{', '.join(f'{t} (alias {a})' for t, a in sorted(found.items())) or 'none'}. Check source_alias, the "
            "replication policy separator (and internal_topic_separator_enabled), and that MM2's "
            "MirrorCheckpointConnector runs for this flow."
        )
    return cp_topics


def drain_status(ctx: RunContext, quiet_s: float | None = None) -> drainmod.DrainVerdict:
    """Observe, wait the quiet window, observe again, and evaluate (see :mod:`mm2_failover.rules.drain`), for every
    source alias; a lost alias (disaster mode) is judged on target-side evidence only. An alias without a
    checkpoints topic on the target is refused at once (:func:`check_aliases`)."""
    target = ctx.target
    quiet = ctx.params.drain_quiet_seconds if quiet_s is None else quiet_s
    target_topics = target.topics()
    check_aliases(ctx, target_topics)
    lost = set(ctx.disaster_aliases())
    scopes = _scope(ctx, target_topics)
    groups = sorted({g for s in scopes for g in s.groups})
    topics = sorted({t for s in scopes for t in s.topics})
    if not topics:
        return drainmod.DrainVerdict(
            True,
            bool(lost),
            notes=["nothing in scope: no selected group has committed offsets on the source for a replicated topic"],
            groups=groups,
            disaster_aliases=sorted(lost),
        )
    layout = []  # (alias, source topic, partition, replica topic)
    for s in scopes:
        if s.source is None:
            reps = [s.policy.replica_topic(t) for t in s.topics]
            parts = target.partitions([r for r in reps if r in target_topics])
            layout += [(s.alias, s.policy.source_topic(r), p, r) for r, p in parts]
        else:
            layout += [(s.alias, t, p, s.policy.replica_topic(t)) for t, p in s.source.partitions(s.topics)]
    rparts = sorted({(r, p) for _a, _t, p, r in layout if r in target_topics})
    progress_topics = {s.alias: ctx.params.mm2_offsets_topic or s.policy.mm2_offsets_topic for s in scopes}

    def observe():
        src = {}
        for s in scopes:
            if s.source is not None:
                src.update(
                    {
                        (s.alias, t, p): o
                        for (t, p), o in s.source.offsets([(t, p) for a, t, p, _r in layout if a == s.alias]).items()
                    }
                )
        rep = target.offsets(rparts)
        prog = {a: mm2_progress(target, a, t, target_topics) for a, t in progress_topics.items()}
        return src, rep, prog

    src1, rep1, prog1 = observe()
    time.sleep(quiet)
    src2, rep2, prog2 = observe()
    notes = []
    for a, t in progress_topics.items():
        if prog2[a] is None:
            notes.append(
                f"MM2 progress topic {t} not found on the target: alias {a} falls back to looking up the "
                "source's last record on the replica (MM2 on a Connect cluster keeps its progress in the "
                "worker's offset.storage.topic: give it as mm2_offsets_topic)"
            )
    if any(p is not None for a, p in prog2.items() if a not in lost):
        notes.append(
            "MM2 writes its progress on each offset flush (offset.flush.interval.ms, 60 s by default): "
            "a partition can look behind for up to that long after replication finished"
        )
    tails = (
        last_record_ms(
            target, {rp: rep2[rp] for rp in rparts if any(a in lost and (r, p) == rp for a, _t, p, r in layout)}
        )
        if lost
        else {}
    )
    obs = []
    by_alias = {s.alias: s for s in scopes}
    for alias, t, p, r in layout:
        present = r in target_topics
        prog_a2, prog_a1 = (prog2[alias] or {}), (prog1[alias] or {})
        o = drainmod.PartitionObservation(
            t,
            p,
            r,
            source_end_before=src1.get((alias, t, p)),
            source_end=src2.get((alias, t, p)),
            replicated=prog_a2.get((t, p)) if prog2[alias] is not None else None,
            replica_end_before=rep1.get((r, p)),
            replica_end=rep2.get((r, p)) if present else None,
            newest_replicated_ms=tails.get((r, p)),
            alias=alias,
        )
        o.progress_moved = prog_a1.get((t, p)) != prog_a2.get((t, p))
        o.home = ctx.policies[alias].is_home_topic(r)
        source = by_alias[alias].source
        if (
            source is not None
            and o.replicated is not None
            and o.source_end is not None
            and o.replicated + 1 < o.source_end
            and not o.home
        ):
            # only transaction markers / aborted records after the last replicated offset? gone already?
            after = drainmod.after_replicated(source, (t, p), o.replicated, o.source_end)
            o.data_after_replicated, o.gone_unreplicated, o.after_check_failed = after.data, after.gone, after.why
        if (
            source is not None
            and o.replicated is None
            and not o.home
            and alias not in lost
            and present
            and o.source_end is not None
            and o.replica_end is not None
        ):
            o.tail = drainmod.last_record_copied(source, target, (t, p), (r, p), o.source_end, o.replica_end)
        obs.append(o)
    v = drainmod.evaluate(obs, lost)
    v.notes, v.disaster_aliases = notes, sorted(lost)
    if lost:
        hb = None
        if "heartbeats" in target_topics:
            hb = max(last_record_ms(target, target.offsets(target.partitions(["heartbeats"]))).values(), default=None)
        v.rpo = drainmod.rpo_estimate([o for o in obs if o.alias in lost], int(time.time() * 1000), hb)
    v.groups, v.topics = groups, topics
    v.observed_ms = int(time.time() * 1000)
    return v


def drain_check(ctx: RunContext, quiet_s: float | None = None) -> drainmod.DrainVerdict:
    """One drain observation (:func:`drain_status`), kept in ``drain.json``; raises
    :class:`~mm2_failover.rules.drain.UnreplicatedLoss` (a refusal: waiting cannot help) when records MM2 never replicated
    are gone from the source."""
    v = drain_status(ctx, quiet_s)
    ctx.folder.save_drain(v)
    refusal = v.unreplicated_loss()
    if refusal:
        raise drainmod.UnreplicatedLoss(f"{refusal}\n{v.table()}")
    return v


def mm2_progress(target: Cluster, alias: str, topic: str, target_topics: dict[str, int] | None = None):
    """MM2's replication progress of ``alias`` (see :func:`mm2_failover.rules.drain.mm2_progress`), or None when its
    Connect offsets topic does not exist (e.g. MM2 in a Connect cluster with other names)."""
    if topic not in (target_topics if target_topics is not None else target.topics()):
        return None
    parts = target.partitions([topic])
    ends = target.offsets(parts)
    for attempt in (1, 2):
        # from the log start as ListOffsets gives it: a read assigned at OFFSET_BEGINNING waits ~0.5 s in librdkafka
        # before its first fetch (measured on the bed), and the drain reads this topic twice
        try:
            recs = list(target.read(ends, start=target.offsets(parts, "earliest")))
            break
        except OutOfRange:  # DeleteRecords moved the log start between the lookup and the read: once more
            if attempt == 2:
                raise
    return drainmod.mm2_progress(((k, v) for _t, _p, _o, k, v, _ts in recs), alias)


def last_record_ms(cluster: Cluster, ends: dict[TP, int]) -> dict[TP, int]:
    """Timestamp of the last record of each partition (empty partitions, and those retention emptied, are absent)."""
    starts = cluster.offsets(list(ends), "earliest") if ends else {}
    last = {tp: e for tp, e in ends.items() if e - 1 >= starts.get(tp, 0)}
    out = {}
    for t, p, _o, _k, _v, ts in cluster.read(last, start={tp: e - 1 for tp, e in last.items()}):
        out[(t, p)] = ts
    return out


def wait_drained(
    ctx: RunContext, timeout_s: float | None = None, poll_s: float = 2.0, on_wait: Callable[[str], None] | None = None
) -> drainmod.DrainVerdict:
    """The CLI's drain wait: evaluate until drained, or raise NotDrained with the table after ``timeout_s``. Each
    check that finds it not drained yet reports its progress (:meth:`~mm2_failover.rules.drain.DrainVerdict.progress`) to
    ``on_wait`` (the CLI's live status line on a terminal), else to the log."""
    timeout_s = ctx.params.drain_timeout_seconds if timeout_s is None else timeout_s
    start = time.monotonic()
    deadline = start + timeout_s
    while True:
        v = drain_check(ctx)
        if v.drained:
            log.info("drained: %d topic(s) of %d group(s)\n%s", len(v.topics), len(v.groups), v.table())
            return v
        now = time.monotonic()
        if now + poll_s > deadline:
            raise NotDrained(
                f"not drained after {timeout_s:.0f} s: stop the producers on the source and let MM2 catch "
                f"up (or, if the source is lost, use source_reachable=no):\n{v.table()}"
            )
        line = v.progress(deadline - now, now - start)
        if on_wait is not None:
            on_wait(line)
        else:
            log.warning("%s; checking again", line)
        time.sleep(poll_s)
