"""The Airflow DAG mm2_sync_archive, built by the installed package: its tasks, forms and docs are in
mm2_failover/dags/sync_archive_dag.py (a deployment's own DAG file is these three lines)."""

from mm2_failover.dags.sync_archive_dag import sync_archive_dag

dag = sync_archive_dag()
