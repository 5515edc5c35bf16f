"""Airflow plugin: the "mm2-failover reports" pages (code and docs in mm2_failover/ui/, the routes in ui/app.py).

Mounted at /mm2 in the API server; shown under Plugins -> "mm2-failover reports" (/plugin/mm2-failover), the
readiness page, and an "mm2-failover report" tab on every DAG run (Airflow 3.3 cannot limit a plugin's run tab
to some DAGs: on the runs of other DAGs the tab says so). Read-only, non-secret report data only, behind
Airflow's login and the reader's read permission on each DAG (mm2_failover/ui/access.py).

Found by Airflow two ways: the installed wheel's ``airflow.plugins`` entry point (pyproject.toml), or the plugins
folder's ``mm2_failover_plugin.py``, which imports this class (the simple deployment: ``plugins/`` copied as is).
"""

from airflow.plugins_manager import AirflowPlugin

from mm2_failover.ui.access import AirflowAccess
from mm2_failover.ui.app import create_app


class Mm2FailoverPlugin(AirflowPlugin):
    name = "mm2_failover"
    fastapi_apps = [{"app": create_app(access=AirflowAccess()), "url_prefix": "/mm2", "name": "mm2-failover reports"}]
    external_views = [
        {"name": "mm2-failover reports", "href": "/mm2/", "destination": "nav", "url_route": "mm2-failover"},
        {
            "name": "mm2-failover readiness",
            "href": "/mm2/readiness",
            "destination": "nav",
            "url_route": "mm2-failover-readiness",
        },
        {
            "name": "mm2-failover report",
            "href": "/mm2/runs/{DAG_ID}/{RUN_ID}",
            "destination": "dag_run",
            "url_route": "mm2-failover-run",
        },
    ]
