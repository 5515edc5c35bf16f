"""Shared behaviour of the pipeline's sensors: params from the run, clusters from the connections, and a
timeout message that carries the last poke's findings (not just "timed out")."""

from __future__ import annotations

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowSensorTimeout

from mm2_failover.config import SOURCE_CONN_ID, TARGET_CONN_ID, RunParams


class FailoverSensor(BaseSensorOperator):
    #: name of the run param that, when set, overrides ``timeout`` (seconds)
    timeout_param: str | None = None

    def __init__(self, *, source_conn_id: str = SOURCE_CONN_ID, target_conn_id: str = TARGET_CONN_ID, **kwargs):
        kwargs.setdefault("mode", "reschedule")
        kwargs.setdefault("retries", 2)  # a rescheduled sensor can lose a try to a scheduler race
        super().__init__(**kwargs)
        self.source_conn_id = source_conn_id
        self.target_conn_id = target_conn_id
        self._findings = ""

    def run_params(self, context) -> RunParams:
        return RunParams.from_mapping(dict(context["params"]))

    def cluster(self, conn_id: str, role: str, timeout: float = 15.0):
        from mm2_failover.hooks.kafka_cluster import KafkaClusterHook

        return KafkaClusterHook(conn_id, role).cluster(timeout)

    def execute(self, context):
        if self.timeout_param and context["params"].get(self.timeout_param):
            self.timeout = float(context["params"][self.timeout_param])
        try:
            return super().execute(context)
        except AirflowSensorTimeout as e:
            raise AirflowSensorTimeout(f"{e}\n{self._findings}") from None
