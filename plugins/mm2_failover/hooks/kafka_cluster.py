"""Airflow hook for one Kafka cluster (connections ``kafka_source`` / ``kafka_target``).

Uses the Apache Kafka provider's connection type (``kafka``): the connection's extra is a JSON object of
librdkafka settings, passed to the clients untouched. Like the provider's own hooks (``KafkaAdminClientHook``,
``KafkaConsumerHook``), it only supplies the client factory ``_get_client``: the provider builds the configuration
(allow-listed callbacks, managed-cloud OAuth) and ``get_conn`` returns our
:class:`~mm2_failover.adapters.kafka.cluster.Cluster`. Only ``bootstrap.servers`` is ever logged.
"""

from __future__ import annotations

from airflow.providers.apache.kafka.hooks.base import KafkaBaseHook

from mm2_failover.adapters.kafka.cluster import Cluster
from mm2_failover.adapters.kafka.kafka_errors import describe_conf


class KafkaClusterHook(KafkaBaseHook):
    hook_name = "Kafka cluster (mm2-failover)"

    def __init__(self, kafka_config_id: str, role: str | None = None, timeout: float = 15.0):
        super().__init__(kafka_config_id=kafka_config_id)
        self.role = role or kafka_config_id
        self.timeout = timeout

    def _get_client(self, config) -> Cluster:  # the provider's client factory (its own hooks override it too)
        self.log.info("%s: connection %r, bootstrap servers %s", self.role, self.kafka_config_id, describe_conf(config))
        return Cluster(config, self.role, self.timeout)

    def cluster(self) -> Cluster:
        return self.get_conn
