"""Stage 2, snapshot: the end offsets, the groups' source commits and the offset syncs, captured once per run."""

from __future__ import annotations

import functools
import logging

from mm2_failover.adapters.runfolder import Snapshot, SourceState, now_iso
from mm2_failover.rules.values import Commit
from mm2_failover.stages.archive import archived_positions, capture_syncs
from mm2_failover.stages.context import RunContext
from mm2_failover.stages.drain_check import check_aliases

log = logging.getLogger(__name__)


def capture_snapshot(ctx: RunContext) -> Snapshot:
    """Capture end offsets once per run; a re-run returns the snapshot already captured, unchanged."""
    f = ctx.folder
    if f.snapshot.exists():
        snap = f.load_snapshot()
        log.info(
            "snapshot already captured at %s for this run: reusing it unchanged (%s)", snap.captured_at, f.snapshot
        )
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
            sources[alias] = lost_source_state(ctx, alias)
            continue
        policy = ctx.policies[alias]
        src_topics = sorted({policy.source_topic(t) for t in policy.replica_topics(topics)})
        existing = source.topics()
        end = source.offsets(source.partitions([t for t in src_topics if t in existing]))
        groups = ctx.selection.select(source.groups())
        commits = source.commits_many(groups, ctx.params.apply_concurrency)
        sources[alias] = SourceState(alias, True, end, {g: cs for g, cs in commits.items() if cs})
    snap = Snapshot(
        now_iso(),
        cp_topics,
        cp_end,
        cp_start,
        {t: topics[t] for t in replicas},
        r_start,
        r_end,
        sources,
        target.cluster_id(),
        {a: capture_syncs(ctx, a) for a in ctx.aliases},
    )
    f.save_snapshot(snap)
    log.info(
        "captured snapshot: checkpoint end offsets %s; %d replica topic(s); sources: %s",
        cp_end,
        len(replicas),
        {a: "reachable" if s.reachable else "LOST (disaster mode)" for a, s in sources.items()},
    )
    return snap


def lost_source_state(ctx: RunContext, alias: str) -> SourceState:
    """A lost source: nothing read from it; the archive's newest reading of its selected groups' commits, if any
    (plan rule 1a decides, once the checkpoints are known, where they are the groups' positions)."""
    got = archived_positions(alias)
    if got is None:
        log.warning(
            "alias %s: the source is lost and the archive holds no reading of its groups' commits: the "
            "groups' positions are MM2's checkpoints",
            alias,
        )
        return SourceState(alias, False)
    read, commits = got
    mine = {g: cs for g, cs in commits.items() if ctx.selection.selects(g)}
    log.warning(
        "alias %s: the source is lost; the archive's reading of its groups' commits (%s .. %s, %d selected "
        "group(s)) counts where it is newer than MM2's checkpoint (plan rule 1a)",
        alias,
        read["read_from"],
        read["read_to"],
        len(mine),
    )
    return SourceState(alias, False, archived_commits=mine, archived_read=read)


def source_commits(ctx: RunContext, snap: Snapshot) -> dict[str, dict[tuple[str, str, int], Commit]]:
    """The selected groups' source commits on replicated topics: group -> {(alias, replica topic, partition): commit}."""
    return _on_replicas(ctx, snap, "group_commits")


def source_positions(ctx: RunContext, snap: Snapshot) -> dict[tuple[str, str, int], int]:
    """:func:`source_commits` as (group, replica topic, partition) -> committed offset: what the re-read figures
    count from (:func:`mm2_failover.rules.report.estimate_reread`)."""
    return {(g, rt, p): c.offset for g, cs in source_commits(ctx, snap).items() for (_a, rt, p), c in cs.items()}


def archived_commits(ctx: RunContext, snap: Snapshot) -> dict[str, dict[tuple[str, str, int], Commit]]:
    """The lost sources' archived commits of the selected groups (:func:`lost_source_state`), as
    :func:`source_commits`."""
    return _on_replicas(ctx, snap, "archived_commits")


def _on_replicas(ctx: RunContext, snap: Snapshot, which: str) -> dict[str, dict[tuple[str, str, int], Commit]]:
    out: dict[str, dict] = {}
    for alias, state in snap.sources.items():
        policy = ctx.policies[alias]

        @functools.cache  # decided once per topic, not once per row
        def replica_of(t: str, policy=policy) -> str | None:
            """The replica topic of source topic ``t``, if it is failed over."""
            rt = policy.replica_topic(t)
            return rt if rt in snap.replica_partitions and not policy.is_internal_topic(t) else None

        for g, cs in (getattr(state, which) or {}).items():
            if not ctx.selection.selects(g):
                continue
            for (t, p), c in cs.items():
                rt = replica_of(t)
                if rt is not None:
                    out.setdefault(g, {})[(alias, rt, p)] = c
    return out
