"""mm2-failover: fail Kafka consumer groups over to a MirrorMaker 2 replica cluster, from MM2's checkpoints.

Pure core (no I/O): :mod:`checkpoints` (wire format), :mod:`naming` (replication policies),
:mod:`plan` (planning rules), :mod:`report` (rendering).
Thin adapters: :mod:`kafka_io` (confluent-kafka AdminClient), :mod:`bed` (the local Kafka + MM2 bed),
``hooks``/``sensors``/``operators`` (Airflow glue). The DAGs in ``dags/`` only wire tasks.
"""

__version__ = "0.1.0"
