"""The e2e test's auth manager: Airflow's own simple auth manager (real logins, real JWTs), except that the user
``outsider`` may not read the ``mm2_failover`` DAG - a per-DAG permission such as the FAB or Keycloak auth managers
give, which the simple one cannot express. The api-server loads it through ``[core] auth_manager``."""

from __future__ import annotations

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

HIDDEN = {"outsider": {"mm2_failover"}}


class OneDagHiddenAuthManager(SimpleAuthManager):
    def is_authorized_dag(self, *, method, user, access_entity=None, details=None) -> bool:
        if details is not None and details.id in HIDDEN.get(user.get_name(), ()):
            return False
        return super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
