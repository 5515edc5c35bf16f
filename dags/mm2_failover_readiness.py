"""The Airflow DAG mm2_failover_readiness, built by the installed package: its tasks, forms and docs are in
mm2_failover/dags/readiness_dag.py (a deployment's own DAG file is these three lines)."""

from mm2_failover.dags.readiness_dag import readiness_dag

dag = readiness_dag()
