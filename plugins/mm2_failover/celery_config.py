"""The CeleryExecutor's configuration for mm2-failover: Airflow's own default, plus ``imports`` naming
:mod:`mm2_failover.preload` (issue 33's recovery time, in issue 34's deployment with several workers).

A Celery worker runs each task in a process forked from one of its pool's children, which it forks from itself at
its start. Celery imports a configuration's ``imports`` in the worker's main process before it starts the pool
(``WorkController.__init__`` -> ``loader.init_worker``), so with this configuration every pool child, and every task
forked from one, has the heavy third-party modules already - as the LocalExecutor's workers have through the
scheduler's settings. Named by ``[celery] celery_config_options`` (:func:`mm2_failover.adapters.config.preload_settings`)::

    [celery] celery_config_options = mm2_failover.celery_config.CELERY_CONFIG

Every other option is Airflow's (``DEFAULT_CELERY_CONFIG``, built from the ``[celery]`` section as usual). The
scheduler reads this configuration too, to send tasks; it never starts a worker, so it imports nothing more.
"""

from __future__ import annotations

from airflow.providers.celery.executors.default_celery import DEFAULT_CELERY_CONFIG

CELERY_CONFIG = {
    **DEFAULT_CELERY_CONFIG,
    "imports": (*DEFAULT_CELERY_CONFIG.get("imports", ()), "mm2_failover.preload"),
}
