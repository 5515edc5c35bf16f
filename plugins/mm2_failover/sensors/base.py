"""Shared behaviour of the pipeline's sensors: explicit, templated arguments (the run's parameters and the
connection ids), the run resolved once per poke by :class:`~mm2_failover.stages.context.RunContext`, and a timeout message
that carries the last poke's findings (not just "timed out")."""

from __future__ import annotations

from datetime import datetime, timezone

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowSensorTimeout

from mm2_failover.adapters.config import SOURCE_CONN_ID, TARGET_CONN_ID
from mm2_failover.rules.run_params import RunParams


class FailoverSensor(BaseSensorOperator):
    """
    :param run_params: the run's parameters (see ``mm2_failover.rules.run_params.RunParams``); templated - the DAGs pass
        ``{{ params.<name> }}`` for each (``RunParams.templates()``)
    :param source_conn_id: Kafka connection of the (first alias's) source cluster; templated
    :param target_conn_id: Kafka connection of the target cluster; templated
    :param asks_before_writing: the run asks a human before it writes (the failover DAG's tasks say so: reachability
        rule 3a)
    """

    template_fields = ("run_params", "source_conn_id", "target_conn_id")
    #: the run parameter that, when set, overrides ``timeout`` (seconds)
    timeout_param: str | None = None

    def __init__(
        self,
        *,
        run_params: dict | None = None,
        source_conn_id: str = SOURCE_CONN_ID,
        target_conn_id: str = TARGET_CONN_ID,
        asks_before_writing: bool = False,
        **kwargs,
    ):
        kwargs.setdefault("mode", "reschedule")
        kwargs.setdefault("retries", 2)  # a rescheduled sensor can lose a try to a scheduler race
        super().__init__(**kwargs)
        self.run_params = run_params or {}
        self.source_conn_id = source_conn_id
        self.target_conn_id = target_conn_id
        self.asks_before_writing = asks_before_writing
        self._findings = ""

    def run_context(self, context):
        from mm2_failover.stages.context import RunContext  # lazy: not at DAG parse

        return RunContext.from_airflow(
            context,
            target_conn_id=self.target_conn_id,
            source_conn_id=self.source_conn_id,
            params=self.run_params,
            asks_before_writing=self.asks_before_writing,
        )

    def waited(self, context) -> tuple[float, float]:
        """(seconds this sensor has waited since its first poke, seconds left before its timeout): what a poke that
        finds nothing done says, so that the log line changes while nothing else does."""
        ti = context.get("ti")
        first = None
        try:
            first = ti.get_first_reschedule_date(context) if ti is not None else None
        except Exception:  # noqa: BLE001 - an estimate for a log line; the try's own start then
            first = None
        first = first or getattr(ti, "start_date", None)
        waited = (datetime.now(timezone.utc) - first).total_seconds() if isinstance(first, datetime) else 0.0
        return waited, float(self.timeout) - waited

    def execute(self, context):
        from mm2_failover.airflow_errors import raise_for_airflow  # lazy: not at DAG parse

        try:
            if self.timeout_param and self.run_params.get(self.timeout_param) not in (None, ""):
                self.timeout = float(getattr(RunParams.from_mapping(self.run_params), self.timeout_param))
            return super().execute(context)
        except AirflowSensorTimeout as e:
            raise AirflowSensorTimeout(f"{e}\n{self._findings}") from None
        except Exception as e:  # noqa: BLE001 - the one table decides (mm2_failover.airflow_errors)
            raise_for_airflow(e)
