"""Telling the applications (issue 33): once a failover has verified a group on the target, one Airflow Asset event
for that group, so an application team's own DAG can restart the group's consumers there. Pure functions; the
``verify_group_offsets`` task emits what :func:`events` returns, through the :data:`ALIAS` asset alias.

1. **One Asset per consumer group** (:func:`group_asset`): name ``mm2-failover/consumer-group/<group>``, URI
   ``x-mm2-failover://consumer-group/<group, percent-encoded>`` (``x-``: a custom scheme Airflow keeps as it is). An
   application's DAG schedules on it (README, "Telling the applications").
2. **Only verified moves** (:func:`events`): a group gets an event when the verified report says it moved - never a
   group skipped, refused by the broker, or not reading back as planned, and never for a dry run or a plan not
   applied. Its offsets are the partitions that read back as planned.
3. **What the event says** (its extra): the target cluster (its id, and the Airflow connection the failover used),
   the group, the failover's DAG and run, the replica topics and the committed offset of each partition.
"""

from __future__ import annotations

from urllib.parse import quote

ALIAS = "mm2_failover_moved_groups"
SCHEME = "x-mm2-failover"


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
        out.append((name, uri, {
            "group": g, "target_cluster_id": target_cluster_id, "target_connection": target_conn_id,
            "failover_dag_id": report.get("dag_id"), "failover_run_id": report.get("run_id"),
            "replica_topics": sorted(topics), "offsets": {t: dict(sorted(ps.items(), key=lambda kv: int(kv[0])))
                                                         for t, ps in sorted(topics.items())}}))
    return out
