"""Counters and gauges through Airflow's own metrics (StatsD / Datadog / OpenTelemetry, whatever
``[metrics]`` configures; with metrics off Airflow's sink drops them).

Airflow 3.3's task runner initializes ``airflow.sdk.observability.stats`` (the Task SDK side of the shared
metrics module) before a task runs, so a task only calls ``Stats.incr``/``Stats.gauge``. Names are prefixed by
Airflow's ``statsd_prefix`` (``airflow`` by default): ``airflow.mm2_failover.groups_moved``. Tags (``dag_id``,
``outcome``) reach backends that take tags (Datadog, OpenTelemetry, StatsD with ``statsd_influxdb_enabled``).

After a failover (``verify_group_offsets``), counters:

==========================================  =================================================================
``mm2_failover.runs``                       1 per verified run (tag ``outcome``: succeeded / failed / dry_run)
``mm2_failover.groups_moved``               groups whose offsets were committed on the target
``mm2_failover.partitions_committed``       partitions committed (and read back as planned)
``mm2_failover.partitions_skipped``         partitions left alone (no checkpoint, target ahead, existing commits)
``mm2_failover.partitions_clamped``         checkpoints clamped to the replica's log start/end
``mm2_failover.records_lost_to_retention``  records between a checkpoint and the replica's log start
``mm2_failover.records_reread_estimate``    records the moved groups will read again (see report.py)
``mm2_failover.partitions_reread_unknown``  partitions whose re-read is not estimated (the source lost, floors)
``mm2_failover.partitions_mismatched``      partitions that did not read back as planned
``mm2_failover.groups_refused``             groups the broker refused to move
==========================================  =================================================================

After a DR drill (``mm2_failover_drill``), gauges ``mm2_failover.drill.<name>``: ``groups_covered``,
``groups_without_checkpoints``, ``partitions_without_checkpoints``, ``checkpoint_age_max_seconds``,
``replication_lag_max_records``, ``records_reread_estimate``, ``partitions_clamped``,
``records_lost_to_retention``, ``findings``.

Every readiness interval (``mm2_failover_readiness``), gauges ``mm2_failover.readiness.<name>``: ``groups``,
``groups_not_exact``, ``worst_exposure_seconds``, ``not_replicated_records``, ``groups_over_rpo``,
``reread_records``, ``archive_age_seconds``, ``checkpoint_age_max_seconds``, ``findings``.

Metrics must never fail a run: errors are logged and swallowed.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

log = logging.getLogger(__name__)

PREFIX = "mm2_failover"

# metric name (after PREFIX) -> key of report["totals"]
FAILOVER_COUNTERS: tuple[tuple[str, str], ...] = (
    ("groups_moved", "groups_moved"),
    ("partitions_committed", "committed"),
    ("partitions_skipped", "skipped"),
    ("partitions_clamped", "clamped"),
    ("records_lost_to_retention", "records_lost_to_retention"),
    ("records_reread_estimate", "records_reread_estimate"),
    ("partitions_reread_unknown", "partitions_reread_unknown"),
    ("partitions_mismatched", "mismatches"),
    ("groups_refused", "refused_groups"),
)

# gauge name (after PREFIX.drill.) -> key of drill["totals"]
DRILL_GAUGES: tuple[tuple[str, str], ...] = (
    ("groups_covered", "groups_covered"),
    ("groups_without_checkpoints", "groups_without_checkpoints"),
    ("partitions_without_checkpoints", "partitions_without_checkpoints"),
    ("checkpoint_age_max_seconds", "checkpoint_age_max_seconds"),
    ("replication_lag_max_records", "replication_lag_max_records"),
    ("records_reread_estimate", "records_reread_estimate"),
    ("partitions_clamped", "partitions_clamped"),
    ("records_lost_to_retention", "records_lost_to_retention"),
    ("findings", "findings"),
)

# gauge names (after PREFIX.readiness.) = keys of the readiness summary (mm2_failover.rules.readiness.summarize)
READINESS_GAUGES: tuple[str, ...] = (
    "groups",
    "groups_not_exact",
    "worst_exposure_seconds",
    "not_replicated_records",
    "groups_over_rpo",
    "reread_records",
    "archive_age_seconds",
    "checkpoint_age_max_seconds",
    "findings",
)


class StatsSink(Protocol):
    def incr(
        self, stat: str, count: int | None = None, rate: float | None = None, *, tags: dict | None = None
    ) -> None: ...

    def gauge(
        self, stat: str, value: float, rate: float | None = None, delta: bool | None = None, *, tags: dict | None = None
    ) -> None: ...


def airflow_stats() -> StatsSink:
    """Airflow 3.3's metrics entry point for code running in a task (the Task SDK's Stats)."""
    from airflow.sdk.observability.stats import Stats  # lazy: airflow (the CLI runs without it)

    return Stats


def failover_metrics(report: dict) -> list[tuple[str, int, dict[str, str]]]:
    """Pure: the (name, value, tags) counters for one failover report."""
    t = report.get("totals") or {}
    tags = {"dag_id": str(report.get("dag_id", "")), "outcome": str(report.get("outcome", ""))}
    out = [(f"{PREFIX}.runs", 1, tags)]
    for name, key in FAILOVER_COUNTERS:
        if t.get(key) is not None:
            out.append((f"{PREFIX}.{name}", int(t[key]), tags))
    return out


def drill_metrics(drill: dict) -> list[tuple[str, float, dict[str, str]]]:
    """Pure: the (name, value, tags) gauges for one drill report."""
    t = drill.get("totals") or {}
    tags = {"dag_id": str(drill.get("dag_id", ""))}
    return [(f"{PREFIX}.drill.{name}", float(t[key]), tags) for name, key in DRILL_GAUGES if t.get(key) is not None]


def readiness_metrics(summary: dict, dag_id: str) -> list[tuple[str, float, dict[str, str]]]:
    """Pure: the (name, value, tags) gauges for one readiness interval (unknown values are not sent)."""
    return [
        (f"{PREFIX}.readiness.{k}", float(summary[k]), {"dag_id": dag_id})
        for k in READINESS_GAUGES
        if summary.get(k) is not None
    ]


def emit_metrics(report: dict, stats: StatsSink | None = None) -> list[tuple[str, int, dict[str, str]]]:
    """Emit the failover counters (see the module doc) through ``stats`` (default: Airflow's Stats).
    Returns what was emitted. Never raises."""
    emitted: list[tuple[str, Any, dict[str, str]]] = []
    try:
        sink = stats or airflow_stats()
        for name, value, tags in failover_metrics(report):
            sink.incr(name, count=value, tags=tags)
            emitted.append((name, value, tags))
    except Exception as e:  # noqa: BLE001 - metrics never fail a failover (told in the log)
        log.warning("could not emit mm2-failover metrics: %s: %s", type(e).__name__, e)
    return emitted


def emit_drill_metrics(drill: dict, stats: StatsSink | None = None) -> list[tuple[str, float, dict[str, str]]]:
    return emit_gauges(drill_metrics(drill), "drill", stats)


def emit_readiness_metrics(summary: dict, dag_id: str, stats: StatsSink | None = None) -> list:
    return emit_gauges(readiness_metrics(summary, dag_id), "readiness", stats)


def emit_gauges(gauges: list[tuple[str, float, dict[str, str]]], what: str, stats: StatsSink | None = None) -> list:
    """Send ``gauges`` through ``stats`` (default: Airflow's Stats); returns what was sent. Never raises."""
    emitted: list[tuple[str, Any, dict[str, str]]] = []
    try:
        sink = stats or airflow_stats()
        for name, value, tags in gauges:
            sink.gauge(name, value, tags=tags)
            emitted.append((name, value, tags))
    except Exception as e:  # noqa: BLE001 - metrics never fail a run (told in the log)
        log.warning("could not emit mm2-failover %s metrics: %s: %s", what, type(e).__name__, e)
    return emitted
