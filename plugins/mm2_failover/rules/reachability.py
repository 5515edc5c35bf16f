"""Is each source cluster reachable? Decided ONCE per run, at its start, and never changed afterwards.

The rules (``source_reachable``), per source alias:

1. ``no`` - the operator says the source is lost: DISASTER MODE for it, without contacting it.
2. ``yes`` - the source must answer: a probe that finds it unreachable fails the run.
3. ``detect`` - probe it up to :data:`PROBE_TRIES` times (a bounded wait). One answer is enough for "reachable".
   When EVERY try found it unreachable (no answer, connection refused), disaster mode is never entered by itself
   (issue 33): a mistyped bootstrap address, a firewall or a DNS slip look exactly like a lost cluster, and disaster
   mode skips every source-side gate.

   a. A run that **asks a human before it writes** (the failover DAG: its ``approve_plan`` task) goes on in disaster
      mode *unconfirmed*: everything before the approval only reads, and the approval then asks whether the source
      is really lost - always, whatever ``require_approval`` says (:func:`mm2_failover.rules.approval.needed`).
   b. Any other run (the CLI, the drill) STOPS, nothing done; the error says how to declare the source lost (rule 1)
      for an operator who knows it is.
4. An authentication or configuration error is never "unreachable": it fails the run with its cause, whatever the
   mode (a wrong password must not turn a live source into a lost one).
5. The decision is recorded in the run folder (and the snapshot) by the first task; every later task reads it.
   A source decided reachable whose check fails later fails that task: it is never downgraded to disaster mode.

:func:`decide` is the pure rule over the probe's outcomes; :func:`probe` runs the bounded probe against a cluster.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

REACHABLE = "reachable"
DISASTER = "disaster"  # decided unreachable (or declared lost): source-side checks are skipped, loudly
MODES = ("detect", "yes", "no")
PROBE_TRIES = 3
PROBE_PAUSE_S = 2.0

OK = "ok"
UNREACHABLE = "unreachable"


class SourceUnreachable(RuntimeError):
    """A cluster did not answer (``adapters.kafka.kafka_errors.KafkaUnavailable`` is one): the only error a probe
    counts as unreachable."""


class SourceRequiredUnreachable(RuntimeError):
    """The source did not answer and the run may not go on without it: ``source_reachable=yes``, or ``detect``
    (rule 3: only the operator declares a source lost)."""


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"source_reachable must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


def decide(mode: str, outcomes: list[str], what: str = "the source cluster", asks: bool = False) -> str:
    """The decision from the probe's outcomes (``ok`` / ``unreachable``, in order); ``asks``: the run asks a human
    before it writes (rule 3a). Errors other than "unreachable" never reach here: the probe raises them (rule 4)."""
    check_mode(mode)
    if mode == "no":
        return DISASTER
    if OK in outcomes:
        return REACHABLE
    if mode == "detect" and asks:
        return DISASTER  # unconfirmed (rule 3a): the approval asks
    if mode == "yes":
        raise SourceRequiredUnreachable(
            f"{what} did not answer on any of {len(outcomes)} tries and source_reachable=yes: nothing was done. "
            "Check that it is up and reachable; if it is lost, re-run with source_reachable=no (disaster mode)."
        )
    raise SourceRequiredUnreachable(
        f"{what} did not answer on any of {len(outcomes)} tries: nothing was done. A failover never enters disaster "
        "mode by itself (a mistyped address looks exactly like a lost cluster, and disaster mode skips every "
        "source-side check). Check the source's bootstrap servers and the network; if the source is really lost, "
        "re-run with source_reachable=no (the CLI: --source-reachable no): disaster mode, with the data-loss window "
        "in the report."
    )


def confirmed(mode: str, decision: str) -> bool:
    """Whether a decision stands without a human's confirmation: everything but disaster mode under ``detect``
    (rule 3a)."""
    return not (mode == "detect" and decision == DISASTER)


def probe(
    check: Callable[[], object],
    tries: int = PROBE_TRIES,
    pause_s: float = PROBE_PAUSE_S,
    mode: str = "detect",
    what: str = "the source cluster",
    asks: bool = False,
) -> tuple[str, list[str], str]:
    """Call ``check`` (e.g. ``cluster.probe``) until it answers, at most ``tries`` times (one try under ``yes``
    still retries: a brief network hiccup must not fail a failover either). Returns ``(decision, outcomes,
    last_error)``. ``SourceUnreachable`` counts as unreachable; any other exception (authentication,
    configuration) propagates."""
    check_mode(mode)
    outcomes: list[str] = []
    last = ""
    if mode == "no":
        return DISASTER, outcomes, last
    for i in range(max(1, tries)):
        try:
            check()
            outcomes.append(OK)
            break
        except SourceUnreachable as e:
            outcomes.append(UNREACHABLE)
            last = str(e)
            log.warning("%s: try %d/%d found it unreachable: %s", what, i + 1, tries, e)
            if i + 1 < tries:
                time.sleep(pause_s)
    return decide(mode, outcomes, what, asks), outcomes, last
