"""Who may read the "mm2-failover reports" pages (issue 18): the same login as Airflow's UI and the reader's read
permission on the DAG whose runs a page shows - decided by Airflow's own auth manager, through the dependencies
Airflow exposes to plugin apps (``airflow.api_fastapi.core_api.security``).

* ``get_user``: Airflow's own: the JWT of the ``Authorization: Bearer`` header, or the cookie Airflow's UI sets at
  login (so the pages work inside the UI's iframes); none: 401, an invalid one: 403.
* ``can_read(user, dag_id)``: the auth manager's ``is_authorized_dag(GET, RUN)`` for that DAG. The run pages and
  their files answer 403 without it; the index and the drill trend list only the runs of DAGs the reader may read.

:class:`OpenAccess` is for the stand-alone server (``python -m mm2_failover.ui.app``, no Airflow): anyone who can
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
        from airflow.api_fastapi.core_api.security import get_user as airflow_get_user  # lazy: costs ~1.5 s (docstring)

        credentials = await HTTPBearer(auto_error=False)(request)
        return await airflow_get_user(request, None, credentials)

    def can_read(self, user: Any, dag_id: str) -> bool:
        from airflow.api_fastapi.app import get_auth_manager  # lazy: airflow's API server only
        from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

        return bool(
            get_auth_manager().is_authorized_dag(
                method="GET", access_entity=DagAccessEntity.RUN, details=DagDetails(id=dag_id), user=user
            )
        )

    @staticmethod
    def task_tries(dag_id: str, run_id: str) -> list[dict]:
        """Every try of the run's tasks, from Airflow's metadata database (the run page's timeline): the tries
        before the current one are in ``task_instance_history``. A sensor in reschedule mode starts each poke anew
        (Airflow keeps only the last poke's start on the try): its first poke's start, and how many pokes it made,
        are in ``task_reschedule``. Times in seconds since the epoch (None: not yet)."""
        from airflow.models.taskinstance import (
            TaskInstance,  # lazy: airflow's API server only
        )
        from airflow.models.taskinstancehistory import TaskInstanceHistory
        from airflow.models.taskreschedule import TaskReschedule
        from airflow.utils.session import create_session
        from sqlalchemy import func, select  # lazy: airflow's API server

        def of(model, id_column):
            return select(
                id_column,
                model.task_id,
                model.map_index,
                model.try_number,
                model.state,
                model.start_date,
                model.end_date,
            ).where(model.dag_id == dag_id, model.run_id == run_id)

        seen: dict[tuple, dict] = {}
        with create_session() as session:
            rows = [
                *session.execute(of(TaskInstanceHistory, TaskInstanceHistory.task_instance_id)),
                *session.execute(of(TaskInstance, TaskInstance.id)),  # the current try last: it wins over its history
            ]
            pokes = {
                ti_id: (first, n)
                for ti_id, first, n in session.execute(
                    select(TaskReschedule.ti_id, func.min(TaskReschedule.start_date), func.count())
                    .where(TaskReschedule.ti_id.in_([r[0] for r in rows]))
                    .group_by(TaskReschedule.ti_id)
                )
            }
        for ti_id, task_id, map_index, try_number, state, start, end in rows:
            first, n = pokes.get(ti_id, (None, 0))
            start = min(x for x in (start, first) if x is not None) if (start or first) else None
            seen[(task_id, map_index, try_number)] = {
                "task_id": task_id,
                "map_index": map_index,
                "try_number": try_number,
                "state": str(getattr(state, "value", state) or ""),
                "start": start.timestamp() if start else None,
                "end": end.timestamp() if end else None,
                "pokes": n + 1 if n else 1,
            }
        return list(seen.values())


class OpenAccess:
    """No login: every report to anyone who reaches the server (the stand-alone server only)."""

    open = True

    @staticmethod
    def get_user() -> None:
        return None

    def can_read(self, user: Any, dag_id: str) -> bool:
        return True

    @staticmethod
    def task_tries(dag_id: str, run_id: str) -> None:
        """No Airflow, no task tries: the run page has no timeline."""
        return None
