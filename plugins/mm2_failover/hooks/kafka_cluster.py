"""Airflow hook for one Kafka cluster (connections ``kafka_source`` / ``kafka_target``).

Uses the Apache Kafka provider's connection type (``kafka``): the connection's extra is a JSON object of
librdkafka settings, passed to the clients untouched (the provider resolves allow-listed callbacks and
managed-cloud OAuth the same way it does for its own hooks). Only ``bootstrap.servers`` is ever logged.
"""

from __future__ import annotations

from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook

from mm2_failover.kafka_io import Cluster, describe_conf


class KafkaClusterHook(KafkaBaseHook):
    hook_name = "Kafka cluster (mm2-failover)"

    def __init__(self, kafka_config_id: str, role: str | None = None):
        super().__init__(kafka_config_id=kafka_config_id)
        self.role = role or kafka_config_id

    def client_config(self) -> dict:
        """The librdkafka settings of this connection (contains secrets: never log it)."""
        return self._build_config()

    def cluster(self, timeout: float = 15.0) -> Cluster:
        conf = self.client_config()
        self.log.info("%s: connection %r, bootstrap servers %s", self.role, self.kafka_config_id, describe_conf(conf))
        return Cluster(conf, self.role, timeout)
