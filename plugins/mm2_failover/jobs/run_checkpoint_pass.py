"""The latest-checkpoints Spark job's file: what ``spark-submit`` (and the Spark Connect route, a plain
``python <file>``) runs, :data:`mm2_failover.adapters.config.SPARK_JOB` - a Python application is a ``.py`` file, and
the job itself is a package, :mod:`mm2_failover.jobs.checkpoint_pass` (its docstring: arguments and exit codes).
Also ``python -m mm2_failover.jobs.run_checkpoint_pass``. ``mm2_failover`` must be importable by the driver
(``PYTHONPATH=plugins``)."""

import sys

from mm2_failover.jobs.checkpoint_pass.driver import main

if __name__ == "__main__":
    sys.exit(main())
