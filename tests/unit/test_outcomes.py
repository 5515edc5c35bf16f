"""The one table of what the stages' errors mean (mm2_failover.stages.outcomes), and that the CLI, the tasks and the
sensors read it (issue 32: each entry point used to map errors with a list of its own)."""

from __future__ import annotations

import pytest

from mm2_failover import cli
from mm2_failover.adapters.kafka.kafka_errors import KafkaAuthError, KafkaConfigError, KafkaUnavailable
from mm2_failover.adapters.locks import Locked
from mm2_failover.adapters.runfolder import RunFolderError
from mm2_failover.rules.approval import ApprovalRefused
from mm2_failover.rules.drain import UnreplicatedLoss
from mm2_failover.rules.plan import PlanError
from mm2_failover.rules.reachability import SourceRequiredUnreachable
from mm2_failover.stages import outcomes
from mm2_failover.stages.drain_check import NotDrained
from mm2_failover.stages.errors import ConfigurationError, JobFailed, JobUnreachable, QuarantineRefused
from mm2_failover.stages.roll_back import RollbackRefused

CASES = [
    (PlanError("x"), outcomes.REFUSED),
    (RollbackRefused("x"), outcomes.REFUSED),
    (UnreplicatedLoss("x"), outcomes.REFUSED),
    (ApprovalRefused("x"), outcomes.REFUSED),
    (NotDrained("x"), outcomes.NOT_DRAINED),
    (Locked("x"), outcomes.LOCKED),
    (SourceRequiredUnreachable("x"), outcomes.UNREACHABLE_REQUIRED),
    (KafkaUnavailable("x"), outcomes.UNREACHABLE),
    (KafkaAuthError("x"), outcomes.USAGE),
    (KafkaConfigError("x"), outcomes.USAGE),
    (ConfigurationError("x"), outcomes.USAGE),
    (RunFolderError("x"), outcomes.USAGE),
    (ValueError("x"), outcomes.USAGE),
    (FileNotFoundError("x"), outcomes.USAGE),
    (QuarantineRefused("x"), outcomes.REFUSED),
    (JobUnreachable("x"), outcomes.UNREACHABLE),
    (JobFailed("x"), outcomes.FAILED),
]


@pytest.mark.parametrize("error,outcome", CASES, ids=[type(e).__name__ for e, _o in CASES])
def test_every_stage_error_has_one_outcome(error, outcome):
    assert outcomes.outcome_of(error) is outcome


def test_what_the_table_does_not_know_propagates():
    assert outcomes.outcome_of(RuntimeError("a bug")) is None and outcomes.outcome_of(KeyError("k")) is None


def test_the_exit_codes_are_one_table():
    """Issue 51 item 2: the CLI's exit codes, the outcomes' and the Spark job's are defined once (stages/outcomes),
    the job's mapped to the CLI's by name."""
    from mm2_failover.jobs.checkpoint_pass import driver

    assert (
        outcomes.REFUSED.exit_code,
        outcomes.NOT_DRAINED.exit_code,
        outcomes.LOCKED.exit_code,
        outcomes.UNREACHABLE.exit_code,
        outcomes.UNREACHABLE_REQUIRED.exit_code,
        outcomes.USAGE.exit_code,
    ) == (5, 6, 7, 4, 4, 2)  # docs/reference.md, "Command line (no Airflow)"
    assert cli.EXIT_USAGE is outcomes.EXIT_USAGE and cli.EXIT_LIVE == 3
    assert (
        driver.EXIT_BAD_ARGS,
        driver.EXIT_TOO_MANY_QUARANTINED,
        driver.EXIT_UNREACHABLE,
        driver.EXIT_LOST_SINCE_SNAPSHOT,
    ) == (
        outcomes.JOB_BAD_ARGS,
        outcomes.JOB_TOO_MANY_QUARANTINED,
        outcomes.JOB_UNREACHABLE,
        outcomes.JOB_LOST_SINCE_SNAPSHOT,
    )
    # a Spark job's exit code as the error stage 3 raises (stages/compute_checkpoints.job_error), decided by the same table
    from mm2_failover.stages.compute_checkpoints import job_error

    assert [
        (o.exit_code, o.retry)
        for o in (
            outcomes.outcome_of(job_error(rc, "the job", ""))
            for rc in (driver.EXIT_BAD_ARGS, driver.EXIT_UNREACHABLE, 1, 137)
        )
    ] == [
        (outcomes.EXIT_USAGE, False),
        (outcomes.EXIT_UNREACHABLE, True),
        (outcomes.EXIT_FAILED, True),
        (outcomes.EXIT_FAILED, True),
    ]


@pytest.mark.parametrize("error,outcome", CASES, ids=[type(e).__name__ for e, _o in CASES])
def test_a_task_fails_at_once_on_what_a_retry_cannot_fix_and_leaves_the_rest_to_airflows_retries(error, outcome):
    from airflow.sdk.exceptions import AirflowFailException

    from mm2_failover import tasks

    @tasks._outcomes
    def body(context):
        raise error

    with pytest.raises(type(error) if outcome.retry else AirflowFailException):
        body({})
