"""The soak's short form (issue 49 item 2; the long form is ``bench/soak.py``, an hour and more): the real scheduler
runs mm2_sync_archive and mm2_failover_readiness every few seconds on this worker's bed through a quiet phase, a busy
one, the object store unreachable (the soak's own S3Proxy: no process of the shared bed is killed here; MM2 and
broker restarts are the long form's) and quiet again. No run may fail but those the store's outage explains, each
such failure is mailed once and both DAGs succeed again after it without anyone doing anything; no readiness alert
outside the outage."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import soak  # noqa: E402


def test_the_scheduled_dags_run_unattended_through_quiet_busy_and_a_store_outage(bed, run_root):
    # the truth at the end (a failover scored record by record) is the long form's: about 3 min more here
    result = soak.run_soak(
        bed,
        run_root / "soak",
        minutes=1.5,
        interval=20,
        cycle=("quiet", "busy", "store_unreachable"),
        phase_intervals=1.5,
        truth_at_end=False,
    )
    print(soak.render(result))
    # the last quiet phase is the recovery: until each DAG succeeded after the outage
    assert [p["name"] for p in result.phases] == ["quiet", "busy", "store_unreachable", "quiet"], result.phases
    assert not result.unexpected_failures, result.unexpected_failures
    assert not result.false_alerts, result.false_alerts
    assert not result.not_told_once, result.not_told_once
    assert not result.not_recovered, result.not_recovered
    assert all(states.get("success", 0) >= 1 for states in result.runs.values()), (
        result.runs
    )  # the recovery: one at least
