"""The Airflow DAG mm2_failover, built by the installed package: its tasks, forms and docs are in
mm2_failover/dags/failover_dag.py (a deployment's own DAG file is these three lines)."""

from mm2_failover.dags.failover_dag import failover_dag

dag = failover_dag()
