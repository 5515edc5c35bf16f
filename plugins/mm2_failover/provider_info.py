"""The provider's description for Airflow (the wheel's ``apache_airflow_provider`` entry point): ``airflow providers
list`` shows mm2-failover with its hooks, connection type, notifier, plugin and the ``[mm2_failover]`` configuration
section (the MM2 topology set once, the deployment's settings, who hears of runs, four eyes) - so that ``airflow config list`` documents each
option where a deployment sets it. Read by Airflow's providers manager; imports nothing at module level but the
parameters' definition."""

from __future__ import annotations

from mm2_failover import __version__
from mm2_failover.adapters.config import DEPLOYMENT_SETTINGS, legacy_variable
from mm2_failover.rules.run_params import CONFIG_SECTION, PARAMS, TOPOLOGY, RunParams

#: the [mm2_failover] options that are not run parameters: rule 8 of mm2_failover.rules.notify, approval rule 6
OTHER_OPTIONS = {
    "notify_email": ("string", "Addresses told of failures, approvals asked and runs verified, comma-separated.", ""),
    "notify_smtp_conn_id": ("string", "The SMTP connection those mails are sent through.", "smtp_default"),
    "notifiers": ("string", "Further notifiers, comma-separated module:factory entries.", "mymodule:make_notifier"),
    "approver_not_triggerer": (
        "boolean",
        "Four eyes for every failover: an approval by the user who triggered the run is refused (the trigger form "
        "cannot turn it off).",
        "True",
    ),
}


def _option_type(name: str) -> str:
    v = getattr(RunParams(), name)
    return "boolean" if isinstance(v, bool) else "integer" if isinstance(v, int) else "string"


def config_section() -> dict:
    """``[mm2_failover]``: the topology, the deployment's settings and who hears of runs - every option with no
    default of its own (unset: the run parameter's or the setting's default applies)."""
    options = {}
    for name in TOPOLOGY:
        spec = PARAMS[name]
        options[name] = {
            "description": f"{spec.title}: {' '.join(spec.help.split())} The default of every DAG's form and of the "
            "CLI; a run's conf or a flag still wins.",
            "version_added": "0.1.0",
            "type": _option_type(name),
            "example": None,
            "default": None,
        }
    for name, text in DEPLOYMENT_SETTINGS.items():
        options[name] = {
            "description": f"{text} Formerly the environment variable {legacy_variable(name)}, which still overrides "
            "it for one release.",
            "version_added": "0.1.0",
            "type": "string",
            "example": None,
            "default": None,
        }
    for name, (kind, text, example) in OTHER_OPTIONS.items():
        options[name] = {"description": text, "version_added": "0.1.0", "type": kind, "example": example or None}
        options[name]["default"] = None
    return {"description": "mm2-failover: the MM2 topology set once, and who hears of runs.", "options": options}


def get_provider_info() -> dict:
    return {
        "package-name": "mm2-failover",
        "name": "mm2-failover",
        "description": "Fail Kafka consumer groups over to a MirrorMaker 2 replica cluster at the right offsets, "
        "with proof.",
        "versions": [__version__],
        "integrations": [{"integration-name": "MirrorMaker 2 failover", "tags": ["software"]}],
        "hooks": [
            {
                "integration-name": "MirrorMaker 2 failover",
                "python-modules": ["mm2_failover.hooks.kafka_cluster", "mm2_failover.hooks.notify_connection"],
            }
        ],
        "connection-types": [
            {
                "connection-type": "mm2_failover_notify",
                "hook-class-name": "mm2_failover.hooks.notify_connection.NotifyConnectionHook",
                "hook-name": "mm2-failover notifications",
            }
        ],
        "notifications": ["mm2_failover.notifications.RunFailureNotifier"],
        "plugins": [{"name": "mm2_failover", "plugin-class": "mm2_failover.airflow_plugin.Mm2FailoverPlugin"}],
        "config": {CONFIG_SECTION: config_section()},
    }
