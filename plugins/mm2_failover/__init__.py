"""mm2-failover: fail Kafka consumer groups over to a MirrorMaker 2 replica cluster, from MM2's checkpoints.

The layers are the folders (``tests/unit/test_layering.py`` derives each module's layer from its folder and checks
that imports only go down):

* ``rules/`` - the pure core, no I/O: the numbered rules (:mod:`~mm2_failover.rules.plan`,
  :mod:`~mm2_failover.rules.translate`, :mod:`~mm2_failover.rules.evidence`, :mod:`~mm2_failover.rules.drain`, ...)
  and the run parameters' one definition (:mod:`~mm2_failover.rules.run_params`);
* ``adapters/`` and ``hooks/`` - the I/O: Kafka (``adapters/kafka/``: errors, the cluster, the Java helper's bridge,
  group states; the lease's :mod:`~mm2_failover.adapters.kafka_lock`), the Java client's settings, the run folder and
  the object store, the sync archive and the latest-checkpoint state, locks, Spark's submission, the deployment's
  settings (:mod:`~mm2_failover.adapters.config`);
* ``stages/`` - one run: its context (:mod:`~mm2_failover.stages.context`) and one module per stage;
* the rest - entry points: the DAG factories (``dags/``), Airflow glue in the provider layout (``operators/``,
  ``sensors/``, :mod:`~mm2_failover.tasks`, :mod:`~mm2_failover.provider_info`), the command line
  (:mod:`~mm2_failover.cli`), the report pages (``ui/``), the Spark job (``jobs/``).

The local Kafka + MM2 bed the tests and the demo start is ``testbed/``, outside the package.
"""

__version__ = "0.1.0"
