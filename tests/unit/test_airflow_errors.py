"""What a stage's error means to Airflow (mm2_failover.airflow_errors): the one outcome table's answer, for the
tasks, the sensors and the operators alike (issue 51: it was spelled three times)."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from mm2_failover.adapters.kafka.kafka_errors import KafkaUnavailable
from mm2_failover.airflow_errors import by_outcome, raise_for_airflow
from mm2_failover.rules.plan import PlanError
from mm2_failover.stages.errors import JobFailed


def test_an_error_no_retry_helps_fails_the_task_at_once_with_its_own_words():
    with pytest.raises(AirflowFailException, match="^3 group\\(s\\) refused$"):
        raise_for_airflow(PlanError("3 group(s) refused"))
    with pytest.raises(AirflowFailException, match="bad value"):
        by_outcome(lambda: (_ for _ in ()).throw(ValueError("bad value")))


@pytest.mark.parametrize(
    "error",
    [KafkaUnavailable("target did not answer"), JobFailed("executor lost"), RuntimeError("not ours to classify")],
)
def test_an_error_a_retry_may_help_or_that_is_not_ours_is_raised_as_it_is(error):
    with pytest.raises(type(error)) as got:
        by_outcome(lambda: (_ for _ in ()).throw(error))
    assert got.value is error


def test_a_step_that_succeeds_returns_its_value():
    assert by_outcome(lambda: 42) == 42
