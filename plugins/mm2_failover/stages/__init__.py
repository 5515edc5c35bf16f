"""The pipeline's stages, one module each, as plain functions over a :class:`~mm2_failover.stages.context.RunContext`: the Airflow
tasks, sensors and operators and the CLI call exactly these and decide nothing themselves. Each stage reads and writes
the run's folder (:class:`~mm2_failover.adapters.runfolder.RunFolder`) so that a retry or a re-run converges.

====================  ===================================================================================
``drain``             producers stopped, MM2 caught up, nothing unreplicated gone (stage 1)
``snapshot``          end offsets, source commits and offset syncs captured once (stage 2)
``archive``           MM2's offset syncs and checkpoint records kept on the target side
``preflight``         the audit of MM2's configuration
``translation``       exact failover: the archived syncs, indexed a chunk at a time, proven by ``evidence``
``failback``          failing back: positions read back to the origin by the home flow's syncs
``checkpoints``       the Spark job's answers, once it finished (stage 3)
``gate``              groups with live members on the target and the sources (stage 4)
``plan``              the plan, built once (stage 5)
``approval``          the plan's preview report, its approval request and decision, apply's check of it
``apply``             the backup and apply under the writer lock (stage 6)
``verify``            read back, report (stage 7)
``rollback``          restore a backup
``errors``            the errors the stages share
``outcomes``          what every stage error means to the CLI (exit code) and to Airflow (fail now, or retry)
====================  ===================================================================================

The rules they apply live in the pure modules (``drain``, ``translate``, ``evidence``, ``plan``, ``rollback``, ...);
this package does the I/O around them. Nothing is re-exported here: a caller imports the stage it calls.
"""
