"""Telling the applications (issue 33): once a failover has verified a group on the target, one Airflow Asset event
for that group, so an application team's own DAG can restart the group's consumers there. Pure functions; the
``announce_moved_groups`` task (after verify, in parts: rule 4) emits what :func:`events` returns, through the
:data:`ALIAS` asset alias.

1. **One Asset per consumer group** (:func:`group_asset`): name ``mm2-failover/consumer-group/<group>``, URI
   ``x-mm2-failover://consumer-group/<group, percent-encoded>`` (``x-``: a custom scheme Airflow keeps as it is). An
   application's DAG schedules on it (docs/runbook.md, "Telling the applications").
2. **Only verified moves** (:func:`events`): a group gets an event when the verified report says it moved - never a
   group skipped, refused by the broker, or not reading back as planned, and never for a dry run or a plan not
   applied. Its offsets are the partitions that read back as planned.
3. **What the event says** (its extra): the target cluster (its id, and the Airflow connection the failover used),
   the group, the failover's DAG and run, the replica topics and the committed offset of each partition.
4. **In parts, after verify** (:func:`parts`, :func:`part`, :func:`part_size`): the events go out from
   ``announce_moved_groups``, a task mapped over the parts ``announcement_parts`` lists after verify, at most
   :data:`PARTS_AT_ONCE` parts at a time. A task's outlet events reach Airflow's API server in the one request that
   ends the task, and the worker waits 5 s for it (``[workers] execution_api_timeout``), then sends it again: 10k
   groups' events in verify's end took longer than that (the bed's SQLite), the second request met the first's new
   Assets (``UNIQUE constraint failed: asset.name, asset.uri``) and a verified failover ended failed. So a part is
   sized for its request to end well within 5 s on the metadata database the API server uses (``[database]
   sql_alchemy_conn``'s scheme; a worker that does not know it gets the smaller size):

   - **PostgreSQL (and other server databases): parts of 250, two at a time.** Airflow stores an Asset event with
     ~10 ORM statements, ~3 ms of the API server's CPU each (py-spy), 5-10 ms of wall time on 2 cores. Two parts of
     250 at once took ~2.5 s per request, and 10k events were all stored 72 s after the first part; one part of 100
     at a time took 274-628 s (a mapped task's start and scheduling per part), parts of 500 two at a time took
     5.2-6.3 s per request (past the 5 s), one part of 10,000 over 10 s.
   - **SQLite (the demo's): parts of 50, two at a time**: each new Asset ~24 ms there, and SQLite takes one writer
     at a time.
   - ``[mm2_failover] asset_events_per_part`` (1 to 1000) overrides both: a worker whose configuration does not name
     the database, or a deployment's own measurement.
"""

from __future__ import annotations

from urllib.parse import quote

ALIAS = "mm2_failover_moved_groups"
SCHEME = "x-mm2-failover"
PART_SIZE = 250  # events per part on PostgreSQL (rule 4)
PART_SIZE_SQLITE = 50  # events per part on SQLite, or where the database is not known (rule 4)
PARTS_AT_ONCE = 2  # parts in flight at once in one run (their requests share the API server and the metadata DB)


def group_asset(group: str) -> tuple[str, str]:
    """Rule 1: (name, uri) of a consumer group's Asset."""
    return f"mm2-failover/consumer-group/{group}", f"{SCHEME}://consumer-group/{quote(group, safe='')}"


def events(report: dict, *, target_cluster_id: str, target_conn_id: str) -> list[tuple[str, str, dict]]:
    """Rules 2-3: ``(name, uri, extra)`` per group the verified ``report`` (its published form) says moved."""
    if report.get("dry_run") or report.get("outcome") not in ("succeeded", "failed"):
        return []
    moved = {g["group"] for g in report.get("groups") or [] if str(g.get("fate", "")).startswith("moved")}
    offsets: dict[str, dict[str, dict[str, int]]] = {}
    for p in report.get("partitions") or []:
        if p.get("group") in moved and p.get("verified") and p.get("committed_after") is not None:
            offsets.setdefault(p["group"], {}).setdefault(p["topic"], {})[str(p["partition"])] = p["committed_after"]
    out = []
    for g in sorted(moved):
        name, uri = group_asset(g)
        topics = offsets.get(g, {})
        out.append(
            (
                name,
                uri,
                {
                    "group": g,
                    "target_cluster_id": target_cluster_id,
                    "target_connection": target_conn_id,
                    "failover_dag_id": report.get("dag_id"),
                    "failover_run_id": report.get("run_id"),
                    "replica_topics": sorted(topics),
                    "offsets": {
                        t: dict(sorted(ps.items(), key=lambda kv: int(kv[0]))) for t, ps in sorted(topics.items())
                    },
                },
            )
        )
    return out


def part_size(sql_alchemy_conn: str | None, configured: str | None = None) -> int:
    """Rule 4: the events per part - ``configured`` (``[mm2_failover] asset_events_per_part``, 1 to 1000) when set,
    else by the API server's metadata database, given by its SQLAlchemy URL (None or SQLite: the smaller size)."""
    if configured is not None and str(configured).strip():
        raw = str(configured).strip()
        n = int(raw) if raw.isdigit() else 0
        if not 1 <= n <= 1000:
            raise ValueError(
                f"[mm2_failover] asset_events_per_part={raw!r}: give a whole number from 1 to 1000 (the Asset events "
                f"sent in one request; unset: {PART_SIZE} on PostgreSQL, {PART_SIZE_SQLITE} on SQLite)"
            )
        return n
    scheme = (sql_alchemy_conn or "").split(":", 1)[0].split("+", 1)[0].strip().lower()
    return PART_SIZE_SQLITE if scheme in ("", "sqlite") else PART_SIZE


def parts(events_count: int, size: int = PART_SIZE) -> list[dict]:
    """Rule 4: the mapped task's arguments, one per part of ``size`` events (none: nothing to announce)."""
    n = -(-max(0, events_count) // size)
    return [{"index": i, "of": n, "size": size} for i in range(n)]


def part(all_events: list[tuple[str, str, dict]], arg: dict) -> list[tuple[str, str, dict]]:
    """Rule 4: the events of one part (``all_events`` in :func:`events`' order, sorted by group)."""
    i, size = int(arg["index"]), int(arg["size"])
    return all_events[i * size : (i + 1) * size]
