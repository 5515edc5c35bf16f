"""mm2-failover: fail Kafka consumer groups over to a MirrorMaker 2 replica cluster, from MM2's checkpoints.

Pure core (no I/O): the numbered rules - :mod:`checkpoints` (wire format), :mod:`naming` (replication policies),
:mod:`translate` and :mod:`evidence` (exact translation), :mod:`plan` (planning rules), :mod:`report` (rendering)
and the others ``tests/unit/test_layering.py`` lists as its core. Adapters: ``adapters/kafka/`` (:mod:`kafka_errors`,
:mod:`cluster`, :mod:`java_bridge`, :mod:`groups`) and :mod:`kafka_lock` (Kafka), :mod:`runfolder` and :mod:`store`
(artifacts), :mod:`syncs` and :mod:`state` (the archive, the state), :mod:`spark` (the job's submission). One run:
:mod:`run` and ``stages/``. Entry points: :mod:`cli`, :mod:`ui`, ``hooks``/``sensors``/``operators``/:mod:`tasks`
(Airflow glue); the DAGs in ``dags/`` only wire tasks. The local Kafka + MM2 bed the tests and the demo start is
``testbed/``, outside the package.
"""

__version__ = "0.1.0"
