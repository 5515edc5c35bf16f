"""The trigger form of the failover DAGs: every run parameter with a title, a description, a type, a section and
validation (a bad value is refused before any task runs), generated from their one definition,
:data:`mm2_failover.rules.run_params.PARAMS` (defaults, types, allowed values, titles, help, sections, bounds). Defaults
are the safe choice."""

from __future__ import annotations

from collections.abc import Mapping

from airflow.sdk import Param

from mm2_failover.adapters.config import deployment_defaults
from mm2_failover.rules.run_params import PARAMS, SECTIONS, ParamSpec, RunParams

_TYPES = {str: "string", bool: "boolean", int: "integer", dict: "object"}


#: what the on-call engineer must type on the on-demand failover's form: no default stands for a choice
#: (``groups_regex``: ``.*`` moves every group; a scheduled DAG, which nobody types into, keeps the default)
ASKED = ("groups_regex",)


def optional_text(default) -> bool:
    """A text parameter whose default is "" (none): the form's field is nullable and starts empty - Airflow's trigger
    form keeps a plain ``string`` field with an empty default invalid, and its Trigger button disabled, until it is
    filled (a value there would change the run: a home alias makes it a failback)."""
    return isinstance(default, str) and default == ""


def form_param(
    name: str, asked: bool = False, defaults: dict | None = None, specs: Mapping[str, ParamSpec] = PARAMS
) -> Param:
    """The trigger form's field of run parameter ``name``, generated from its one definition (``specs``, default
    :data:`mm2_failover.rules.run_params.PARAMS`): the default - or the deployment's topology (``defaults``:
    :func:`mm2_failover.adapters.config.deployment_defaults`) - and type, the allowed values (``enum``), the bounds,
    title, help, section and further schema keys. An optional text is nullable (None, rendered "" in the operators'
    templates); ``asked``: no default, the form requires a value."""
    spec = specs[name]
    default = (defaults or {}).get(name, spec.default)
    schema: dict = {"type": _TYPES[spec.type], "title": spec.title, "section": spec.section}
    if optional_text(default):
        schema["type"], default = ["null", "string"], None
    if spec.choices:
        schema["enum"] = list(spec.choices)
        schema["values_display"] = dict(spec.labels or {})  # the form shows these; the run receives the value
    if spec.bounds is not None:
        schema["minimum"] = spec.bounds[0]
        if spec.bounds[1] is not None:
            schema["maximum"] = spec.bounds[1]
    if asked:
        return Param(description=spec.help, **schema, **{"minLength": 1, **spec.form})
    return Param(dict(default) if isinstance(default, dict) else default, description=spec.help, **schema, **spec.form)


def failover_params(scheduled: bool = False, specs: Mapping[str, ParamSpec] = PARAMS) -> dict[str, Param]:
    """Every run parameter of ``specs`` (default: the one definition), in the order of the form's sections;
    ``scheduled``: for a DAG on a schedule, where nobody types into a form, the :data:`ASKED` ones keep their
    defaults."""
    order = {sec: i for i, sec in enumerate(SECTIONS)}
    names = list(specs)
    deployed = deployment_defaults()  # the topology set once for the deployment: every DAG's defaults
    return {
        n: form_param(n, asked=n in ASKED and not scheduled, defaults=deployed, specs=specs)
        for n in sorted(names, key=lambda n: (order[specs[n].section], names.index(n)))
    }


def rollback_params() -> dict[str, Param]:
    return {
        "failover_run_id": Param(
            None,
            type=["null", "string"],
            title="Failover run to undo",
            description="The run id of the mm2_failover run whose backup to restore (see its report). "
            "Or give backup_path.",
        ),
        "backup_path": Param(
            None,
            type=["null", "string"],
            title="Backup file",
            description="Path of a backup.json written by apply_group_offsets. Overrides failover_run_id.",
        ),
        "force": Param(
            False,
            type="boolean",
            title="Force",
            description="Roll back even partitions whose commits moved since the failover (consumers committed on "
            "the target): they are rewound to the backup. Default: refuse and list them.",
        ),
        "groups_empty_timeout_seconds": failover_params()["groups_empty_timeout_seconds"],
        "apply_concurrency": failover_params()["apply_concurrency"],
        "lock_wait_seconds": failover_params()["lock_wait_seconds"],
    }


def run_params_template(params: dict, params_class: type = RunParams) -> dict[str, str]:
    """The ``run_params`` argument of the pipeline's operators in a DAG with these params: ``{{ params.x }}`` for
    each run parameter the DAG has (``params_class``: the class generated from the definition,
    :func:`mm2_failover.rules.run_params.run_params_class`)."""
    return {k: v for k, v in params_class.templates().items() if k in params}


def archive_params() -> dict[str, Param]:
    """What names the offset-sync topics to archive (the same values as the failover's)."""
    f = failover_params(scheduled=True)
    return {
        k: f[k]
        for k in (
            "source_alias",
            "source_connections",
            "replication_policy",
            "replication_policy_separator",
            "internal_topic_separator_enabled",
            "alias_policies",
            "mm2_target_alias",
            "offset_syncs_location",
        )
    }


def readiness_params() -> dict[str, Param]:
    """What selects the groups and how a failover would plan them; nothing about waiting, approving or writing (the
    readiness check never writes)."""
    f = failover_params(scheduled=True)
    for k in (
        "dry_run",
        "drain_timeout_seconds",
        "groups_empty_timeout_seconds",
        "source_groups_must_be_empty",
        "require_approval",
        "approval_timeout_seconds",
        "lock_wait_seconds",
    ):
        f.pop(k)
    return f
