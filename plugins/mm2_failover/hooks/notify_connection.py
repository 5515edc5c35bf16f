"""The connection type of the ``mm2_failover_notify`` connection (who hears of a run: rule 8 of
:mod:`mm2_failover.rules.notify`), registered by the provider (:mod:`mm2_failover.provider_info`) so that Airflow's
connection form offers it with only the field it reads: the extra, a JSON object such as
``{"email": "a@x, b@x", "notifiers": "mod:factory", "smtp_conn_id": "smtp_default"}``. A connection of any other
type with that id and extra works the same (the notifier reads only the extra, at every message)."""

from __future__ import annotations

from airflow.sdk import BaseHook

from mm2_failover.rules.notify import NOTIFY_CONN_ID


class NotifyConnectionHook(BaseHook):
    conn_name_attr = "notify_conn_id"
    default_conn_name = NOTIFY_CONN_ID
    conn_type = "mm2_failover_notify"
    hook_name = "mm2-failover notifications"

    def __init__(self, notify_conn_id: str = NOTIFY_CONN_ID):
        super().__init__()
        self.notify_conn_id = notify_conn_id

    def get_conn(self) -> dict:
        """The connection's extra: the recipients, notifiers and SMTP connection it names."""
        return self.get_connection(self.notify_conn_id).extra_dejson

    @classmethod
    def get_ui_field_behaviour(cls) -> dict:
        return {
            "hidden_fields": ["host", "schema", "login", "password", "port"],
            "relabeling": {"extra": "Who hears of runs (JSON)"},
            "placeholders": {
                "extra": '{"email": "oncall@example.com, dr@example.com", "notifiers": "mymodule:make_notifier", '
                '"smtp_conn_id": "smtp_default"}'
            },
        }
