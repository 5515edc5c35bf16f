"""Metrics after verify: names and values computed from a real report, sent through an injected sink and through
Airflow 3.3's own Stats module (StatsD off: a recording backend instead of a UDP socket)."""

from __future__ import annotations

import re

import pytest

from mm2_failover import metrics
from mm2_failover.rules.plan import CLAMP, COMMIT, SKIP, Mismatch, Plan, PlanRow
from mm2_failover.rules.report import build_report


class FakeSink:
    def __init__(self):
        self.calls = []

    def incr(self, stat, count=None, rate=None, *, tags=None):
        self.calls.append(("incr", stat, count, tags))

    def gauge(self, stat, value, rate=None, delta=None, *, tags=None):
        self.calls.append(("gauge", stat, value, tags))


def _report(dry_run=False, mismatch=False):
    rows = [
        # g1: 3 partitions - committed exactly, committed with translation slack (re-read), no checkpoint
        PlanRow("primary", "g1", "primary.t", 0, 40, 40, None, 40, COMMIT),
        PlanRow("primary", "g1", "primary.t", 1, 50, 1, None, 1, COMMIT),
        PlanRow("primary", "g1", "primary.t", 2, None, None, None, None, SKIP, "no_checkpoint"),
        # g2: clamped to the log start, 7 records lost to retention
        PlanRow("primary", "g2", "primary.u", 0, 10, 3, None, 10, CLAMP, "retention_gap", 10, 90, 7),
    ]
    plan = Plan(rows)
    committed = {"g1": {("primary.t", 0): 40, ("primary.t", 1): 1}, "g2": {("primary.u", 0): 10}}
    mism = [Mismatch("g2", "primary.u", 0, 10, 9)] if mismatch else []
    # g1 partition 0: the group had committed 45 on the source, MM2's newest checkpoint said 40
    return build_report(
        dag_id="mm2_failover",
        run_id="r1",
        params={},
        plan=plan,
        committed=committed,
        log_end={("primary.t", 0): 40, ("primary.t", 1): 60, ("primary.u", 0): 90},
        mismatches=mism,
        dry_run=dry_run,
        source_commits={("g1", "primary.t", 0): 45},
    ).as_dict()


def test_failover_counters_names_and_values():
    sink = FakeSink()
    emitted = metrics.emit_metrics(_report(), stats=sink)
    got = {name: count for kind, name, count, tags in sink.calls}
    assert all(kind == "incr" for kind, *_ in sink.calls)
    assert got == {
        "mm2_failover.runs": 1,
        "mm2_failover.groups_moved": 2,
        "mm2_failover.partitions_committed": 3,
        "mm2_failover.partitions_skipped": 1,
        "mm2_failover.partitions_clamped": 1,
        "mm2_failover.records_lost_to_retention": 7,
        # p0: source commit 45 - planned 40 = 5; p1 and g2: no source commit (the source lost), not estimated
        "mm2_failover.records_reread_estimate": 5,
        "mm2_failover.partitions_reread_unknown": 2,
        "mm2_failover.partitions_mismatched": 0,
        "mm2_failover.groups_refused": 0,
    }
    assert {tuple(sorted(t.items())) for *_, t in sink.calls} == {
        (("dag_id", "mm2_failover"), ("outcome", "succeeded"))
    }
    assert [(n, v) for n, v, _ in emitted] == [(n, c) for _, n, c, _ in sink.calls]


def test_failed_and_dry_run_outcomes():
    sink = FakeSink()
    metrics.emit_metrics(_report(mismatch=True), stats=sink)
    got = {n: c for _, n, c, _ in sink.calls}
    assert got["mm2_failover.partitions_mismatched"] == 1 and got["mm2_failover.partitions_committed"] == 2
    assert sink.calls[0][3]["outcome"] == "failed"
    sink = FakeSink()
    metrics.emit_metrics(_report(dry_run=True), stats=sink)
    got = {n: c for _, n, c, _ in sink.calls}
    assert got["mm2_failover.groups_moved"] == 0 and got["mm2_failover.partitions_committed"] == 0
    assert sink.calls[0][3]["outcome"] == "dry_run"


def test_names_are_valid_stat_names():
    from airflow.sdk._shared.observability.metrics.otel_logger import name_is_otel_safe
    from airflow.sdk.observability.stats import normalize_name_for_stats

    for name, _v, _t in metrics.failover_metrics(_report()) + metrics.drill_metrics(
        {"dag_id": "d", "totals": {k: 1 for _, k in metrics.DRILL_GAUGES}}
    ):
        assert normalize_name_for_stats(name, log_warning=False) == name and len(name) < 250
        assert name_is_otel_safe("airflow", name), name  # OpenTelemetry backend accepts it too
        assert re.fullmatch(r"mm2_failover\.[a-z_.]+", name)


def test_a_broken_sink_never_fails_the_task(caplog):
    class Broken:
        def incr(self, *a, **k):
            raise OSError("statsd host unreachable")

    assert metrics.emit_metrics(_report(), stats=Broken()) == []
    assert "could not emit" in caplog.text


def test_through_airflow_stats_with_statsd_off():
    """The default sink is Airflow's Task SDK Stats; with StatsD off it is whatever backend Airflow initialized.
    Install a recording backend the way the task runner installs StatsD, and check what reaches it."""
    from airflow.sdk._shared.observability.metrics.base_stats_logger import NoStatsLogger
    from airflow.sdk.observability import stats

    rec = FakeSink()
    stats.initialize(factory=lambda: rec, export_legacy_names=True)
    try:
        metrics.emit_metrics(_report())
        metrics.emit_drill_metrics(
            {"dag_id": "mm2_failover_drill", "totals": {"groups_covered": 3, "checkpoint_age_max_seconds": 12.5}}
        )
    finally:
        stats.initialize(factory=NoStatsLogger, export_legacy_names=True)
    names = [(k, n, v) for k, n, v, _ in rec.calls]
    assert ("incr", "mm2_failover.groups_moved", 2) in names
    assert ("incr", "mm2_failover.records_lost_to_retention", 7) in names
    assert ("gauge", "mm2_failover.drill.groups_covered", 3.0) in names
    assert ("gauge", "mm2_failover.drill.checkpoint_age_max_seconds", 12.5) in names
    # and with Airflow's default (no backend configured) nothing breaks
    assert len(metrics.emit_metrics(_report())) == 10


@pytest.mark.parametrize("totals, expected", [({}, []), ({"findings": 2}, [("mm2_failover.drill.findings", 2.0)])])
def test_drill_gauges(totals, expected):
    assert [(n, v) for n, v, _ in metrics.drill_metrics({"dag_id": "x", "totals": totals})] == expected


def test_readiness_gauges_are_the_summarys_known_values():
    summary = {
        "groups": 4,
        "groups_not_exact": 1,
        "worst_exposure_seconds": None,
        "not_replicated_records": 12,
        "groups_over_rpo": 0,
        "reread_records": 3,
        "archive_age_seconds": 40.5,
        "checkpoint_age_max_seconds": 9,
        "findings": 2,
        "partitions": 40,
    }
    sink = FakeSink()
    sent = metrics.emit_readiness_metrics(summary, "mm2_failover_readiness", sink)
    names = {n.rsplit(".", 1)[1]: v for n, v, _t in sent}
    assert names == {
        "groups": 4,
        "groups_not_exact": 1,
        "not_replicated_records": 12,
        "groups_over_rpo": 0,
        "reread_records": 3,
        "archive_age_seconds": 40.5,
        "checkpoint_age_max_seconds": 9,
        "findings": 2,
    }
    assert all(c[0] == "gauge" and c[1].startswith("mm2_failover.readiness.") for c in sink.calls)
    # every gauge is a key of the summary the rules compute (one definition)
    from mm2_failover.rules import readiness

    keys = readiness.summarize([], [], {}, [], 60).keys()
    assert set(metrics.READINESS_GAUGES) <= set(keys)
