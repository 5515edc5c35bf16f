"""Fault points for drills and tests: make a real process die (or pause) at a named point of a step.

Off unless the environment variable ``MM2_FAILOVER_FAULT`` names the point: ``kill@<point>`` sends SIGKILL to the
process itself there (the way a host crash or an OOM kill would end it), ``sleep<N>@<point>`` pauses it N seconds
(to hold a lock while another writer tries). Several, comma-separated. The points are named where they are hit:
``rollback.after_delete_group``, ``rollback.locked``, ``apply.after_backup``, ``apply.locked``,
``apply.after_commits``, ``archive.after_files``, ``alter.after_group`` (each group committed), ``job.after_answers`` (the Spark job's
driver), ``state.before_publish``, ... Never set it in
production.
"""

from __future__ import annotations

import logging
import os
import signal
import time

log = logging.getLogger(__name__)
ENV = "MM2_FAILOVER_FAULT"


def hit(point: str) -> None:
    for spec in filter(None, (s.strip() for s in os.environ.get(ENV, "").split(","))):
        action, _, where = spec.partition("@")
        if where != point:
            continue
        if action == "kill":
            log.error("fault point %s: killing this process (%s=%s)", point, ENV, spec)
            os.kill(os.getpid(), signal.SIGKILL)
        elif action.startswith("sleep"):
            seconds = float(action[len("sleep"):] or 1)
            log.warning("fault point %s: pausing %.0f s (%s=%s)", point, seconds, ENV, spec)
            time.sleep(seconds)
