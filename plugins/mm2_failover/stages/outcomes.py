"""What the stages' errors mean to whoever called them - one table for the CLI (its exit code), the Airflow tasks and
sensors (fail at once, or let Airflow retry) alike. A stage raises what happened; the entry points never decide it
again. The order matters: the first row whose classes match wins (a subclass before its base).

=========================  ===========  =====  ================================================================
outcome                    CLI exit     retry  errors
=========================  ===========  =====  ================================================================
``refused``                5            no     a safety rule refused: the plan, a rollback, records gone before
                                               they were replicated, a plan not approved
``not_drained``            6            yes    producers still write or MM2 is behind (the CLI's drain wait)
``locked``                 7            yes    another writer holds the target's lock
``unreachable_required``   4            no     a source the run needs did not answer on any of its tries
``unreachable``            4            yes    a cluster did not answer in time
``usage``                  2            no     a bad parameter, client setting, password, file or artifact
``failed``                 1            yes    the Spark job failed otherwise (an executor lost, a busy cluster)
=========================  ===========  =====  ================================================================

Anything else is not ours to classify: it propagates (a bug, or a failure Airflow should retry as it is).
"""

from __future__ import annotations

from dataclasses import dataclass

#: the CLI's exit codes (docs/reference.md, "Command line (no Airflow)"): the outcomes below carry theirs
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_LIVE, EXIT_UNREACHABLE, EXIT_REFUSED, EXIT_NOT_DRAINED, EXIT_LOCKED = range(8)

#: the latest-checkpoints Spark job's exit codes (``jobs.checkpoint_pass.driver``; the state refresh uses the first
#: three)
JOB_BAD_ARGS, JOB_TOO_MANY_QUARANTINED, JOB_UNREACHABLE, JOB_LOST_SINCE_SNAPSHOT = 2, 3, 4, 5


@dataclass(frozen=True)
class Outcome:
    name: str
    exit_code: int
    retry: bool  # whether trying again later may help


REFUSED = Outcome("refused", EXIT_REFUSED, False)
NOT_DRAINED = Outcome("not_drained", EXIT_NOT_DRAINED, True)
LOCKED = Outcome("locked", EXIT_LOCKED, True)
UNREACHABLE_REQUIRED = Outcome("unreachable_required", EXIT_UNREACHABLE, False)
UNREACHABLE = Outcome("unreachable", EXIT_UNREACHABLE, True)
USAGE = Outcome("usage", EXIT_USAGE, False)
FAILED = Outcome("failed", EXIT_FAILED, True)


def table() -> list[tuple[tuple[type[BaseException], ...], Outcome]]:
    # the Spark job's driver imports this module for its exit codes alone: at module level these pulled in every
    # stage, Kafka's client and the run folder (0.7 s more at each job's start)
    from mm2_failover.adapters.kafka.kafka_errors import KafkaConfigError, KafkaUnavailable  # lazy: the Spark driver
    from mm2_failover.adapters.kafka_lock import LockLost
    from mm2_failover.adapters.locks import Locked
    from mm2_failover.adapters.runfolder import RunFolderError
    from mm2_failover.rules.approval import ApprovalRefused
    from mm2_failover.rules.drain import UnreplicatedLoss
    from mm2_failover.rules.plan import PlanError
    from mm2_failover.rules.reachability import SourceRequiredUnreachable
    from mm2_failover.stages.drain_check import NotDrained
    from mm2_failover.stages.errors import ConfigurationError, JobFailed, JobUnreachable
    from mm2_failover.stages.roll_back import RollbackRefused

    return [
        ((PlanError, RollbackRefused, UnreplicatedLoss, ApprovalRefused), REFUSED),
        ((NotDrained,), NOT_DRAINED),
        ((Locked, LockLost), LOCKED),
        ((SourceRequiredUnreachable,), UNREACHABLE_REQUIRED),
        ((KafkaUnavailable, JobUnreachable), UNREACHABLE),
        ((KafkaConfigError, ConfigurationError, RunFolderError, ValueError, FileNotFoundError), USAGE),
        ((JobFailed,), FAILED),
    ]


def outcome_of(e: BaseException) -> Outcome | None:
    """The outcome of a stage's error (None: not one the table knows)."""
    return next((o for classes, o in table() if isinstance(e, classes)), None)
