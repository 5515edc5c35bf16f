"""Airflow plugin for the plugins folder (the simple deployment: ``dags/`` and ``plugins/`` copied as they are).

The class is ``mm2_failover.airflow_plugin.Mm2FailoverPlugin`` (the "mm2-failover reports" pages, code and docs in
mm2_failover/ui/); an installed wheel registers the same class through its ``airflow.plugins`` entry point, and
Airflow skips the second registration of a plugin name.
"""

from mm2_failover.airflow_plugin import Mm2FailoverPlugin

__all__ = ["Mm2FailoverPlugin"]
