"""What every task of the DAGs gets, in one place: how long one try may run (``execution_timeout``), and who hears
of its final failure (``on_failure_callback``: :class:`mm2_failover.notifications.RunFailureNotifier`, whose rules are
in :mod:`mm2_failover.rules.notify`).

No task may hang a run forever - a broker call that never returns, a Spark job stuck in a cluster's queue, a process
that stopped making progress. Airflow fails a try that runs past its limit, and the task's retries (every task here is
idempotent: a retry converges to the same committed offsets) start from what the run folder holds.

The limits, per task id (a sensor in reschedule mode runs one poke per try: its limit is a poke's; how long it waits
in all is its ``timeout``, a run parameter). They are generous against what the benchmarks measured at 10k groups x 10
partitions (docs/performance.md: plan 57 s, apply 86 s, verify 51 s, the Spark job seconds on a warm server), so a
limit firing means something is stuck, not slow. :func:`apply_task_defaults` sets them on a DAG's tasks and fails
the DAG file's import (an import error in the UI) for a task missing from the table.

Imported by the DAG files at parse time: the standard library and Airflow's notifier base class only.
"""

from __future__ import annotations

from datetime import timedelta

from mm2_failover.adapters.config import setting, setting_label
from mm2_failover.notifications import RunFailureNotifier

_M = timedelta(minutes=1)


# the archive and the readiness check run on the same interval (readiness reads what the archive kept): every 5
# minutes, or every $MM2_FAILOVER_INTERVAL_SECONDS (read at parse time: the dag-processor's, the scheduler's and the
# workers' environments must agree) - the soak (bench/soak.py) runs them every minute or less
def _interval_seconds() -> int:
    raw = setting("interval_seconds") or "300"
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 10:
        raise ValueError(
            f"{setting_label('interval_seconds')}={raw!r}: give a whole number of seconds, 10 or more "
            "(the archive's and readiness's interval; unset: 300)"
        )
    return n


INTERVAL_SECONDS = _interval_seconds()
INTERVAL_SCHEDULE: str | timedelta = "*/5 * * * *" if INTERVAL_SECONDS == 300 else timedelta(seconds=INTERVAL_SECONDS)

EXECUTION_TIMEOUTS: dict[str, timedelta] = {
    # failover and drill
    "preflight_audit": 10 * _M,
    "verify_producers_drained": 5 * _M,  # one poke
    "measure_replication_lag": 15 * _M,
    "capture_end_offsets": 15 * _M,
    "compute_latest_checkpoints": 60 * _M,  # the Spark job: a cluster's queue included
    "check_groups_empty": 5 * _M,  # one poke
    "plan_group_offsets": 30 * _M,
    "build_plan": 30 * _M,
    "approve_plan": 5 * _M,  # asking, and recording the answer (the wait for it is approval_timeout_seconds)
    "apply_group_offsets": 60 * _M,
    "verify_group_offsets": 30 * _M,
    "announcement_parts": 5 * _M,  # the parts of the Asset events (assets.py rule 4)
    "announce_moved_groups": 10 * _M,  # one part's Asset events
    "announce_all_moved_groups": 5 * _M,  # the one event naming every moved group (assets.py rule 6)
    "drill_report": 15 * _M,
    # rollback
    "rollback_group_offsets": 60 * _M,
    "verify_rollback": 30 * _M,
    # archive (every 5 minutes, one run at a time: a stuck try holds the next runs back until its limit)
    "archive_offset_syncs": 30 * _M,
    "refresh_latest_state": 30 * _M,
    # readiness (every interval too): the plan a failover would build now, read-only
    "assess_readiness": 30 * _M,
}


# How long a run may go, from when it was queued, before on-call hears that it has not ended (Airflow's DeadlineAlert;
# rule 6 of mm2_failover.rules.notify). A failover or rollback in an incident takes minutes (the benchmarks' 10k groups:
# under 3 min on a real scheduler), so half an hour means stuck or waiting for an approval nobody gave (which waits up
# to approval_timeout_seconds, an hour by default); the archive and readiness run every interval, one run at a time,
# so a run past two intervals holds the next ones back.
RUN_DEADLINES: dict[str, timedelta] = {
    "mm2_failover": 30 * _M,
    "mm2_failover_rollback": 30 * _M,
    "mm2_failover_drill": 60 * _M,
    # two intervals (a run that long holds the next ones back), never under 10 minutes: at a short interval (the
    # soak's 20 s) a run of a minute is not stuck, and a page for it is noise (bench/soak.py found it)
    "mm2_sync_archive": max(timedelta(seconds=2 * INTERVAL_SECONDS), 10 * _M),
    "mm2_failover_readiness": max(timedelta(seconds=2 * INTERVAL_SECONDS), 10 * _M),
}
RUN_DEADLINES_VAR = "MM2_FAILOVER_RUN_DEADLINES"  # "dag_id=seconds|off,..." read when the DAG files are parsed
OFF = "off"


def deadline_seconds(dag_id: str, env: dict[str, str] | None, kind: str | None = None) -> float | None:
    """The deadline of ``dag_id``'s runs: :data:`RUN_DEADLINES`, or its override in setting ``run_deadlines``
    (``dag_id=seconds``, or ``dag_id=off``: no deadline alert - None). A malformed override is a ValueError naming the
    variable and the entry (the DAG files then fail to import: an import error in the UI, not a silent default)."""
    kind = kind or dag_id  # a factory's DAG under another id has its kind's deadline (the override: by its id)
    if kind not in RUN_DEADLINES:
        raise KeyError(f"DAG {kind}: no run deadline: add it to mm2_failover.dag_defaults.RUN_DEADLINES")
    for entry in (setting("run_deadlines", env) or "").split(","):
        if not entry.strip():
            continue
        name, eq, value = entry.strip().partition("=")
        off = value.strip().lower() == OFF
        try:
            seconds = float(value)
        except ValueError:
            seconds = -1.0
        if not eq or not name.strip() or (seconds <= 0 and not off):
            raise ValueError(
                f"{setting_label('run_deadlines', env)}: {entry.strip()!r} is not dag_id=seconds with seconds > 0, or "
                "dag_id=off (e.g. mm2_failover=1800)"
            )
        if name.strip() == dag_id:
            return None if off else seconds
    return RUN_DEADLINES[kind].total_seconds()


def run_deadline(dag_id: str, kind: str | None = None):
    """The ``deadline`` argument of ``dag_id``'s DAG: told when a run has not ended its deadline after it was queued
    (rule 6 of :mod:`mm2_failover.rules.notify`), through the executor (no triggerer needed); None when switched off."""
    from airflow.sdk.definitions.callback import SyncCallback  # lazy: airflow (the CLI runs without it)
    from airflow.sdk.definitions.deadline import DeadlineAlert, DeadlineReference

    seconds = deadline_seconds(dag_id, None, kind)
    if seconds is None:
        return None
    return DeadlineAlert(
        reference=DeadlineReference.DAGRUN_QUEUED_AT,
        interval=timedelta(seconds=seconds),
        callback=SyncCallback("mm2_failover.notifications.deadline_missed", kwargs={"interval_seconds": seconds}),
        name=f"{dag_id} not ended {seconds:g} s after it was queued",
    )


def apply_task_defaults(dag, kind: str | None = None) -> None:
    """Give every task of ``dag`` its row of :data:`EXECUTION_TIMEOUTS` (a task without a row is an error) and the
    failure notifier; a DAG without its deadline alert (:func:`run_deadline`) is an error too."""

    if not dag.deadline and deadline_seconds(dag.dag_id, None, kind) is not None:
        raise KeyError(
            f"DAG {dag.dag_id}: no deadline alert: pass deadline=run_deadline({dag.dag_id!r}) "
            "(mm2_failover.dag_defaults)"
        )
    missing = [t.task_id for t in dag.tasks if t.task_id not in EXECUTION_TIMEOUTS]
    if missing:
        raise KeyError(
            f"DAG {dag.dag_id}: no execution_timeout for task(s) {', '.join(missing)}: add them to "
            "mm2_failover.dag_defaults.EXECUTION_TIMEOUTS"
        )
    notifier = RunFailureNotifier()
    for t in dag.tasks:
        t.execution_timeout = EXECUTION_TIMEOUTS[t.task_id]
        t.on_failure_callback = [notifier]
