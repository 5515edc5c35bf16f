"""How the pipeline talks to Kafka, one module per concern (nothing is re-exported here: import a name from the
module that defines it):

* :mod:`kafka_errors` - the exceptions (unreachable, refused, misconfigured, out of range, missing topics) and the
  classification of librdkafka's and the Java client's errors;
* :mod:`cluster` - :class:`~mm2_failover.adapters.kafka.cluster.Cluster`, one cluster through confluent-kafka's
  AdminClient and Consumer, and its clients' settings;
* :mod:`java_bridge` - Kafka's Java client through the helper ``jvm/KafkaOffsets.java``, run as a subprocess;
* :mod:`groups` - the consumer groups' value types (state and members).

The lease's clients (:mod:`~mm2_failover.adapters.kafka_lock`) and the fenced writer
(:mod:`~mm2_failover.adapters.fenced`) are beside this package, in ``adapters/``.
"""
