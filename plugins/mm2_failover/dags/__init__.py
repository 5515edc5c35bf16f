"""The DAGs, shipped in the package as factories: a deployment's DAG file is three lines (docs/operations.md,
"Installing into an existing Airflow")::

    # the mm2-failover Airflow DAG, built by the installed package
    from mm2_failover.dags.failover_dag import failover_dag

    dag = failover_dag()

Each factory takes the DAG id (and the connection ids where the DAG has them) and returns the DAG; the task bodies are
:mod:`mm2_failover.tasks`. Imported by the DAG processor at parse time: Airflow's SDK, the operators and sensors, the
forms (:mod:`mm2_failover.params`) - nothing that talks to Kafka or Spark.
"""
