"""Stage 2, snapshot: the end offsets, the groups' source commits and the offset syncs, captured once per run."""

from __future__ import annotations

import functools
import logging

from mm2_failover.kafka_io import Commit
from mm2_failover.run import RunContext
from mm2_failover.runfolder import Snapshot, SourceState, now_iso
from mm2_failover.stages.archive import capture_syncs
from mm2_failover.stages.drain import check_aliases

log = logging.getLogger(__name__)


def capture_snapshot(ctx: RunContext) -> Snapshot:
    """Capture end offsets once per run; a re-run returns the snapshot already captured, unchanged."""
    f = ctx.folder
    if f.snapshot.exists():
        snap = f.load_snapshot()
        log.info("snapshot already captured at %s for this run: reusing it unchanged (%s)", snap.captured_at, f.snapshot)
        return snap
    ctx.reachability()  # decided before anything is captured (and never again)
    target = ctx.target
    topics = target.topics()
    cp_topics = check_aliases(ctx, topics)
    cp_parts = target.partitions(cp_topics.values())
    cp_end, cp_start = target.offsets(cp_parts), target.offsets(cp_parts, "earliest")
    replicas = sorted({t for p in ctx.policies.values() for t in p.replica_topics(topics)})
    rparts = target.partitions(replicas)
    r_end, r_start = target.offsets(rparts, "latest"), target.offsets(rparts, "earliest")
    sources = {}
    for alias in ctx.aliases:
        source = ctx.source(alias)
        if source is None:
            sources[alias] = SourceState(alias, False)
            continue
        policy = ctx.policies[alias]
        src_topics = sorted({policy.source_topic(t) for t in policy.replica_topics(topics)})
        existing = source.topics()
        end = source.offsets(source.partitions([t for t in src_topics if t in existing]))
        groups = ctx.selection.select(source.groups())
        commits = source.commits_many(groups, ctx.params.apply_concurrency)
        sources[alias] = SourceState(alias, True, end, {g: cs for g, cs in commits.items() if cs})
    snap = Snapshot(now_iso(), cp_topics, cp_end, cp_start, {t: topics[t] for t in replicas}, r_start, r_end, sources,
                    target.cluster_id(), {a: capture_syncs(ctx, a) for a in ctx.aliases})
    f.save_snapshot(snap)
    log.info("captured snapshot: checkpoint end offsets %s; %d replica topic(s); sources: %s", cp_end, len(replicas),
             {a: "reachable" if s.reachable else "LOST (disaster mode)" for a, s in sources.items()})
    return snap


def source_commits(ctx: RunContext, snap: Snapshot) -> dict[str, dict[tuple[str, str, int], Commit]]:
    """The selected groups' source commits on replicated topics: group -> {(alias, replica topic, partition): commit}."""
    out: dict[str, dict] = {}
    for alias, state in snap.sources.items():
        policy = ctx.policies[alias]

        @functools.cache  # decided once per topic, not once per row
        def replica_of(t: str) -> str | None:
            """The replica topic of source topic ``t``, if it is failed over."""
            rt = policy.replica_topic(t)
            return rt if rt in snap.replica_partitions and not policy.is_internal_topic(t) else None

        for g, cs in (state.group_commits or {}).items():
            if not ctx.selection.selects(g):
                continue
            for (t, p), c in cs.items():
                rt = replica_of(t)
                if rt is not None:
                    out.setdefault(g, {})[(alias, rt, p)] = c
    return out
