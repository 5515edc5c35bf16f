"""What a stage's error means to Airflow, in one place for the tasks, the sensors and the operators: the one outcome
table (:mod:`mm2_failover.stages.outcomes`) says whether a retry can help; one that cannot (a refusal, a bad
parameter, setting or password, a required source that never answered) fails the task at once, with the error's own
words; everything else is raised as it is, for Airflow's retries (another writer's lock, an unreachable cluster)."""

from __future__ import annotations

from typing import Callable, NoReturn, TypeVar

from airflow.sdk.exceptions import AirflowFailException

from mm2_failover.stages.outcomes import outcome_of

T = TypeVar("T")


def raise_for_airflow(e: BaseException) -> NoReturn:
    """Raise ``e`` as the outcome table decides: ``AirflowFailException`` (no retry) or ``e`` itself."""

    o = outcome_of(e)
    if o is not None and not o.retry:
        raise AirflowFailException(str(e)) from None
    raise e


def by_outcome(step: Callable[[], T]) -> T:
    """``step()``, its error decided by :func:`raise_for_airflow`."""
    try:
        return step()
    except Exception as e:  # noqa: BLE001 - every error goes through the table, and is raised again there
        raise_for_airflow(e)
