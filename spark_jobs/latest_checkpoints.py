"""``spark-submit spark_jobs/latest_checkpoints.py ...``: the latest-checkpoints Spark job.

The job itself lives in the package, :mod:`mm2_failover.jobs.checkpoint_pass` (so that a deployment that copies
only ``dags/`` and ``plugins/`` has it: the Airflow operator submits its file,
``mm2_failover/jobs/run_checkpoint_pass.py``); this entry point is the same job for the documented stand-alone
command line. See the package's docstring for arguments and exit codes.
"""

import sys

from mm2_failover.jobs.checkpoint_pass.driver import main

if __name__ == "__main__":
    sys.exit(main())
