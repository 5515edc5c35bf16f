"""The Airflow DAG mm2_failover_drill, built by the installed package: its tasks, forms and docs are in
mm2_failover/dags/drill_dag.py (a deployment's own DAG file is these three lines)."""

from mm2_failover.dags.drill_dag import drill_dag

dag = drill_dag()
