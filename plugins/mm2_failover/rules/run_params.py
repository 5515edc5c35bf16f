"""The run parameters' one definition (issue 51): each parameter's :class:`ParamSpec` in :data:`PARAMS` - its default
(and so its type), title, help, form section, CLI flag, bounds, allowed values with their labels, and whether it binds
a run. :class:`RunParams` is generated from it (:func:`run_params_class`), and so are the trigger forms
(:mod:`mm2_failover.params`), the CLI's flags (:mod:`mm2_failover.cli`), the operators' ``run_params`` templates and
the reference page (:func:`parameters_markdown`); each generator takes the definition as an argument, today's by
default. What reads the environment or Airflow's configuration (the deployment's topology, four eyes) is in
:mod:`mm2_failover.adapters.config`."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, ClassVar

#: the name of the run parameters' section in Airflow's configuration (``[mm2_failover]``, or
#: ``AIRFLOW__MM2_FAILOVER__<NAME>``), where a deployment sets the :data:`TOPOLOGY` once
CONFIG_SECTION = "mm2_failover"


@dataclass(frozen=True)
class ParamSpec:
    """One run parameter: its ``default`` (which gives its type: text, whole number, on/off or a JSON object - a
    dict default is copied for every run), and what it means to the people who set it: the trigger form's title,
    help and section, the CLI's flag (``""``: ``--<name>`` with dashes; ``None``: not on the command line, where a
    command or another flag decides it), the bounds of an integer (enforced whatever sets it), the allowed values of a
    parameter that has a fixed set, each with the form's label (``labels``, in order: :attr:`choices`), whether a
    run's results depend on it (``binds``: :attr:`RunParams.RESULT_PARAMS`), and further JSON-schema keys for the
    form."""

    default: Any
    title: str
    help: str
    section: str
    cli: str | None = ""
    cli_help: str = ""
    bounds: tuple[int, int | None] | None = None
    labels: dict[str, str] | None = None
    form: dict = field(default_factory=dict)
    binds: bool = False

    @property
    def type(self) -> type:
        """The parameter's type: its default's (str, int, bool or dict)."""
        return type(self.default)

    @property
    def choices(self) -> tuple[str, ...] | None:
        """The allowed values (the keys of :attr:`labels`, in order), or None for a free value."""
        return tuple(self.labels) if self.labels else None

    def default_value(self):
        """The default for one run: a copy of a dict, never the definition's own."""
        return dict(self.default) if isinstance(self.default, dict) else self.default

    def cli_flag(self, name: str) -> str | None:
        return None if self.cli is None else (self.cli or "--" + name.replace("_", "-"))


#: the trigger form's sections, in order: the incident's decisions first (which groups, dry run, is the source
#: reachable, approval), then what else selects them, the safety rules, how MM2 runs, and tuning
SECTIONS = ("Decisions", "What to move", "Safety", "MM2", "Advanced")


class RunParamsBase:
    """What every generated :class:`RunParams` class does with its fields (:func:`run_params_class` makes the fields,
    one per :class:`ParamSpec`, and the class variables below)."""

    #: the definition the class was generated from
    SPECS: ClassVar[Mapping[str, ParamSpec]] = {}

    #: the parameters a run's results depend on (:attr:`ParamSpec.binds`): a run folder keeps them, and a later step
    #: with other values is refused (the others - waits, concurrency - may change between retries)
    RESULT_PARAMS: ClassVar[tuple[str, ...]] = ()

    #: the allowed values of the parameters that have a fixed set (:attr:`ParamSpec.labels`; the trigger form's and
    #: the CLI's choices), enforced whenever a run's parameters are built, with the bounds of :attr:`SPECS`
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __post_init__(self):
        for name, allowed in self.CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"parameter {name}: {getattr(self, name)!r} is not one of {', '.join(allowed)}")
        for name, spec in self.SPECS.items():
            if spec.bounds is None:
                continue
            v, (low, high) = getattr(self, name), spec.bounds
            if not isinstance(v, int) or isinstance(v, bool) or v < low or (high is not None and v > high):
                raise ValueError(
                    f"parameter {name}: {v!r} is not a whole number from {low} to {'any' if high is None else high}"
                )

    def policies(self) -> list:
        """One ReplicationPolicy per source alias."""
        from mm2_failover.rules.naming import ReplicationPolicy  # lazy: not at DAG parse

        out = []
        for a in self.source_aliases:
            o = (self.alias_policies or {}).get(a, {})
            unknown = set(o) - {"policy", "separator", "internal_topic_separator_enabled"}
            if unknown:
                raise ValueError(
                    f"alias_policies[{a!r}]: unknown key(s) {sorted(unknown)}; use 'policy', 'separator' "
                    "and 'internal_topic_separator_enabled'"
                )
            out.append(
                ReplicationPolicy(
                    a,
                    o.get("policy", self.replication_policy),
                    o.get("separator", self.replication_policy_separator),
                    bool(o.get("internal_topic_separator_enabled", self.internal_topic_separator_enabled)),
                    self.home_alias or None,
                )
            )
        return out

    def policy(self, alias: str):
        return {p.source_alias: p for p in self.policies()}[alias]

    @property
    def source_aliases(self) -> list[str]:
        """``source_alias`` may name several aliases, comma-separated (groups replicated from several sources)."""
        return list(dict.fromkeys(a.strip() for a in self.source_alias.split(",") if a.strip()))

    def source_connection(self, alias: str, default: str | None) -> str | None:
        """The connection id (CLI: the config label) of ``alias``'s source cluster, or None for none: the first
        alias defaults to ``default`` (kafka_source); every other alias must be named in ``source_connections``
        (ValueError otherwise: an alias whose source nobody checks is never assumed checked)."""
        conns = self.source_connections or {}
        if alias in conns:
            return conns[alias] or None
        if alias == self.source_aliases[0]:
            return default
        raise ValueError(
            f"source alias {alias!r} has no source connection, so its producers and live groups could not be checked. "
            f'Set source_connections, e.g. {{"{alias}": "kafka_source_{alias}"}} (an Airflow connection of '
            f'{alias}\'s cluster; the CLI: --alias-source-config {alias}=FILE), or {{"{alias}": ""}} to fail over '
            f"its groups without checking its source (as in disaster mode)."
        )

    @classmethod
    def from_mapping(cls, m: dict) -> "RunParams":
        """From the trigger form, the CLI or templated operator arguments (Jinja renders strings: "False", "5",
        a JSON object - each is converted back to its field's type, or refused naming the parameter)."""
        out = {}
        for f in fields(cls):
            if f.name in (m or {}):
                out[f.name] = _coerce(f.name, m[f.name], type(getattr(cls(), f.name)))
        return cls(**out)

    @classmethod
    def templates(cls) -> dict[str, str]:
        """``{name: "{{ params.name }}"}`` for every parameter: what a DAG passes as an operator's ``run_params``."""

        def template(f) -> str:
            if f.default_factory is not MISSING:
                return "{{ params.%s | tojson }}" % f.name
            if f.type in (str, "str"):
                return text_template(f.name)
            return "{{ params.%s }}" % f.name

        return {f.name: template(f) for f in fields(cls)}

    def as_dict(self) -> dict:
        return asdict(self)

    def result_params(self) -> dict:
        d = self.as_dict()
        return {k: d[k] for k in self.RESULT_PARAMS}


def run_params_class(specs: Mapping[str, ParamSpec], name: str = "RunParams") -> type:
    """The frozen dataclass of a run's parameters generated from ``specs``: one field per :class:`ParamSpec`, in
    its order, with its default (a dict's through a factory, so that no two runs share one) and its type, and
    :attr:`~RunParamsBase.CHOICES` and :attr:`~RunParamsBase.RESULT_PARAMS` from the specs' labels and binds. A
    definition the form, the CLI or the checks could not carry is a ValueError naming the parameter: a type other
    than text, whole number, on/off or JSON object, bounds on anything but a whole number, allowed values on anything
    but a text, a default outside its own bounds or allowed values."""
    for n, spec in specs.items():
        if spec.type not in (str, int, bool, dict):
            raise ValueError(f"parameter {n}: a default of type {spec.type.__name__} (use str, int, bool or dict)")
        if spec.bounds is not None and spec.type is not int:
            raise ValueError(f"parameter {n}: bounds are for a whole number, not a {spec.type.__name__}")
        if spec.labels and spec.type is not str:
            raise ValueError(f"parameter {n}: allowed values are for a text, not a {spec.type.__name__}")
    cls = dataclasses.make_dataclass(
        name,
        [
            (
                n,
                spec.type,
                field(default_factory=spec.default_value)
                if isinstance(spec.default, dict)
                else field(default=spec.default),
            )
            for n, spec in specs.items()
        ],
        bases=(RunParamsBase,),
        frozen=True,
        namespace={
            "__module__": __name__,
            "__doc__": "The parameters of one failover run (the DAG's trigger form, the CLI's flags), generated from "
            "their one definition (:func:`run_params_class`).",
            "SPECS": specs,
            "CHOICES": {n: spec.choices for n, spec in specs.items() if spec.choices},
            "RESULT_PARAMS": tuple(n for n, spec in specs.items() if spec.binds),
        },
    )
    cls()  # every default within its own bounds and allowed values (a ValueError naming the parameter)
    return cls


#: every run parameter's one definition, in the order of RunParams' fields: its default and type, title, help,
#: section, CLI flag, bounds, allowed values and form keys. RunParams, the trigger form and the CLI's flags are
#: generated from these (params.py, cli.py), and the reference page (:func:`parameters_markdown`)
PARAMS: dict[str, ParamSpec] = {
    "source_alias": ParamSpec(
        default="primary",
        binds=True,
        title="Source cluster alias(es)",
        help=(
            "MM2's alias of the lost/primary cluster: the checkpoints are read from <alias>.checkpoints.internal "
            "on the target, and replica topics are named <alias>.<topic>. Several aliases, comma-separated, fail "
            "over groups replicated from several sources in one run (one pass over all their checkpoint topics)."
        ),
        section="What to move",
        form={"pattern": "^[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*$", "minLength": 1},
    ),
    "groups_regex": ParamSpec(
        default=".*",
        binds=True,
        title="Groups to fail over (regex)",
        help=(
            "Consumer groups to move, as a (Python) regular expression matched against the whole group id. Narrow"
            " it (e.g. 'orders-.*') to fail over some applications only."
        ),
        section="Decisions",
        cli_help="groups to move (Python regex, whole id)",
        form={"format": "regex", "minLength": 1},
    ),
    "groups_exclude_regex": ParamSpec(
        default="",
        binds=True,
        title="Groups to leave alone (regex)",
        help=("Groups matching this (whole id) are never moved, even if groups_regex matches. Empty: none."),
        section="What to move",
        form={"format": "regex"},
    ),
    "dry_run": ParamSpec(
        default=False,
        title="Dry run",
        help=("Build and export the plan (JSON + CSV for kafka-consumer-groups) and stop: nothing is written."),
        section="Decisions",
        cli=None,
    ),
    "replication_policy": ParamSpec(
        default="default",
        binds=True,
        title="MM2 replication policy",
        help=("'default': replica topics are <alias><separator><topic>; 'identity': they keep the source name."),
        labels={
            "default": "default: replica topics are <alias>.<topic> (DefaultReplicationPolicy)",
            "identity": "identity: replica topics keep the source name (IdentityReplicationPolicy)",
        },
        section="MM2",
    ),
    "replication_policy_separator": ParamSpec(
        default=".",
        binds=True,
        title="Replication policy separator",
        help=(
            "MM2's replication.policy.separator (default '.', several characters allowed). Only used with the "
            "default policy."
        ),
        section="MM2",
        form={"minLength": 1},
    ),
    "internal_topic_separator_enabled": ParamSpec(
        default=True,
        binds=True,
        title="Separator in MM2's own topic names",
        help=(
            "MM2's replication.policy.internal.topic.separator.enabled (default true): with false, MM2 names its "
            "checkpoints topic <alias>.checkpoints.internal whatever the separator."
        ),
        section="MM2",
        cli="--no-internal-topic-separator",
        cli_help="MM2's replication.policy.internal.topic.separator.enabled=false",
    ),
    "alias_policies": ParamSpec(
        default={},
        binds=True,
        title="Per-alias replication policy",
        help=(
            'Only when several source aliases use different policies: {"dc2": {"policy": "identity"}, "dc3": '
            '{"separator": "_", "internal_topic_separator_enabled": false}}. Aliases not listed use the settings '
            "above."
        ),
        section="MM2",
        cli=None,
    ),
    "source_connections": ParamSpec(
        default={},
        binds=True,
        title="Source connection of each alias",
        help=(
            'The Kafka connection of each source alias\'s cluster: {"dc3": "kafka_source_dc3"}. The first alias '
            "uses kafka_source unless listed; every other alias must be listed (its producers and live groups are"
            ' checked there), or given "" to fail it over without checking its source (as in disaster mode, said '
            "in the report)."
        ),
        section="MM2",
        cli=None,
    ),
    "source_reachable": ParamSpec(
        default="detect",
        binds=True,
        title="Is the source cluster reachable?",
        help=(
            "Decided once, at the start of the run. detect: probe each source (3 tries, ~20 s at most); one that "
            "never answers stops the run, nothing done - disaster mode is never entered by itself (a mistyped "
            "address looks like a lost cluster); yes: the same, for a source that must answer; no: the sources "
            "are lost - skip every source-side check (target-side evidence only, with an estimate of the "
            "data-loss window in the report). A wrong password or bad client setting is an error, never "
            "'unreachable'."
        ),
        labels={
            "detect": "detect: probe the source; stop if it never answers",
            "yes": "yes: the source must answer",
            "no": "no: the source is LOST - disaster mode, no source-side checks",
        },
        section="Decisions",
        cli_help="detect: probe the source, stop (exit 4) if it never answers; no: the source is lost (disaster mode)",
    ),
    "topics_regex": ParamSpec(
        default="",
        binds=True,
        title="Topics to check for drain (regex)",
        help=(
            "Source topics whose producers must have stopped and whose replication must have caught up. Empty: "
            "the topics the selected groups consume (their commits on the source); in disaster mode, every "
            "replica topic of the alias."
        ),
        section="What to move",
        cli_help="drain scope (default: the groups' topics)",
        form={"format": "regex"},
    ),
    "drain_quiet_seconds": ParamSpec(
        default=5,
        title="Drain quiet window (s)",
        help=("Source end offsets must not move for this long for producers to count as stopped."),
        section="Safety",
        bounds=(1, 600),
    ),
    "drain_timeout_seconds": ParamSpec(
        default=1800,
        title="Drain timeout (s)",
        help=("How long verify_producers_drained waits before failing with the table of what is not drained."),
        section="Safety",
        bounds=(1, 86400),
    ),
    "groups_empty_timeout_seconds": ParamSpec(
        default=1800,
        title="Empty-group timeout (s)",
        help=("How long check_groups_empty waits for live consumers on the target to stop."),
        section="Safety",
        cli=None,
        bounds=(1, 86400),
    ),
    "max_quarantined_records": ParamSpec(
        default=0,
        binds=True,
        title="Max unusable checkpoint records",
        help=(
            "Fail compute_latest_checkpoints when more checkpoint records than this cannot be decoded. They are "
            "always listed in the run's quarantine output."
        ),
        section="Safety",
        bounds=(0, None),
    ),
    "checkpoint_policy": ParamSpec(
        default="latest",
        binds=True,
        title="Which checkpoint wins",
        help=(
            "latest: the last checkpoint per group/partition (MM2's meaning; safe). max: when a checkpoint went "
            "backwards within the read range (an MM2 restart), keep the highest one. Regressions are always "
            "reported."
        ),
        labels={
            "latest": "latest: the last checkpoint (MM2's meaning; safe)",
            "max": "max: the highest checkpoint when one went backwards",
        },
        section="MM2",
    ),
    "allow_rewind": ParamSpec(
        default=False,
        binds=True,
        title="Allow rewinding target commits",
        help=(
            "When a group's commit on the target is already ahead of its checkpoint, move it back anyway (more "
            "re-reads). Default: keep the commit that is ahead."
        ),
        section="Safety",
    ),
    "on_existing_target_offsets": ParamSpec(
        default="fail",
        binds=True,
        title="Groups that already have commits on the target",
        help=(
            "fail: refuse the run and name them; skip: leave those groups alone; overwrite: replace their commits"
            " (a commit ahead is still kept unless allow_rewind)."
        ),
        labels={
            "fail": "fail: refuse the run and name the groups",
            "skip": "skip: leave those groups alone",
            "overwrite": "overwrite: replace their commits (backed up first)",
        },
        section="Safety",
    ),
    "accept_groups_without_checkpoints": ParamSpec(
        default=False,
        binds=True,
        title="Accept groups without checkpoints",
        help=(
            "A selected group that commits on the source but has no checkpoint at all refuses the run (its "
            "consumers would start on the target without a commit). True: move the other groups and list those in"
            " the report."
        ),
        section="Safety",
    ),
    "translation": ParamSpec(
        default="exact",
        binds=True,
        title="Translation",
        help=(
            "exact: resume each group at the exact record where MM2's offset syncs prove it (archived on the "
            "target side, checked against the records themselves), MM2's checkpoint elsewhere; checkpoint: MM2's "
            "checkpoints as they are (conservative: re-reads)."
        ),
        labels={
            "exact": "exact: the record MM2's offset syncs prove, else the checkpoint",
            "checkpoint": "checkpoint: MM2's checkpoints only",
        },
        section="MM2",
        cli_help="exact: resume where MM2's offset syncs prove the group is; checkpoint: MM2's checkpoints",
    ),
    "mm2_target_alias": ParamSpec(
        default="",
        binds=True,
        title="MM2's alias of the target cluster",
        help=(
            "Names MM2's offset-sync topic (mm2-offset-syncs.<alias>.internal). Empty: found on the cluster, when"
            " there is only one."
        ),
        section="MM2",
        cli_help="MM2's alias of the target (names mm2-offset-syncs.<alias>.internal); default: discovered",
    ),
    "offset_syncs_location": ParamSpec(
        default="source",
        binds=True,
        title="Where MM2 keeps offset syncs",
        help=(
            "MM2's offset-syncs.topic.location (source by default: lost with the source; the archive keeps a copy"
            " on the target side)."
        ),
        labels={"source": "source: on the source cluster (MM2's default)", "target": "target: on the target cluster"},
        section="MM2",
    ),
    "mm2_offsets_topic": ParamSpec(
        default="",
        title="MM2's progress topic",
        help=(
            "The topic on the target where MM2 keeps its Connect offsets - how far it has copied each source "
            "partition, which the drain check reads. Empty: mm2-offsets.<alias>.internal (MM2 in dedicated mode). "
            "MM2's connectors on a Kafka Connect cluster (Strimzi's included) keep them in the worker's "
            "offset.storage.topic (e.g. connect-offsets): name it here. Without it the drain check looks up the "
            "source's last record on the replica instead."
        ),
        section="MM2",
        form={"maxLength": 249},
    ),
    "home_alias": ParamSpec(
        default="",
        binds=True,
        title="Failing back: the target's alias",
        help=(
            "Only to fail back (e.g. source_alias=backup, home_alias=primary, the connections swapped): MM2's "
            "alias of the target cluster. Groups that consumed <home_alias>.<topic> on the source (the history "
            "MM2 copied before the failover) return to <topic> on the target, at offsets read back from the "
            "archived offset syncs of the home_alias flow (MM2 writes no checkpoint for them); other topics move "
            "by the checkpoints of the source_alias flow. Empty: a failover."
        ),
        section="What to move",
        cli_help="failing back: MM2's alias of the target; <home-alias>.<topic> on the source returns to <topic>",
        form={"pattern": "^([A-Za-z0-9._-]+)?$"},
    ),
    "source_groups_must_be_empty": ParamSpec(
        default=True,
        binds=True,
        title="Source groups must be stopped too",
        help=(
            "When the source is reachable, also wait until the groups have no live members on the source (stop "
            "the consumers there first). Turn off only if you accept double consumption."
        ),
        section="Safety",
        cli="--no-source-groups-must-be-empty",
    ),
    "mm2_config": ParamSpec(
        default="",
        title="MM2's configuration file",
        help=(
            "Path of the mm2.properties MM2 runs with, as seen by the Airflow workers: the pre-flight audit warns"
            " about settings that cost records or re-reads (see the report). Empty: only what the clusters show "
            "is audited."
        ),
        section="MM2",
        cli_help="MM2's mm2.properties, for the pre-flight audit (warnings in the log and the report)",
    ),
    "rpo_seconds": ParamSpec(
        default=60,
        title="Recovery point objective (s)",
        help=("The audit warns when MM2's checkpoint or progress intervals are longer than this."),
        section="Safety",
        bounds=(1, None),
    ),
    "apply_concurrency": ParamSpec(
        default=32,
        title="Requests in flight",
        help=("How many groups are read or committed at the same time (one request per group)."),
        section="Advanced",
        bounds=(1, 256),
    ),
    "lock_wait_seconds": ParamSpec(
        default=120,
        title="Writer lock wait (s)",
        help=(
            "One writer per target cluster (failover, rollback, drill writes, the CLI): how long to wait for "
            "another writer before failing (naming it)."
        ),
        section="Advanced",
        bounds=(0, 86400),
    ),
    "require_approval": ParamSpec(
        default=True,
        title="Wait for approval before writing",
        help=(
            "On (default): after the plan is built the run waits for a human to approve exactly that plan (the "
            '"approve_plan" task: Approve or Reject in the UI\'s Required Actions, or through the REST API); only '
            "then are offsets written. Turn off only for an automation that has decided already. A dry run never "
            "asks."
        ),
        section="Decisions",
        cli=None,
    ),
    "approval_timeout_seconds": ParamSpec(
        default=3600,
        title="Approval wait (s)",
        help=(
            "How long the plan waits for a decision. No decision in time: nothing is written, the run fails and "
            "says so (trigger a new run to plan again)."
        ),
        section="Safety",
        cli=None,
        bounds=(10, 7 * 86400),
    ),
    "approver_not_triggerer": ParamSpec(
        default=False,
        title="Approved by someone else",
        help=(
            "On: an approval by the user who triggered this run is refused - nothing is written and the report says "
            "why (four eyes: the person who plans a failover is not the one who lets it write). Off (default): "
            "anyone allowed to answer Required Actions decides."
        ),
        section="Safety",
        cli=None,
    ),
}

#: the parameters of one failover run (the DAG's trigger form, the CLI's flags), generated from :data:`PARAMS`
RunParams = run_params_class(PARAMS)


#: the MM2 topology: the run parameters a deployment sets once, in Airflow's configuration
#: (:func:`mm2_failover.adapters.config.deployment_defaults`)
TOPOLOGY = (
    "source_alias",
    "source_connections",
    "replication_policy",
    "replication_policy_separator",
    "internal_topic_separator_enabled",
    "alias_policies",
    "mm2_target_alias",
    "offset_syncs_location",
    "mm2_offsets_topic",
    "mm2_config",
)


def parameters_markdown(specs: Mapping[str, ParamSpec] = PARAMS) -> str:
    """``docs/reference/parameters.md``: every run parameter from its one definition (``specs``, default
    :data:`PARAMS`: each one's default, title, help, section, CLI flag, bounds, allowed values, whether it binds a
    run), by the trigger form's sections. ``make reference`` writes it; ``tests/unit/test_params_definition.py``
    checks that the page is what this gives."""

    def default_text(name: str) -> str:
        v = specs[name].default
        if isinstance(v, bool):
            return "on" if v else "off"
        return f"`{json.dumps(v)}`" if isinstance(v, dict) else "(empty)" if v == "" else f"`{v}`"

    def values(name: str, spec: ParamSpec) -> str:
        if spec.labels:
            return "; ".join(f"`{k}`: {v}" for k, v in spec.labels.items())
        if spec.bounds:
            low, high = spec.bounds
            return f"{low} to {'any' if high is None else high}"
        return ""

    lines = [
        "# Run parameters",
        "",
        "Generated from their one definition (`plugins/mm2_failover/rules/run_params.py`: `PARAMS`) by `make "
        "reference`; a test fails when this page differs. `RunParams`, the trigger forms, the CLI's flags and the "
        "operators' `run_params` are generated from the same definition. *Set once*: the MM2 topology's default "
        f"for every DAG and the CLI comes from Airflow's configuration (`[{CONFIG_SECTION}]`, or "
        f"`AIRFLOW__{CONFIG_SECTION.upper()}__<NAME>`) where the deployment sets it. *Binds a run*: a run folder "
        "keeps the value, and a later step or retry with another is refused.",
        "",
    ]
    for section in SECTIONS:
        names = [n for n, spec in specs.items() if spec.section == section]
        lines += [
            f"## {section}",
            "",
            "| parameter | default | values | CLI | binds a run | what it does |",
            "|---|---|---|---|---|---|",
        ]
        for n in names:
            spec = specs[n]
            flag = spec.cli_flag(n)
            deployed = f"; set once: `[{CONFIG_SECTION}] {n}`" if n in TOPOLOGY else ""
            lines.append(
                f"| `{n}` ({spec.title}) | {default_text(n)}{deployed} | {values(n, spec)} | "
                f"{f'`{flag}`' if flag else '(not on the command line)'} | {'yes' if spec.binds else ''} | "
                f"{' '.join(spec.help.replace('|', '/').split())} |"
            )
        lines.append("")
    return "\n".join(lines)


def text_template(name: str) -> str:
    """The template of a text parameter in an operator's argument: an optional text the trigger form leaves empty is
    null, rendered "" (a bare ``{{ params.x }}`` renders "None")."""
    return "{{ params.%s or '' }}" % name


def _coerce(name: str, value, ty):
    if isinstance(value, ty) and not (ty is int and isinstance(value, bool)):
        return value
    if isinstance(value, str):
        v = value.strip()
        try:
            if ty is bool and v.lower() in ("true", "false"):
                return v.lower() == "true"
            if ty is int and re.fullmatch(r"-?\d+", v):
                return int(v)
            if ty is dict:
                if v in ("", "None"):
                    return {}
                try:
                    d = json.loads(v)
                except ValueError:
                    d = ast.literal_eval(v)
                if isinstance(d, dict):
                    return d
            if ty is str:
                return value
        except (ValueError, SyntaxError):
            pass
    if ty is str and value is None:
        return ""
    raise ValueError(f"parameter {name}: {value!r} is not a {ty.__name__}")
