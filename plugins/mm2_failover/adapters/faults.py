"""Fault points for drills and tests: make a real process die (or pause) at a named point of a step.

Off unless the environment variable ``MM2_FAILOVER_FAULT`` names the point: ``kill@<point>`` sends SIGKILL to the
process itself there (the way a host crash or an OOM kill would end it), ``sleep<N>@<point>`` pauses it N seconds
(to hold a lock while another writer tries; it ends early once the file named by ``MM2_FAILOVER_FAULT_RELEASE``
exists, so a drill can hold it exactly until the other writer is seen waiting). Several, comma-separated. The points are named where they are hit:
``rollback.after_delete_group``, ``rollback.locked``, ``apply.after_backup``, ``apply.locked``,
``apply.after_commits``, ``apply.before_commit`` (after each batch's lock check, before its commits are sent),
``archive.after_files``, ``alter.after_group`` (each group committed), ``job.after_answers`` (the Spark job's
driver), ``state.before_publish``, ... Never set it in
production.

With ``MM2_FAILOVER_FAULT_ONCE_DIR`` set, each point fires once per that folder (a marker file named after the
point, created atomically before the action): a task retried by Airflow inherits the same environment from the
scheduler, and the drill needs its retry to get past the point that killed the first attempt.
"""

from __future__ import annotations

import logging
import os
import signal
import time

log = logging.getLogger(__name__)
ENV = "MM2_FAILOVER_FAULT"
ONCE_ENV = "MM2_FAILOVER_FAULT_ONCE_DIR"
RELEASE_ENV = "MM2_FAILOVER_FAULT_RELEASE"


def _first_time(point: str) -> bool:
    folder = os.environ.get(ONCE_ENV)
    if not folder:
        return True
    try:
        os.close(os.open(os.path.join(folder, point), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    return True


def hit(point: str) -> None:
    for spec in filter(None, (s.strip() for s in os.environ.get(ENV, "").split(","))):
        action, _, where = spec.partition("@")
        if where != point or not _first_time(point):
            continue
        if action == "kill":
            log.error("fault point %s: killing this process (%s=%s)", point, ENV, spec)
            os.kill(os.getpid(), signal.SIGKILL)
        elif action.startswith("sleep"):
            seconds = float(action[len("sleep") :] or 1)
            log.warning("fault point %s: pausing %.0f s (%s=%s)", point, seconds, ENV, spec)
            _pause(seconds, os.environ.get(RELEASE_ENV))


def _pause(seconds: float, release: str | None) -> None:
    """Sleep ``seconds``, or until the file ``release`` exists."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if release and os.path.exists(release):
            log.warning("fault point: released early (%s exists)", release)
            return
        time.sleep(min(0.2, left) if release else left)
