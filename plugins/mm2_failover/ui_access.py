"""Who may read the "mm2-failover reports" pages (issue 18): the same login as Airflow's UI and the reader's read
permission on the DAG whose runs a page shows - decided by Airflow's own auth manager, through the dependencies
Airflow exposes to plugin apps (``airflow.api_fastapi.core_api.security``).

* ``get_user``: Airflow's own: the JWT of the ``Authorization: Bearer`` header, or the cookie Airflow's UI sets at
  login (so the pages work inside the UI's iframes); none: 401, an invalid one: 403.
* ``can_read(user, dag_id)``: the auth manager's ``is_authorized_dag(GET, RUN)`` for that DAG. The run pages and
  their files answer 403 without it; the index and the drill trend list only the runs of DAGs the reader may read.

:class:`OpenAccess` is for the stand-alone server (``python -m mm2_failover.ui``, no Airflow): anyone who can
reach its (loopback by default) port reads every report.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.security import HTTPBearer


class AirflowAccess:
    """Airflow's login and DAG permissions (inside Airflow's API server)."""

    open = False

    @staticmethod
    async def get_user(request: Request) -> Any:
        """Airflow's own ``get_user`` (imported at the first request: importing Airflow's API security module costs
        ~1.5 s, and every Airflow process that loads plugins would pay it), with the request's bearer token."""
        from airflow.api_fastapi.core_api.security import get_user as airflow_get_user

        credentials = await HTTPBearer(auto_error=False)(request)
        return await airflow_get_user(request, None, credentials)

    def can_read(self, user: Any, dag_id: str) -> bool:
        from airflow.api_fastapi.app import get_auth_manager
        from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

        return bool(get_auth_manager().is_authorized_dag(method="GET", access_entity=DagAccessEntity.RUN,
                                                         details=DagDetails(id=dag_id), user=user))


class OpenAccess:
    """No login: every report to anyone who reaches the server (the stand-alone server only)."""

    open = True

    @staticmethod
    def get_user() -> None:
        return None

    def can_read(self, user: Any, dag_id: str) -> bool:
        return True
