"""The errors the stages share (the outcome table, :mod:`mm2_failover.stages.outcomes`, decides what each means)."""

from __future__ import annotations

from mm2_failover.rules.plan import PlanError


class ConfigurationError(ValueError):
    """The run's parameters do not match the clusters (e.g. no checkpoints topic for an alias); exit 2."""


class JobFailed(RuntimeError):
    """A Spark job failed in a way a later try may not repeat (an executor lost, a cluster busy): exit 1 on the
    command line; a task's retry."""


class JobUnreachable(JobFailed):
    """A Spark job could not reach the target cluster (its exit code 4): exit 4; a task's retry."""


class QuarantineRefused(PlanError):
    """More unusable checkpoint records than ``max_quarantined_records``: the plan's quarantine refusal
    (:func:`mm2_failover.rules.plan.quarantine_refusal`), raised as soon as the Spark job says so."""
