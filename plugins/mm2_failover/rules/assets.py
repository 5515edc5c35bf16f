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
4. **In parts, after verify** (:func:`parts`, :func:`part`): the events go out from ``announce_moved_groups``, a task
   mapped over the parts of :data:`PART_SIZE` groups that ``announcement_parts`` lists after verify. A task's outlet events reach Airflow's API
   server in the one request that ends the task, and the worker waits 5 s for it (``[workers]
   execution_api_timeout``) then sends it again: 10k groups' events in verify's end took longer than that here (the
   bed's SQLite), the second request met the first's new Assets (``UNIQUE constraint failed: asset.name,
   asset.uri``) and a verified failover ended failed. Verify's outcome no longer depends on it; each request
   carries at most :data:`PART_SIZE` events, and :data:`PARTS_AT_ONCE` part runs at a time: four parts of 500 at
   once took the request past 5 s again, and two parts of 250 at once took 1.0-4.3 s, longer as more Assets were
   linked to the alias (10k groups on the bed's SQLite). One part of 250 at a time then took 6.1 s once on a busier
   day (each new Asset ~24 ms) and failed the same way: parts of 100.
"""

from __future__ import annotations

from urllib.parse import quote

ALIAS = "mm2_failover_moved_groups"
SCHEME = "x-mm2-failover"
PART_SIZE = 100
PARTS_AT_ONCE = 1  # parts in flight at once in one run (their requests share the metadata DB)


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


def parts(events_count: int, size: int = PART_SIZE) -> list[dict]:
    """Rule 4: the mapped task's arguments, one per part of ``size`` events (none: nothing to announce)."""
    n = -(-max(0, events_count) // size)
    return [{"index": i, "of": n, "size": size} for i in range(n)]


def part(all_events: list[tuple[str, str, dict]], arg: dict) -> list[tuple[str, str, dict]]:
    """Rule 4: the events of one part (``all_events`` in :func:`events`' order, sorted by group)."""
    i, size = int(arg["index"]), int(arg["size"])
    return all_events[i * size : (i + 1) * size]
