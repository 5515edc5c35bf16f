"""Telling the applications (issue 33): once a failover has verified a group on the target, an Airflow Asset event
for that group, so an application team's own DAG can restart the group's consumers there, and one event naming every
moved group. Pure functions; ``announcement_parts`` (after verify) lists the parts, ``announce_moved_groups``
(mapped over them, rule 4) emits what :func:`events` returns, ``announce_all_moved_groups`` what :func:`summary`
returns.

1. **One Asset per consumer group** (:func:`group_asset`): name ``mm2-failover/consumer-group/<group>``, URI
   ``x-mm2-failover://consumer-group/<group, percent-encoded>`` (``x-``: a custom scheme Airflow keeps as it is). An
   application's DAG schedules on it (docs/runbook.md, "Telling the applications").
2. **Only verified moves** (:func:`events`): a group gets an event when the verified report says it moved - never a
   group skipped, refused by the broker, or not reading back as planned, and never for a dry run or a plan not
   applied. Its offsets are the partitions that read back as planned.
3. **What the event says** (its extra): the target cluster (its id, and the Airflow connection the failover used),
   the group, the failover's DAG and run, the replica topics and the committed offset of each partition.
4. **In parts, after verify** (:func:`parts`, :func:`part`, :func:`part_size`): the group events go out from
   ``announce_moved_groups``, a task mapped over the parts ``announcement_parts`` lists, at most
   :data:`PARTS_AT_ONCE` at a time. A task's outlet events reach Airflow's API server in the one request that ends
   the task, and the worker waits 5 s for it (``[workers] execution_api_timeout``) before sending it again. A part is
   sized for that request to end well within 5 s on the metadata database the API server uses (``[database]
   sql_alchemy_conn``'s scheme; a worker that does not know it gets the smaller size), and large enough that a few
   parts carry 10k groups (each part is a task instance to schedule and start, ~1-1.5 s):

   - **PostgreSQL (and other server databases): parts of 2,500.** A group no DAG listens to costs the API server
     next to nothing (rule 5: one query finds a part's listened Assets); a listened group's event ~9 ms with two
     parts at once, ~19 ms while the runs of the events before it start (Airflow stores it with ~10 ORM statements
     and queues the listening DAG's run): four parts of 2,500 groups with 500 unpaused listeners each took 4.65 and
     4.76 s per request, then 9.44 and 9.63 s, each sent again after 5 s and answered as a duplicate, nothing lost
     (``bench/rto_bench.py --listeners 2000 --unpaused-listeners``, ``rto-20261129-122327.json``). So a part's
     request stays within 5 s while at most ~200 of its groups are listened to. 10k groups are 4 parts, two
     rounds: with 100 listened groups their events were all stored 5.5-6.1 s after verify (one part of 100 at a
     time took 274-628 s, when each group had an Asset of its own).
   - **SQLite (the demo's): parts of 500**: SQLite takes one writer at a time, ~24 ms per event.
   - ``[mm2_failover] asset_events_per_part`` (1 to 10,000) overrides both: a deployment that listens to most of its
     groups sets it lower, or a worker whose configuration does not name the database.
   The parts (and the leaf of rule 6) have priority weight :data:`PRIORITY_WEIGHT`, absolute: Airflow's scheduler
   sends queued tasks to the executor by weight, then logical date, and a manual run has none (last). With 2,000
   unpaused listening DAGs at 10k groups, the first two parts' events started 1,000 runs, whose tasks took the
   executor's slots: the last two parts started 6.5 minutes after the first two.
5. **Only the groups a DAG listens to get their own event**: ``announce_moved_groups`` adds each group's Asset to its
   outlets when it runs (``BaseOperator.add_outlets``, as Airflow does with the Assets a TaskFlow task returns), and
   Airflow's API server stores an outlet's event only for an Asset that is active, i.e. declared by a DAG (an
   application's schedule, or a task's inlet or outlet); for any other it logs one warning ("Task has inactive
   assets"). A group whose Asset Airflow would refuse (a name or URI over 1,500 characters, or a NUL character the
   database cannot store: ``tasks.group_outlets``) is named in the task's log and left out; the part's others still
   go. So no Asset is made for a group nobody listens to: a deployment holds one Asset per listened group, not one
   per group (Airflow's scheduler checks every Asset's references once a minute, in its loop: ~2.5 s at 10k Assets,
   9 s at 20k; docs/performance.md), and the events of 10k groups cost the API server what their listened ones cost.
6. **One event naming every moved group** (:func:`summary`, on :data:`MOVED_GROUPS`, the declared outlet of
   ``announce_all_moved_groups``, a leaf task next to the parts: an outlet Airflow refuses fails that task alone):
   the target, the failover's DAG and run, how many groups moved and their names. For automation that wants every
   group in one event; none when no group moved (``announcement_parts`` skips, and so its downstream tasks: Airflow
   emits a declared outlet's event whenever its task succeeds).
"""

from __future__ import annotations

from urllib.parse import quote

SCHEME = "x-mm2-failover"
PART_SIZE = 2500  # groups per part on PostgreSQL (rule 4)
PART_SIZE_SQLITE = 500  # groups per part on SQLite, or where the database is not known (rule 4)
MAX_PART_SIZE = 10_000  # the most [mm2_failover] asset_events_per_part may say (rule 4)
PARTS_AT_ONCE = 2  # parts in flight at once in one run (their requests share the API server and the metadata DB)
PRIORITY_WEIGHT = 1000  # the announcing tasks' (absolute): ahead of the listeners' runs their events start (rule 4)
# rule 6: the Asset whose one event per failover names every moved group
MOVED_GROUPS = ("mm2-failover/moved-groups", f"{SCHEME}://moved-groups")


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


def summary(events_: list[tuple[str, str, dict]]) -> dict | None:
    """Rule 6: the extra of the one event naming every moved group (``events_`` as :func:`events` returns them, so
    only verified moves); None when no group moved."""
    if not events_:
        return None
    first = events_[0][2]
    groups = [e[2]["group"] for e in events_]
    return {
        "target_cluster_id": first["target_cluster_id"],
        "target_connection": first["target_connection"],
        "failover_dag_id": first["failover_dag_id"],
        "failover_run_id": first["failover_run_id"],
        "moved_groups": len(groups),
        "groups": groups,
    }


def part_size(sql_alchemy_conn: str | None, configured: str | None = None) -> int:
    """Rule 4: the groups per part - ``configured`` (``[mm2_failover] asset_events_per_part``, 1 to 10,000) when set,
    else by the API server's metadata database, given by its SQLAlchemy URL (None or SQLite: the smaller size)."""
    if configured is not None and str(configured).strip():
        raw = str(configured).strip()
        n = int(raw) if raw.isdigit() else 0
        if not 1 <= n <= MAX_PART_SIZE:
            raise ValueError(
                f"[mm2_failover] asset_events_per_part={raw!r}: give a whole number from 1 to {MAX_PART_SIZE:,} (the "
                f"moved groups sent in one request; unset: {PART_SIZE:,} on PostgreSQL, {PART_SIZE_SQLITE} on SQLite)"
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
