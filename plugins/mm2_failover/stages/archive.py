"""MM2's offset syncs and checkpoint records kept in the archive on the target side (:mod:`mm2_failover.adapters.syncs`): the
scheduled archive and a failover's own capture."""

from __future__ import annotations

import logging
from datetime import datetime

from mm2_failover.adapters.config import archive_root
from mm2_failover.adapters.kafka.cluster import Cluster
from mm2_failover.adapters.runfolder import commits_from_json, commits_to_json, now_iso, read_json, write_json
from mm2_failover.adapters.syncs import CheckpointArchive, SyncArchive
from mm2_failover.rules.naming import offset_syncs_topics
from mm2_failover.stages.context import RunContext
from mm2_failover.stages.errors import ConfigurationError

log = logging.getLogger(__name__)

SCHEDULED = "scheduled-archive.json"  # when the scheduled archive last succeeded, per alias (readiness reads it)


def record_scheduled(aliases: list[str]) -> None:
    """The scheduled archive succeeded now for ``aliases`` (a failover's own capture never writes this: readiness
    measures the archive DAG, not the failovers)."""
    p = archive_root() / SCHEDULED
    done = read_json(p, "scheduled archive record") if p.exists() else {}
    write_json(p, {**done, **{a: now_iso() for a in aliases}})


FAILURES = "scheduled-archive-failures.json"  # the archive DAG's final task failures, newest last (readiness reads it)
ARCHIVE_DAG = "mm2_sync_archive"
KEEP_FAILURES = 50


def record_failure(run_id: str, task_id: str, reason: str) -> None:
    """A task of the archive DAG failed for good (its failure notifier calls this): kept, the newest
    :data:`KEEP_FAILURES`, so that readiness counts the failed runs since the archive last succeeded - the archive
    task's own record says nothing of a run whose state refresh failed after it."""
    p = archive_root() / FAILURES
    try:
        seen = list(read_json(p, "archive failure record")) if p.exists() else []
    except Exception:  # noqa: BLE001 - a damaged record is started again, never a second failure
        seen = []
    seen.append({"run_id": run_id, "task_id": task_id, "at": now_iso(), "reason": (reason or "")[:500]})
    write_json(p, seen[-KEEP_FAILURES:])


def failures() -> list[dict]:
    """The archive DAG's recorded failures (:func:`record_failure`), oldest first; [] when none or unreadable."""
    p = archive_root() / FAILURES
    try:
        return list(read_json(p, "archive failure record")) if p.exists() else []
    except Exception as e:  # noqa: BLE001 - told in the log; readiness goes on
        log.warning("%s cannot be read (%s): the archive's failures are unknown", p, e)
        return []


def last_scheduled() -> dict[str, str]:
    """alias -> when the scheduled archive last succeeded for it (absent: never, or not since this record exists)."""
    p = archive_root() / SCHEDULED
    try:
        return dict(read_json(p, "scheduled archive record")) if p.exists() else {}
    except Exception as e:  # noqa: BLE001 - unknown is "never": told, never a failed readiness interval
        log.warning("%s cannot be read (%s): the archive's age is unknown", p, e)
        return {}


def sync_cluster(ctx: RunContext, alias: str) -> Cluster | None:
    """The cluster holding ``alias``'s offset-sync topic (MM2's offset-syncs.topic.location), None when lost."""
    return ctx.target if ctx.params.offset_syncs_location == "target" else ctx.source(alias)


def sync_topic(ctx: RunContext, alias: str, cluster: Cluster) -> tuple[str | None, str]:
    """(the offset-sync topic of ``alias``, or None and why)."""
    topics = cluster.topics()
    if ctx.params.mm2_target_alias:
        t = ctx.policies[alias].offset_syncs_topic(ctx.params.mm2_target_alias)
        return (t, "") if t in topics else (None, f"offset-sync topic {t} not found on the {cluster.name} cluster")
    found = sorted(offset_syncs_topics(topics))
    if len(found) == 1:
        return found[0], ""
    if not found:
        return (
            None,
            f"no offset-sync topic on the {cluster.name} cluster (offset_syncs_location="
            f"{ctx.params.offset_syncs_location})",
        )
    return None, f"several offset-sync topics on the {cluster.name} cluster ({', '.join(found)}): set mm2_target_alias"


def archive_offset_syncs(ctx: RunContext) -> dict[str, dict]:
    """The scheduled archive (DAG ``mm2_sync_archive``, CLI ``archive``): append every alias's new offset syncs, and
    its new checkpoint records, to the archive. Unlike the failover's own append, a failure here fails (the archive
    must be kept alive)."""
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
        log.info(
            "alias %s: %d offset sync(s) archived from %s (%s)%s",
            alias,
            res.appended,
            topic,
            loc,
            f"; {len(res.gaps)} gap(s): {res.gaps}" if res.gaps else "",
        )
        out[alias] = res.as_dict()
        cp_topic = ctx.policies[alias].checkpoints_topic
        cps = CheckpointArchive(archive_root(), alias).append(ctx.target, cp_topic, "target")
        log.info(
            "alias %s: %d checkpoint record(s) archived from %s (target)%s",
            alias,
            cps.appended,
            cp_topic,
            f"; {len(cps.gaps)} gap(s): {cps.gaps}" if cps.gaps else "",
        )
        out[alias]["checkpoints"] = cps.as_dict()
        out[alias]["positions"] = archive_positions(ctx, alias, cluster if loc == "source" else None)
    record_scheduled([a for a in ctx.aliases if "why" not in out[a]])
    return out


POSITIONS = "positions.json"  # per alias: the groups' source commits, newest reading only (plan rule 1a)


def positions_path(alias: str):
    return archive_root() / alias / POSITIONS


def archive_positions(ctx: RunContext, alias: str, source: Cluster | None = None) -> dict:
    """Keep every consumer group's commits on ``alias``'s source, with when they were read (plan rule 1a: with the
    source lost, a failover takes them where they are newer than MM2's checkpoint). Written whole, replacing the
    previous reading only once this one is complete; a source that cannot be read leaves the previous reading as it
    was (said in the log and the result, never a failed archive: the offset syncs are what the archive must keep,
    and an older reading only counts where it is newer than MM2's checkpoint)."""
    conn = ctx.source_conn_of(alias)
    if source is None and conn is None:
        return {"why": "no source connection for this alias"}
    try:
        source = source or ctx.connect(conn, f"source {alias}", ctx.timeout)
        read_from = now_iso()
        commits = source.commits_many(source.groups(), ctx.params.apply_concurrency)
        read_to = now_iso()
        cluster_id = source.cluster_id()
    except Exception as e:  # noqa: BLE001 - told; the previous reading stays
        log.warning(
            "WARNING: alias %s: the groups' source commits could not be read (%s: %s): the archive keeps its "
            "previous reading; with the source lost, MM2's checkpoints answer where it is older",
            alias,
            type(e).__name__,
            e,
        )
        return {"why": f"{type(e).__name__}: {e}"}
    groups = commits_to_json({g: cs for g, cs in commits.items() if cs})
    if not groups and (before := archived_positions(alias)) is not None and before[1]:
        log.warning(
            "WARNING: alias %s: the source listed no group with commits (a missing Describe ACL on its groups?): "
            "the archive keeps its previous reading of %s (%d group(s))",
            alias,
            before[0]["read_from"],
            len(before[1]),
        )
        return {"why": "no group with commits listed: the previous reading kept", "groups": 0}
    write_json(
        positions_path(alias),
        {"read_from": read_from, "read_to": read_to, "cluster_id": cluster_id, "groups": groups},
        compact=True,
    )
    log.info(
        "alias %s: %d group(s)' source commits archived (%d partition(s)), read %s .. %s",
        alias,
        len(groups),
        sum(len(t) for cs in groups.values() for t in cs.values()),
        read_from,
        read_to,
    )
    return {"groups": len(groups), "read_from": read_from, "read_to": read_to}


def archived_positions(alias: str) -> tuple[dict, dict[str, dict]] | None:
    """The archive's newest reading of ``alias``'s groups' source commits: ({"read_from", "read_to", "cluster_id"},
    group -> {(source topic, partition): commit}), or None when there is none or it cannot be read (said in the
    log: MM2's checkpoints answer)."""

    p = positions_path(alias)
    try:
        if not p.exists():
            return None
        d = read_json(p, "archived source commits")
        when = {k: d.get(k) for k in ("read_from", "read_to", "cluster_id")}
        for k in ("read_from", "read_to"):
            if not isinstance(when[k], str) or datetime.fromisoformat(when[k]).tzinfo is None:
                raise ValueError(f"{k} {when[k]!r} is not a time with its zone")
        if not isinstance(d.get("groups"), dict):
            raise ValueError(f"groups is {type(d.get('groups')).__name__}, not a mapping of group to commits")
        m = SyncArchive(archive_root(), alias).manifest()
        if m.get("location") == "source" and m.get("cluster_id") and when["cluster_id"] != m["cluster_id"]:
            raise ValueError(
                f"it was read on cluster {when['cluster_id']}, the offset syncs archived beside it on "
                f"cluster {m['cluster_id']} (the source)"
            )
        return when, commits_from_json(d["groups"])
    except Exception as e:  # noqa: BLE001 - told; the run goes on with MM2's checkpoints
        log.warning(
            "WARNING: alias %s: the archived source commits %s cannot be read (%s: %s): MM2's checkpoints "
            "answer for this alias's positions; the archive's next run replaces the file",
            alias,
            p,
            type(e).__name__,
            e,
        )
        return None


def capture_syncs(ctx: RunContext, alias: str) -> dict:
    """Archive ``alias``'s offset syncs up to now (the archive then holds every sync up to the end offsets captured
    here), or, when their cluster is lost, say what the archive holds. Never fails the run: without syncs, the plan
    uses MM2's checkpoints (said in the report)."""
    if ctx.params.translation != "exact":
        return {"why": "translation=checkpoint"}
    archive = SyncArchive(archive_root(), alias)
    loc = ctx.params.offset_syncs_location
    cluster = sync_cluster(ctx, alias)
    if cluster is None:
        m = archive.manifest()
        if not m:
            return {"why": "the offset syncs live on the lost source and were never archived"}
        log.warning(
            "alias %s: the source is lost; exact translation uses the archived offset syncs (archived up to %s)",
            alias,
            m.get("updated_at"),
        )
        return {"topic": m["topic"], "location": loc, "end": archive.archived_to(), "archive_only": True}
    try:
        topic, why = sync_topic(ctx, alias, cluster)
        if topic is None:
            log.warning("alias %s: %s: MM2's checkpoints will be used", alias, why)
            return {"why": why}
        end = {p: o for (_t, p), o in cluster.offsets(cluster.partitions([topic])).items()}
        res = archive.append(cluster, topic, loc)
    except Exception as e:  # noqa: BLE001 - the checkpoints remain; the report says why
        log.warning(
            "alias %s: could not archive the offset syncs (%s: %s): MM2's checkpoints will be used",
            alias,
            type(e).__name__,
            e,
        )
        return {"why": f"{type(e).__name__}: {e}"}
    log.info("alias %s: %d offset sync(s) archived from %s (%s)", alias, res.appended, topic, loc)
    return {"topic": topic, "location": loc, "end": end, "appended": res.appended, "gaps": res.gaps}
