"""The Airflow DAG mm2_failover_rollback, built by the installed package: its tasks, forms and docs are in
mm2_failover/dags/rollback_dag.py (a deployment's own DAG file is these three lines)."""

from mm2_failover.dags.rollback_dag import rollback_dag

dag = rollback_dag()
