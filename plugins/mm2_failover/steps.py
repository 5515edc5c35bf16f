"""The pipeline's steps as plain functions over a :class:`~mm2_failover.run.RunContext`: the Airflow tasks, sensors
and operator and the CLI call exactly these, and decide nothing themselves.

Each step reads and writes the run's folder (:class:`~mm2_failover.runfolder.RunFolder`) so that a retry or a re-run
converges: reachability is decided once, the snapshot is captured once, the plan is built once, the backup is taken
before the first write and never replaced, and apply writes only what the target does not hold yet.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from mm2_failover import drain as drainmod
from mm2_failover import faults
from mm2_failover import plan as planmod
from mm2_failover import report as reportmod
from mm2_failover import rollback as rb
from mm2_failover.kafka_io import TP, Cluster, Commit, GroupState, KafkaConfigError
from mm2_failover.naming import checkpoint_topic_aliases
from mm2_failover.run import RunContext
from mm2_failover.rollback import Backup, BackupEntry
from mm2_failover.runfolder import (
    AUDIT,
    PLAN_JSON,
    RunFolder,
    RunFolderError,
    Snapshot,
    SourceState,
    age_seconds,
    now_iso,
    read_json,
    write_json,
    write_text,
)
from mm2_failover.selection import compile_pattern

log = logging.getLogger(__name__)


class ConfigurationError(ValueError):
    """The run's parameters do not match the clusters (e.g. no checkpoints topic for an alias); exit 2."""


class NotDrained(RuntimeError):
    """Producers still write or MM2 has not replicated everything (the CLI's drain wait timed out)."""


class RollbackRefused(RuntimeError):
    """The target's commits moved since the failover; a forced rollback would overwrite them."""


# ------------------------------------------------------------------------------------------ 1. drain


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
            "MirrorCheckpointConnector runs for this flow.")
    return cp_topics


def drain_status(ctx: RunContext, quiet_s: float | None = None) -> drainmod.DrainVerdict:
    """Observe, wait the quiet window, observe again, and evaluate (see :mod:`mm2_failover.drain`), for every
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
        return drainmod.DrainVerdict(True, bool(lost), notes=[
            "nothing in scope: no selected group has committed offsets on the source for a replicated topic"],
            groups=groups, disaster_aliases=sorted(lost))
    layout = []  # (alias, source topic, partition, replica topic)
    for s in scopes:
        if s.source is None:
            reps = [s.policy.replica_topic(t) for t in s.topics]
            parts = target.partitions([r for r in reps if r in target_topics])
            layout += [(s.alias, s.policy.source_topic(r), p, r) for r, p in parts]
        else:
            layout += [(s.alias, t, p, s.policy.replica_topic(t)) for t, p in s.source.partitions(s.topics)]
    rparts = sorted({(r, p) for _a, _t, p, r in layout if r in target_topics})
    progress_topics = {s.alias: s.policy.mm2_offsets_topic for s in scopes}

    def observe():
        src = {}
        for s in scopes:
            if s.source is not None:
                src.update({(s.alias, t, p): o for (t, p), o in s.source.offsets(
                    [(t, p) for a, t, p, _r in layout if a == s.alias]).items()})
        rep = target.offsets(rparts)
        prog = {a: mm2_progress(target, a, t, target_topics) for a, t in progress_topics.items()}
        return src, rep, prog

    src1, rep1, prog1 = observe()
    time.sleep(quiet)
    src2, rep2, prog2 = observe()
    notes = []
    for a, t in progress_topics.items():
        if prog2[a] is None:
            notes.append(f"MM2 progress topic {t} not found on the target: alias {a} falls back to comparing replica "
                         "and source end offsets")
    if any(p is not None for a, p in prog2.items() if a not in lost):
        notes.append("MM2 writes its progress on each offset flush (offset.flush.interval.ms, 60 s by default): "
                     "a partition can look behind for up to that long after replication finished")
    tails = last_record_ms(target, {rp: rep2[rp] for rp in rparts if any(
        a in lost and (r, p) == rp for a, _t, p, r in layout)}) if lost else {}
    obs = []
    by_alias = {s.alias: s for s in scopes}
    for alias, t, p, r in layout:
        present = r in target_topics
        prog_a2, prog_a1 = (prog2[alias] or {}), (prog1[alias] or {})
        o = drainmod.PartitionObservation(
            t, p, r, source_end_before=src1.get((alias, t, p)), source_end=src2.get((alias, t, p)),
            replicated=prog_a2.get((t, p)) if prog2[alias] is not None else None,
            replica_end_before=rep1.get((r, p)), replica_end=rep2.get((r, p)) if present else None,
            newest_replicated_ms=tails.get((r, p)), alias=alias)
        o.progress_moved = prog_a1.get((t, p)) != prog_a2.get((t, p))
        o.home = ctx.policies[alias].is_home_topic(r)
        source = by_alias[alias].source
        if source is not None and o.replicated is not None and o.source_end is not None \
                and o.replicated + 1 < o.source_end and not o.home:
            # only transaction markers / aborted records after the last replicated offset? gone already?
            after = drainmod.after_replicated(source, (t, p), o.replicated, o.source_end)
            o.data_after_replicated, o.gone_unreplicated, o.after_check_failed = after.data, after.gone, after.why
        obs.append(o)
    v = drainmod.evaluate(obs, lost)
    v.notes, v.disaster_aliases = notes, sorted(lost)
    if lost:
        hb = None
        if "heartbeats" in target_topics:
            hb = max(last_record_ms(target, target.offsets(target.partitions(["heartbeats"]))).values(), default=None)
        v.rpo = drainmod.rpo_estimate([o for o in obs if o.alias in lost], int(time.time() * 1000), hb)
    v.groups, v.topics = groups, topics
    return v


def drain_check(ctx: RunContext, quiet_s: float | None = None) -> drainmod.DrainVerdict:
    """One drain observation (:func:`drain_status`), kept in ``drain.json``; raises
    :class:`~mm2_failover.drain.UnreplicatedLoss` (a refusal: waiting cannot help) when records MM2 never replicated
    are gone from the source."""
    v = drain_status(ctx, quiet_s)
    ctx.folder.save("drain.json", v.as_dict())
    refusal = v.unreplicated_loss()
    if refusal:
        raise drainmod.UnreplicatedLoss(f"{refusal}\n{v.table()}")
    return v


def mm2_progress(target: Cluster, alias: str, topic: str, target_topics: dict[str, int] | None = None):
    """MM2's replication progress of ``alias`` (see :func:`mm2_failover.drain.mm2_progress`), or None when its
    Connect offsets topic does not exist (e.g. MM2 in a Connect cluster with other names)."""
    if topic not in (target_topics if target_topics is not None else target.topics()):
        return None
    parts = target.partitions([topic])
    return drainmod.mm2_progress(((k, v) for _t, _p, _o, k, v, _ts in target.read(target.offsets(parts))), alias)


def last_record_ms(cluster: Cluster, ends: dict[TP, int]) -> dict[TP, int]:
    """Timestamp of the last record of each partition (empty partitions, and those retention emptied, are absent)."""
    starts = cluster.offsets(list(ends), "earliest") if ends else {}
    last = {tp: e for tp, e in ends.items() if e - 1 >= starts.get(tp, 0)}
    out = {}
    for t, p, _o, _k, _v, ts in cluster.read(last, start={tp: e - 1 for tp, e in last.items()}):
        out[(t, p)] = ts
    return out


def wait_drained(ctx: RunContext, timeout_s: float | None = None, poll_s: float = 2.0) -> drainmod.DrainVerdict:
    """The CLI's drain wait: evaluate until drained, or raise NotDrained with the table after ``timeout_s``."""
    timeout_s = ctx.params.drain_timeout_seconds if timeout_s is None else timeout_s
    deadline = time.monotonic() + timeout_s
    while True:
        v = drain_check(ctx)
        if v.drained:
            log.info("drained: %d topic(s) of %d group(s)\n%s", len(v.topics), len(v.groups), v.table())
            return v
        if time.monotonic() + poll_s > deadline:
            raise NotDrained(f"not drained after {timeout_s:.0f} s: stop the producers on the source and let MM2 catch "
                             f"up (or, if the source is lost, use source_reachable=no):\n{v.table()}")
        log.warning("%d partition(s) not drained yet; checking again", len(v.not_drained()))
        time.sleep(poll_s)


# ------------------------------------------------------------------------------------------ 2. snapshot


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


# ------------------------------------------------------------------------------------------ offset syncs


def sync_cluster(ctx: RunContext, alias: str) -> Cluster | None:
    """The cluster holding ``alias``'s offset-sync topic (MM2's offset-syncs.topic.location), None when lost."""
    return ctx.target if ctx.params.offset_syncs_location == "target" else ctx.source(alias)


def sync_topic(ctx: RunContext, alias: str, cluster: Cluster) -> tuple[str | None, str]:
    """(the offset-sync topic of ``alias``, or None and why)."""
    from mm2_failover.naming import offset_syncs_topics

    topics = cluster.topics()
    if ctx.params.mm2_target_alias:
        t = ctx.policies[alias].offset_syncs_topic(ctx.params.mm2_target_alias)
        return (t, "") if t in topics else (None, f"offset-sync topic {t} not found on the {cluster.name} cluster")
    found = sorted(offset_syncs_topics(topics))
    if len(found) == 1:
        return found[0], ""
    if not found:
        return None, f"no offset-sync topic on the {cluster.name} cluster (offset_syncs_location=" \
                     f"{ctx.params.offset_syncs_location})"
    return None, f"several offset-sync topics on the {cluster.name} cluster ({', '.join(found)}): set mm2_target_alias"


def archive_offset_syncs(ctx: RunContext) -> dict[str, dict]:
    """The scheduled archive (DAG ``mm2_sync_archive``, CLI ``archive``): append every alias's new offset syncs, and
    its new checkpoint records, to the archive. Unlike the failover's own append, a failure here fails (the archive
    must be kept alive)."""
    from mm2_failover.config import archive_root
    from mm2_failover.syncs import CheckpointArchive, SyncArchive

    out = {}
    for alias in ctx.aliases:
        loc = ctx.params.offset_syncs_location
        conn = ctx.target_conn if loc == "target" else ctx.source_conn_of(alias)
        if conn is None:
            out[alias] = {"why": "no source connection for this alias"}
            continue
        cluster = ctx.connect(conn, "target" if loc == "target" else f"source {alias}", ctx.timeout)
        topic, why = sync_topic(ctx, alias, cluster)
        if topic is None:
            raise ConfigurationError(f"alias {alias}: {why}")
        res = SyncArchive(archive_root(), alias).append(cluster, topic, loc)
        log.info("alias %s: %d offset sync(s) archived from %s (%s)%s", alias, res.appended, topic, loc,
                 f"; {len(res.gaps)} gap(s): {res.gaps}" if res.gaps else "")
        out[alias] = res.as_dict()
        cp_topic = ctx.policies[alias].checkpoints_topic
        cps = CheckpointArchive(archive_root(), alias).append(ctx.target, cp_topic, "target")
        log.info("alias %s: %d checkpoint record(s) archived from %s (target)%s", alias, cps.appended, cp_topic,
                 f"; {len(cps.gaps)} gap(s): {cps.gaps}" if cps.gaps else "")
        out[alias]["checkpoints"] = cps.as_dict()
    return out


def capture_syncs(ctx: RunContext, alias: str) -> dict:
    """Archive ``alias``'s offset syncs up to now (the archive then holds every sync up to the end offsets captured
    here), or, when their cluster is lost, say what the archive holds. Never fails the run: without syncs, the plan
    uses MM2's checkpoints (said in the report)."""
    from mm2_failover.config import archive_root
    from mm2_failover.syncs import SyncArchive

    if ctx.params.translation != "exact":
        return {"why": "translation=checkpoint"}
    archive = SyncArchive(archive_root(), alias)
    loc = ctx.params.offset_syncs_location
    cluster = sync_cluster(ctx, alias)
    if cluster is None:
        m = archive.manifest()
        if not m:
            return {"why": "the offset syncs live on the lost source and were never archived"}
        log.warning("alias %s: the source is lost; exact translation uses the archived offset syncs (archived up to "
                    "%s)", alias, m.get("updated_at"))
        return {"topic": m["topic"], "location": loc, "end": archive.archived_to(), "archive_only": True}
    try:
        topic, why = sync_topic(ctx, alias, cluster)
        if topic is None:
            log.warning("alias %s: %s: MM2's checkpoints will be used", alias, why)
            return {"why": why}
        end = {p: o for (_t, p), o in cluster.offsets(cluster.partitions([topic])).items()}
        res = archive.append(cluster, topic, loc)
    except Exception as e:  # noqa: BLE001 - the checkpoints remain; the report says why
        log.warning("alias %s: could not archive the offset syncs (%s: %s): MM2's checkpoints will be used", alias,
                    type(e).__name__, e)
        return {"why": f"{type(e).__name__}: {e}"}
    log.info("alias %s: %d offset sync(s) archived from %s (%s)", alias, res.appended, topic, loc)
    return {"topic": topic, "location": loc, "end": end, "appended": res.appended, "gaps": res.gaps}


def preflight_audit(ctx: RunContext) -> list[dict]:
    """The pre-flight audit (rules in :mod:`mm2_failover.audit`): MM2's configuration (``mm2_config``) and what the
    clusters show, per source alias, into ``audit.json``; warnings are logged and carried into the report. A
    configuration file that cannot be read is a configuration error; findings never fail the run."""
    from mm2_failover import audit
    from mm2_failover.config import archive_root
    from mm2_failover.syncs import SyncArchive

    props: dict[str, str] | None = None
    path = ctx.params.mm2_config
    if path:
        try:
            props = audit.parse_properties(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigurationError(f"mm2_config: cannot read MM2's configuration file {path} ({e}); give the path "
                                     "of the mm2.properties MM2 runs with, or leave mm2_config empty") from None
    target_topics = ctx.target.topics()
    out = []
    for alias in ctx.aliases:
        target_alias = ctx.params.mm2_target_alias or audit.target_alias(props or {}, alias) or "target"
        m = SyncArchive(archive_root(), alias).manifest()
        age = age_seconds(m.get("updated_at")) if m else None
        cp_topic = ctx.policies[alias].checkpoints_topic
        cp_cfg = ctx.target.topic_config(cp_topic) if cp_topic in target_topics else None
        facts = audit.Facts(age, cp_cfg, ctx.params.offset_syncs_location, ctx.params.rpo_seconds)
        findings = audit.audit(props, alias, target_alias, facts)
        for f in findings:
            (log.warning if f.severity == audit.WARNING else log.info)("audit %s %s: %s", alias, f.rule, f.message)
        out += [{"alias": alias, **f.as_dict()} for f in findings]
    ctx.folder.save(AUDIT, {"mm2_config": path, "findings": out})
    return out


def source_commits(ctx: RunContext, snap: Snapshot) -> dict[str, dict[tuple[str, str, int], Commit]]:
    """The selected groups' source commits on replicated topics: group -> {(alias, replica topic, partition): commit}."""
    out: dict[str, dict] = {}
    for alias, state in snap.sources.items():
        policy = ctx.policies[alias]
        for g, cs in (state.group_commits or {}).items():
            if not ctx.selection.selects(g):
                continue
            for (t, p), c in cs.items():
                rt = policy.replica_topic(t)
                if rt in snap.replica_partitions and not policy.is_internal_topic(t):
                    out.setdefault(g, {})[(alias, rt, p)] = c
    return out


@dataclass
class Exact:
    """The exact translation of one (group, replica partition): where to resume, by which rule."""

    offset: int
    rule: str
    source_position: int  # the group's position on the source it translates


PROVE_SYNCS = 2_000_000  # syncs whose partitions' indexes are built and positions proven at a time (~100 MB)


def prove_chunks(sizes: list[tuple[object, int]], budget: int = PROVE_SYNCS) -> list[list]:
    """Partitions (with their sync counts) cut into consecutive chunks of at most ``budget`` syncs (a partition larger
    than that is a chunk of its own)."""
    out: list[list] = []
    total = budget
    for key, n in sizes:
        if total + n > budget and out and out[-1]:
            out.append([])
            total = 0
        elif not out:
            out.append([])
            total = 0
        out[-1].append(key)
        total += n
    return out


def _archived_syncs(alias: str, wanted: set[TP], end: dict[int, int] | None = None) -> tuple[dict, list[str]]:
    """(source topic, partition) -> its archived syncs as (upstream, downstream) arrays, for the wanted partitions of
    ``alias`` (those below ``end`` per sync-topic partition, when given), and the archive files that could not be
    read."""
    from mm2_failover.config import archive_root
    from mm2_failover.syncs import SyncArchive

    return SyncArchive(archive_root(), alias).partition_syncs(wanted, end)


def _index(raw: dict, tp: TP):
    from mm2_failover import translate as tr

    got = raw.pop(tp, None)  # built once, when its positions are proven; the arrays go with it
    return None if got is None else tr.SyncIndex.from_arrays(*got)


def exact_translations(ctx: RunContext, snap: Snapshot, cps: list, src: dict) -> tuple[dict, list[str], dict]:
    """(group, replica topic, partition) -> :class:`Exact`, for every position MM2's archived offset syncs prove
    (see :mod:`mm2_failover.translate` for the rules and :mod:`mm2_failover.evidence` for what counts as proof),
    notes for the report, and where no exact position is proven, the replica offset the position is proven to be at
    or after (re-reads counted from below). The group's position is its source commit at capture time when known,
    else its checkpoint's upstream offset."""
    from mm2_failover import evidence
    from mm2_failover import translate as tr

    if ctx.params.translation != "exact":
        return {}, [], {}
    notes: list[str] = []
    want: dict[tuple[str, str, str, int], int] = {}
    for c in cps:
        want[(c.source_alias, c.group, c.topic, c.partition)] = c.upstream_offset
    for g, commits in src.items():
        for (a, rt, p), commit in commits.items():
            if not ctx.policies[a].is_home_topic(rt):  # failing back: home_translations
                want[(a, g, rt, p)] = commit.offset
    raw: dict[str, dict] = {}
    for alias in sorted({a for a, *_ in want}):
        info = snap.syncs.get(alias) or {}
        if not info.get("topic"):
            notes.append(f"alias {alias}: no offset syncs ({info.get('why', 'not captured')}): MM2's checkpoints are "
                         "used as they are")
            continue
        parts = {(ctx.policies[a].source_topic(rt), p) for a, _g, rt, p in want if a == alias}
        got, unreadable = _archived_syncs(alias, parts, {int(p): int(o) for p, o in (info.get("end") or {}).items()})
        if unreadable:
            notes.append(f"WARNING: alias {alias}: {len(unreadable)} file(s) of the offset-sync archive cannot be read "
                         f"({'; '.join(unreadable[:3])}): exact translation is off for this alias, MM2's checkpoints "
                         "are used as they are. Restore or delete the file(s) named (the archive is re-read from "
                         "MM2's topic where it still holds them).")
            continue
        raw[alias] = got
    by_part: dict[tuple, list] = defaultdict(list)
    for (a, g, rt, p), u in want.items():
        st = ctx.policies[a].source_topic(rt)
        if (st, p) in raw.get(a, {}):
            by_part[(a, st, p)].append(((a, g, rt, p), u))
    sources = {a: ctx.source(a) for a in raw}
    outcomes: dict = {}
    chunks = prove_chunks([(k, raw[k[0]].rows(k[1:])) for k in sorted(by_part)])
    done = 0
    for chunk in chunks:  # a chunk of partitions' indexes at a time
        wants = []
        for a, st, p in chunk:
            idx = _index(raw[a], (st, p))
            for (key, u) in by_part[(a, st, p)]:
                rt = key[2]
                state = snap.sources[a]
                drained = None
                if state.reachable and state.end_offsets and (st, p) in state.end_offsets and (rt, p) in snap.replica_end:
                    drained = (state.end_offsets[(st, p)], snap.replica_end[(rt, p)])  # captured after the drain check
                wants.append(evidence.Want(key, a, (st, p), (rt, p), u, idx, drained, snap.replica_start.get((rt, p))))
        outcomes.update(evidence.prove(wants, sources, ctx.target))
        done += len(chunk)
        if len(chunks) > 1:
            log.info("exact translation: %d/%d partition(s) proven", done, len(by_part))
    out = {}
    at_least = {}
    gone: dict[tuple, tuple[int, int]] = {}
    unproven: dict[str, int] = {}
    floors = 0
    checkpointed = {(c.source_alias, c.group, c.topic, c.partition) for c in cps}
    for key, o in outcomes.items():
        a, g, rt, p = key
        if o.source_log_start is not None:
            gone[(a, rt, p)] = (min(want[key], gone.get((a, rt, p), (want[key],))[0]), o.source_log_start)
        if o.position_at_least is not None:
            at_least[key[1:]] = o.position_at_least
        if o.answer is not None:
            out[key[1:]] = Exact(o.answer[0], o.answer[1], want[key])
        elif o.position_at_least is not None and key not in checkpointed:
            # nothing proven exactly and no checkpoint: the sync floor of a drained partition loses nothing
            out[key[1:]] = Exact(o.position_at_least, tr.SYNC_FLOOR, want[key])
            floors += 1
        elif o.why:
            unproven[o.why.split(":")[0]] = unproven.get(o.why.split(":")[0], 0) + 1
    for (a, rt, p), (lowest, start) in sorted(gone.items()):
        notes.append(f"alias {a}: {ctx.policies[a].source_topic(rt)}[{p}]: group position(s) down to {lowest} are below "
                     f"the source's log start {start} (retention or DeleteRecords took records those groups had not "
                     "read): only target-side proofs answered them, else MM2's checkpoint (their copies on the replica "
                     "are read; what is gone from the replica too is counted as lost to retention)")
    if floors:
        notes.append(f"{floors} position(s) without a checkpoint and not proven exactly resume at the sync floor "
                     "(sync_floor: the newest offset sync at or below the position, on a drained partition: every "
                     "record after it has a copy after it - loses nothing, re-reads what lies between)")
    superseded = sum(1 for e in out.values() if e.rule == tr.SUPERSEDED_SYNC)
    if superseded:
        notes.append(f"{superseded} partition(s) resume at the first copy of a record MM2 copied again later "
                     "(superseded_sync): safe, but they re-read what the later copy repeats (at least the figure in "
                     "their rows)")
    for why, n in sorted(unproven.items()):
        notes.append(f"{n} position(s) not proven exactly ({why}): MM2's checkpoint answers them")
    return out, notes, at_least


HOME_RULE_PREFIX = "home_"  # a plan row's rule when a group returns home (failing back): home_<translate rule>


def home_translations(ctx: RunContext, snap: Snapshot, src: dict) -> tuple[dict, list[str]]:
    """Failing back (``home_alias``): (group, home topic, partition) -> :class:`Exact` for each group's position ``D``
    on ``<home_alias>.<topic>`` of the source, read back to ``<topic>`` on the target by the archived offset syncs of
    the ``home_alias`` flow (:meth:`mm2_failover.translate.SyncIndex.back`, rules 8-9; MM2 writes no checkpoint for
    these: the topic is never copied back). A bracket or the tail counts only on its evidence
    (:func:`mm2_failover.evidence.prove_back`), else the sync floor (safe, re-reads)."""
    from mm2_failover import evidence
    from mm2_failover import translate as tr
    from mm2_failover.config import archive_root

    home = ctx.params.home_alias
    want = {(a, g, rt, p): c.offset for g, cs in src.items() for (a, rt, p), c in cs.items()
            if ctx.policies[a].is_home_topic(rt)}
    if not home or not want:
        return {}, []
    raw, unreadable = _archived_syncs(home, {(rt, p) for _a, _g, rt, p in want})
    indexes = {tp: _index(raw, tp) for tp in list(raw)}
    notes: list[str] = []
    if unreadable:
        notes.append(f"WARNING: failing back: {len(unreadable)} file(s) of alias {home}'s offset-sync archive cannot "
                     f"be read ({'; '.join(unreadable[:3])}): the syncs that could be read are used (fewer syncs only "
                     "move a group's position home earlier: more re-reads, never a skipped record)")
    wants: dict[str, list] = {}
    for key, d in want.items():
        a, g, rt, p = key
        st = ctx.policies[a].source_topic(rt)
        state = snap.sources[a]
        r_end = (state.end_offsets or {}).get((st, p)) if state.reachable else None
        idx = indexes.get((rt, p))
        if idx is None or idx.back(d, r_end) is None:
            notes.append(f"failing back: {g} on {st}[{p}] at {d}: no archived offset sync of alias {home} for {rt}[{p}] "
                         f"at or below it (archive {archive_root()}): it is not taken home")
            continue
        wants.setdefault(a, []).append(evidence.BackWant(key, (st, p), (rt, p), d, idx, r_end))
    # the tail of each partition up to the replica's end: where MM2's last copy came from, and so how many records
    # the target holds that MM2 never copied before the outage (nobody read them on the source)
    tails = {}
    for a, ws in wants.items():
        for w in ws:
            if w.replica_end and (a, w.origin_tp) not in tails:
                tails[(a, w.origin_tp)] = evidence.BackWant(("tail", a, w.origin_tp), w.replica_tp, w.origin_tp,
                                                            w.replica_end, w.index, w.replica_end)
    out = {}
    for a, ws in wants.items():
        tail_ws = [t for (ta, _tp), t in tails.items() if ta == a]
        got = evidence.prove_back(ws + tail_ws, ctx.source(a), ctx.target)
        for w in ws:
            b = got[w.key]
            out[w.key[1:]] = Exact(b.upstream, HOME_RULE_PREFIX + b.rule, w.position)
        for t in tail_ws:
            b = got[t.key]
            if b is None or b.rule != tr.DRAINED_TAIL:
                continue
            rt, p = t.origin_tp
            copied_to = b.tail_origin(t.replica_end) + 1
            if snap.replica_end.get((rt, p), 0) > copied_to:
                notes.append(f"failing back: {rt}[{p}] holds {snap.replica_end[(rt, p)] - copied_to} record(s) (offsets "
                             f"{copied_to}-{snap.replica_end[(rt, p)] - 1}) that MM2 never copied to {a} before the "
                             "outage: nobody consumed them there; the groups read them now")
    return out, notes


# ------------------------------------------------------------------------------------------ 3. checkpoints


def load_latest_checkpoints(path: Path) -> list[planmod.LatestCheckpoint]:
    """Every answer of the Spark job (all groups: the job does not select)."""
    from mm2_failover.answers import checkpoint_rows

    return [planmod.LatestCheckpoint(**r) for r in checkpoint_rows(path, [
        "source_alias", "group", "topic", "partition", "upstream_offset", "downstream_offset", "metadata"])]


def selected_checkpoints(ctx: RunContext) -> list[planmod.LatestCheckpoint]:
    """The latest checkpoints of the run's selected groups and aliases: only once the job's summary, which it writes
    last and atomically (and which every submission deletes first), says it finished (a job killed while writing
    may leave answers that are partial: never read)."""
    f = ctx.folder
    if not f.checkpoints.exists():
        raise RunFolderError(f"no latest checkpoints at {f.checkpoints}: compute_latest_checkpoints must run first")
    summary = f.load_summary()
    if summary is None:
        raise RunFolderError(f"the latest checkpoints at {f.checkpoints} have no summary ({f.checkpoints_summary}): "
                             "the Spark job did not finish (killed or failed while writing), so they may be partial "
                             "and are not read. Run compute_latest_checkpoints again (clear the task, or the CLI's "
                             "checkpoints step): it rewrites them.")
    aliases = set(ctx.aliases)
    return [c for c in load_latest_checkpoints(f.checkpoints) if c.source_alias in aliases and ctx.selection.selects(c.group)]


# ------------------------------------------------------------------------------------------ 4. gate


def live_groups(cluster: Cluster, groups: list[str]) -> list[GroupState]:
    """Groups that have members (or are mid-rebalance) on ``cluster``: the broker would refuse their commits."""
    return [s for s in cluster.describe_groups(groups).values() if not s.is_safe_to_move]


def groups_to_move(ctx: RunContext) -> list[str]:
    """The selected groups of the run: those with checkpoints and those with commits on a source."""
    groups = {c.group for c in selected_checkpoints(ctx)}
    if ctx.folder.snapshot.exists():
        groups |= set(source_commits(ctx, ctx.folder.load_snapshot()))
    return sorted(groups)


def check_groups_empty(ctx: RunContext, groups: list[str], sources: bool | None = None) -> list[tuple[str, GroupState]]:
    """``(where, state)`` of every group with live members on the target, and (``source_groups_must_be_empty``) on
    every source the run decided reachable. A source check that fails raises: it never passes with a warning."""
    if not groups:
        return []
    live = [("target", s) for s in live_groups(ctx.target, groups)]
    if ctx.params.source_groups_must_be_empty if sources is None else sources:
        for alias, source in ctx.sources().items():
            live += [(f"source {alias}", s) for s in live_groups(source, groups)]
    return live


def early_gate(ctx: RunContext) -> list[tuple[str, GroupState]]:
    """Before the (slow) computation: live members of any selected group known to the target or a source."""
    candidates = set(ctx.selection.select(ctx.target.groups()))
    for source in ctx.sources().values():
        candidates |= set(ctx.selection.select(source.groups()))
    return check_groups_empty(ctx, sorted(candidates))


def describe_live(live: list[tuple[str, GroupState]]) -> str:
    return f"{len(live)} group(s) still have live members:\n" + "\n".join(f"  on {w}: {s.describe()}" for w, s in live)


# ------------------------------------------------------------------------------------------ 5. plan


def make_plan(ctx: RunContext) -> planmod.Plan:
    """Build the plan once per run (a retry reloads it, so 'current' keeps meaning 'before this run')."""
    f, p = ctx.folder, ctx.params
    if f.plan_json.exists():
        log.info("plan already built for this run: reusing %s", f.plan_json)
        return planmod.Plan.from_dicts(f.load(PLAN_JSON)["rows"])
    summary = f.load_summary()
    refusal = planmod.quarantine_refusal(summary.raw if summary else None, p.max_quarantined_records)
    if refusal:
        raise planmod.PlanError(refusal)
    snap = f.load_snapshot()
    cps = selected_checkpoints(ctx)
    src = source_commits(ctx, snap)
    groups = sorted({c.group for c in cps} | set(src))
    current = ctx.target.commits_many(groups, p.apply_concurrency)
    bounds = {tp: planmod.PartitionBounds(snap.replica_start[tp], snap.replica_end[tp]) for tp in snap.replica_end}
    exact, notes, at_least = exact_translations(ctx, snap, cps, src)
    home, home_notes = home_translations(ctx, snap, src)
    exact, notes = {**exact, **home}, notes + home_notes
    src_meta = {(g, rt, part): c.metadata for g, cs in src.items() for (_a, rt, part), c in cs.items()}
    plan = planmod.build_plan(
        cps, bounds, {g: {tp: c.offset for tp, c in cs.items()} for g, cs in current.items()},
        snap.replica_partitions, on_existing_target_offsets=p.on_existing_target_offsets, allow_rewind=p.allow_rewind,
        source_commits={g: {k: c.offset for k, c in cs.items()} for g, cs in src.items()},
        accept_groups_without_checkpoints=p.accept_groups_without_checkpoints,
        exact={k: planmod.Proven(e.offset, e.rule, e.source_position, src_meta.get(k, "")) for k, e in exact.items()},
        positions_at_least=at_least)
    built = now_iso()
    rules: dict[str, int] = {}
    for r in plan.rows:
        if r.writes:
            rules[r.rule] = rules.get(r.rule, 0) + 1
    f.save(PLAN_JSON, {"built_at": built, "params": p.as_dict(), "counts": plan.counts(), "rules": rules,
                       "translation_notes": notes,
                       "snapshot_captured_at": snap.captured_at,
                       "snapshot_age_seconds": age_seconds(snap.captured_at, datetime.fromisoformat(built)),
                       "rows": plan.as_dicts()})
    write_text(f.plan_csv, plan.to_reset_csv())
    log.info("plan: %d group(s), %s, offsets by rule %s; written to %s and %s", len(plan.groups()), plan.counts(), rules,
             f.plan_json, f.plan_csv)
    return plan


# ------------------------------------------------------------------------------------------ 6. backup and apply


@contextlib.contextmanager
def writer_lock(ctx_or_target, what: str, wait_s: float, run: str = ""):
    """Hold the target cluster's writer lock (see :mod:`mm2_failover.locks`) while writing offsets."""
    from mm2_failover import config, locks

    target = ctx_or_target.target if isinstance(ctx_or_target, RunContext) else ctx_or_target
    run = run or (f"{ctx_or_target.dag_id}/{ctx_or_target.run_id}" if isinstance(ctx_or_target, RunContext) else "")
    with locks.writer_lock(config.artifacts_root(), target.cluster_id(), {"writer": what, "run": run}, wait_s) as rec:
        yield rec


def take_backup(ctx: RunContext, plan: planmod.Plan) -> Backup:
    """Store, for every partition apply will write, the target's commit before the run (or none) and the commit
    apply writes. Taken before the first write; never replaced (a retry keeps the state from before the run)."""
    f = ctx.folder
    existing = f.load_backup()
    if existing is not None:
        return existing
    writes = plan.commits()
    current = ctx.target.commits_many(sorted(writes), ctx.params.apply_concurrency)
    backup = Backup(now_iso(), str(ctx.target.conf.get("bootstrap.servers")), ctx.target.cluster_id(), ctx.dag_id,
                    ctx.run_id, {g: {tp: BackupEntry(current.get(g, {}).get(tp), c) for tp, c in parts.items()}
                                 for g, parts in writes.items()})
    f.save_backup(backup)
    return backup


@dataclass
class ApplyResult:
    applied: dict[str, int] = field(default_factory=dict)  # group -> partitions written now
    unchanged: list[str] = field(default_factory=list)  # groups that already held the plan
    refused: dict[str, str] = field(default_factory=dict)  # group -> broker's error
    moved_since: dict[str, list[str]] = field(default_factory=dict)  # group -> partitions committed since (plan rule 5)

    def as_dict(self) -> dict:
        return {"applied": self.applied, "unchanged": self.unchanged, "refused": self.refused,
                "moved_since": self.moved_since}


def _befores(backup: Backup) -> dict[str, dict[TP, Commit | None]]:
    return {g: {tp: e.before for tp, e in parts.items()} for g, parts in backup.groups.items()}


def _describe_moved(moved: dict, plan: planmod.Plan) -> dict[str, list[str]]:
    want = plan.commits()

    def show(c) -> str:
        return "none" if c is None else str(c.offset if isinstance(c, Commit) else c)

    return {g: [f"{t}[{p}]: was {show(was)} before the run, planned {want[g][(t, p)].offset}, now {show(now)}"
                for (t, p), (was, now) in sorted(parts.items())] for g, parts in sorted(moved.items())}


def apply_plan(target: Cluster, plan: planmod.Plan, concurrency: int = 32, backup: Backup | None = None) -> ApplyResult:
    """One ``alter_consumer_group_offsets`` request per group, ``concurrency`` at a time. Writes only what
    differs from the target's current commits (offset and metadata), and, given the run's ``backup``, never a
    partition committed since the backup (plan rule 5: reported in ``moved_since``); a refused group does not stop
    the others."""
    groups = sorted(plan.commits())
    current = target.commits_many(groups, concurrency)
    before = None if backup is None else _befores(backup)
    todo = planmod.diff_to_apply(plan, current, before)
    moved = _describe_moved(planmod.moved_since(plan, current, before), plan) if before is not None else {}
    for g, what in moved.items():
        log.warning("group %s: NOT rewritten, committed on the target since this run's backup (its consumers read "
                    "there): %s", g, "; ".join(what))
    res = ApplyResult(unchanged=[g for g in groups if g not in todo and g not in moved], moved_since=moved)
    t0, done = time.monotonic(), 0
    batch = 1000  # progress in the task log every batch
    names = sorted(todo)
    for i in range(0, len(names), batch):
        chunk = names[i:i + batch]
        for group, err in target.alter_many({g: todo[g] for g in chunk}, window=concurrency).items():
            if err:
                res.refused[group] = err
                log.error("group %s NOT moved: %s", group, err)
            else:
                res.applied[group] = len(todo[group])
        done += len(chunk)
        log.info("apply progress: %d/%d group(s), %d refused, %.1f s", done, len(names), len(res.refused),
                 time.monotonic() - t0)
    return res


def backup_and_apply(ctx: RunContext, plan: planmod.Plan) -> ApplyResult:
    """Under the target's writer lock: the backup (once), then apply, then the result in ``apply.json``."""
    with writer_lock(ctx, "failover apply", ctx.params.lock_wait_seconds):
        faults.hit("apply.locked")
        backup = take_backup(ctx, plan)
        log.info("backup of the target's commits before this run: %s (rollback restores exactly this)",
                 ctx.folder.backup)
        faults.hit("apply.after_backup")
        res = apply_plan(ctx.target, plan, ctx.params.apply_concurrency, backup)
        faults.hit("apply.after_commits")  # drills: killed between apply and verify
        ctx.folder.save("apply.json", res.as_dict())
    log.info("applied: %d group(s) written, %d already as planned, %d refused", len(res.applied), len(res.unchanged),
             len(res.refused))
    return res


# ------------------------------------------------------------------------------------------ 7. verify


def lost_to_retention_exact(ctx: RunContext, plan: planmod.Plan, snap: Snapshot, scan: int = 2000) -> dict:
    """For partitions clamped to the replica's log start, where the group's source commit U is known: find the
    source offset u of the replica's first record (same key, value and timestamp on the source) and count the
    offsets [U, u) the group had not read and that are gone: exactly what was lost. Partitions where the record is
    not found within ``scan`` records of its timestamp keep the upper bound."""
    src = source_commits(ctx, snap)
    out = {}
    for r in plan.rows:
        if r.reason != planmod.RETENTION_GAP or not r.retention_gap:
            continue
        commit = src.get(r.group, {}).get((r.source_alias, r.topic, r.partition))
        source = ctx.source(r.source_alias) if r.source_alias in ctx.aliases else None
        if commit is None or source is None:
            continue
        u = find_source_offset(ctx.target, source, ctx.policies[r.source_alias].source_topic(r.topic), r.topic,
                               r.partition, r.log_start, scan)
        if u is not None:
            out[(r.group, r.topic, r.partition)] = max(0, u - commit.offset)
    return out


def find_source_offset(target: Cluster, source: Cluster, source_topic: str, replica_topic: str, partition: int,
                       downstream: int, scan: int) -> int | None:
    """The source offset of the record MM2 copied to ``replica_topic[partition]@downstream`` (None: not found): the
    same record (:meth:`~mm2_failover.evidence.Record.same_content`) within ``scan`` records of its timestamp."""
    rtp, stp = (replica_topic, partition), (source_topic, partition)
    got = target.records({rtp: (downstream, downstream + 1)})[rtp]
    if not got:
        return None
    start = source.offset_for_time(stp, got[0].timestamp_ms)
    if start is None:
        return None
    end = source.offsets([stp])[stp]
    return next((r.offset for r in source.records({stp: (start, min(end, start + scan))})[stp]
                 if r.same_content(got[0])), None)


def verify_run(ctx: RunContext, plan: planmod.Plan, dry_run: bool | None = None, refused: dict[str, str] | None = None,
               warnings: list[str] | None = None) -> dict:
    """Read every planned group back, compare with the plan, and write report.json, report.md and summary.json."""
    f, p = ctx.folder, ctx.params
    dry_run = p.dry_run if dry_run is None else dry_run
    committed = ctx.target.commits_many(plan.groups(), p.apply_concurrency)
    backup = None if dry_run else f.load_backup()
    since = {} if backup is None else planmod.moved_since(plan, committed, _befores(backup))
    mismatches = [] if dry_run else [m for m in planmod.verify(plan, committed)
                                     if (m.topic, m.partition) not in since.get(m.group, {})]
    moved = _describe_moved(since, plan)
    tps = sorted({(r.topic, r.partition) for r in plan.rows})
    log_end = ctx.target.offsets(tps) if tps else {}
    summary = f.load_summary()
    snap = f.load_snapshot()
    drain = f.load_drain()
    warnings = list(warnings or [])
    if snap.disaster_aliases:
        warnings.append(f"DISASTER MODE for source alias(es) {', '.join(snap.disaster_aliases)}: their clusters were "
                        "not reachable (or declared lost); producer and source-group checks were skipped for them. "
                        f"Data-loss window: {drain.get('rpo')}")
    built = f.load(PLAN_JSON, {})
    warnings += built.get("translation_notes") or []
    warnings += [f"group {g} moved since this run's backup, NOT rewritten (its consumers committed on the target "
                 f"after the first apply; a retry never rewinds them): {'; '.join(what)}" for g, what in moved.items()]
    warnings += [f"pre-flight audit, alias {a['alias']}, {a['rule']}: {a['message']}"
                 for a in f.load(AUDIT, {}).get("findings", []) if a["severity"] == "warning"]
    src = {(g, rt, part): c.offset for g, cs in source_commits(ctx, snap).items() for (_a, rt, part), c in cs.items()}
    lost = {} if dry_run and not any(r.retention_gap for r in plan.rows) else lost_to_retention_exact(ctx, plan, snap)
    rep = reportmod.build_report(
        dag_id=ctx.dag_id, run_id=ctx.run_id, params=p.as_dict(), plan=plan, committed=committed, log_end=log_end,
        mismatches=mismatches, refused=refused, dry_run=dry_run, checkpoints_summary=summary.raw if summary else {},
        warnings=warnings, source_commits=src, lost_exact=lost,
        snapshot={"captured_at": snap.captured_at, "age_seconds": built.get("snapshot_age_seconds"),
                  "disaster_aliases": snap.disaster_aliases})
    rep["artifacts"] = str(f.dir)
    rep["rpo"] = drain.get("rpo")
    rep["moved_since"] = moved
    write_json(f.report_json, rep)
    write_text(f.report_md, reportmod.render_markdown(rep))
    f.save("summary.json", reportmod.run_summary(ctx.dag_id, ctx.run_id, rep, None, now_iso()))
    return rep


# ------------------------------------------------------------------------------------------ rollback


def backup_path_of(backup_path: str | None, failover_run_id: str | None) -> Path:
    """The backup a rollback restores: ``backup_path``, or the backup of the mm2_failover run ``failover_run_id``."""
    from mm2_failover.config import run_dir

    if backup_path:
        return Path(backup_path)
    if failover_run_id:
        return RunFolder(run_dir("mm2_failover", failover_run_id)).backup
    raise ValueError("give failover_run_id (the mm2_failover run to undo) or backup_path")


def check_backup_cluster(target: Cluster, backup: Backup, path) -> None:
    """Rollback rule 2: a backup is restored only on the cluster it was taken on."""
    if not backup.cluster_id:
        raise KafkaConfigError(f"backup {path} has no cluster id: it was not written by apply_group_offsets")
    here = target.cluster_id()
    if here != backup.cluster_id:
        raise KafkaConfigError(f"backup {path} was taken on cluster {backup.cluster_id} ({backup.cluster}), but the "
                               f"target is cluster {here} ({target.conf.get('bootstrap.servers')}): nothing was "
                               "written. Point the rollback at the cluster the failover wrote to.")


def journal_dir(backup: Backup) -> Path:
    """Where ``backup``'s rollback journals live, for every entry point (rollback rule 6)."""
    from mm2_failover.config import artifacts_root

    return rb.journal_dir(artifacts_root(), backup)


def rollback(target: Cluster, backup: Backup, concurrency: int, force: bool = False,
             backup_path: str = "backup") -> ApplyResult:
    """Restore exactly the commits ``backup`` saved, on the partitions the failover wrote (see
    :mod:`mm2_failover.rollback` for the rules). Idempotent; refused groups are reported and the others proceed.
    Raises RollbackRefused when commits moved since the failover (unless ``force``), or while another backup's
    journal is pending on the same target."""
    from mm2_failover.config import artifacts_root

    check_backup_cluster(target, backup, backup_path)
    others = rb.pending_elsewhere(artifacts_root(), backup)
    if others:
        raise RollbackRefused(
            "another rollback on this target was interrupted and its journal is pending: "
            + "; ".join(f"backup {o.get('backup_path', '?')} ({o['groups']} group(s) deleted and not re-committed yet; "
                        f"journal {o['journal']})" for o in others)
            + ". Nothing was written. Finish that rollback first (run it again with that backup: it resumes from its "
            "journal), then this one.")
    groups = sorted(backup.groups)
    jdir = journal_dir(backup)
    journals = {g: jdir / rb.journal_name(g) for g in groups}
    resuming = {g for g, j in journals.items() if j.exists()}
    current = target.commits_many(groups, concurrency)
    moved = rb.moved_since_failover(backup, current, skip=resuming)
    if moved and not force:
        raise RollbackRefused(
            f"{len(moved)} partition(s) were committed on the target since the failover: {rb.describe_moved(moved)}. "
            "Nothing was written. A rollback would rewind these consumers; stop them and roll back with --force "
            "(DAG: force=true) if that is what you want.")
    if moved:
        log.warning("forced rollback overwrites commits made since the failover: %s", rb.describe_moved(moved))
    todo = rb.actions(backup, current)
    res = ApplyResult(unchanged=[g for g in groups if g not in todo and g not in resuming])

    def one(group: str):
        journal = journals[group]
        try:
            if journal.exists():  # a previous attempt saw the group before deleting it: finish what it started
                rec = read_json(journal, "rollback journal")
                recommit = {(t, int(p)): Commit(int(o), m or "") for t, p, o, m in rec["recommit"]}
                target.delete_group(group, missing_ok=True)
                faults.hit("rollback.after_delete_group")
            elif todo[group].needs_delete:
                recommit = rb.recommit_after_delete(backup, group, current.get(group, {}))
                write_json(journal, {"group": group, "written_at": now_iso(),
                                     "recommit": [[t, p, c.offset, c.metadata] for (t, p), c in sorted(recommit.items())]})
                faults.hit("rollback.after_journal")
                target.delete_group(group, missing_ok=True)
                faults.hit("rollback.after_delete_group")
            else:
                recommit = todo[group].restore
            if recommit:
                errs = {tp: e for tp, e in target.alter_offsets(group, recommit).items() if e}
                if errs:
                    return group, None, f"partition errors: {errs}"
            journal.unlink(missing_ok=True)
        except Exception as e:  # noqa: BLE001 - reported per group; the others proceed
            return group, None, f"{type(e).__name__}: {e}"
        return group, len(recommit), None

    jdir.mkdir(parents=True, exist_ok=True)
    pointer = jdir / rb.POINTER
    if not pointer.exists():
        write_json(pointer, {"backup_path": str(backup_path), "dag_id": backup.dag_id, "run_id": backup.run_id,
                             "taken_at": backup.taken_at})
    with ThreadPoolExecutor(max(1, concurrency)) as pool:
        for group, n, err in pool.map(one, sorted(set(todo) | resuming)):
            if err:
                res.refused[group] = err
                log.error("group %s NOT rolled back: %s", group, err)
            else:
                res.applied[group] = n
    return res


def verify_rollback(target: Cluster, backup: Backup, concurrency: int = 32) -> list[str]:
    return rb.remaining(backup, target.commits_many(sorted(backup.groups), concurrency))


__all__ = ["ApplyResult", "ConfigurationError", "NotDrained", "RollbackRefused", "RunFolder", "RunFolderError"]
