"""Configuration in one place: connection ids, run parameters, and where artifacts and jars live.

Cluster access comes only from Airflow connections (or the same ids as ``AIRFLOW_CONN_*`` environment
variables for the CLI):

* ``kafka_source`` / ``kafka_target`` - connection type ``kafka``; the extra is a JSON object of librdkafka
  settings (``bootstrap.servers`` plus any ``security.protocol``/``sasl.*``/``ssl.*``), passed through
  untouched and never logged;
* ``spark_default`` - connection type ``spark``; host = master (``local[2]``, ``spark://host``, ``yarn``,
  ``k8s://...``).

Paths come from environment variables (defaults under the repository's ``var/`` and ``.cache/``):
``MM2_FAILOVER_ARTIFACTS`` (run artifacts), ``MM2_FAILOVER_SPARK_JARS`` (Spark's Kafka source jars),
``MM2_FAILOVER_SPARK_CONF`` (a JSON object of extra ``spark-submit --conf`` settings).
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import ClassVar

SOURCE_CONN_ID = "kafka_source"
TARGET_CONN_ID = "kafka_target"
SPARK_CONN_ID = "spark_default"
SPARK_CONNECT_CONN_ID = "spark_connect_default"  # optional: a warm Spark Connect server (conn type spark_connect)

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # mm2_failover/ (this module is in adapters/)
PLUGINS_DIR = PACKAGE_DIR.parent  # what must be on the driver's PYTHONPATH
REPO_ROOT = PLUGINS_DIR.parent  # defaults for a checkout (var/, .cache/); a deployment sets the variables below
# the job ships inside the package: a deployment that copies only dags/ and plugins/ has it
SPARK_JOB = PACKAGE_DIR / "jobs" / "run_checkpoint_pass.py"  # the file of the job (the package jobs/checkpoint_pass/)


def preload_settings() -> dict[str, str]:
    """Airflow's settings (as environment variables) that make the executors' workers import
    :mod:`mm2_failover.preload`'s modules once, before they fork tasks: the LocalExecutor's (the scheduler's
    ``[scheduler] mp_start_method`` and ``mp_forkserver_preload``, Airflow 3.3) and the CeleryExecutor's (``[celery]
    celery_config_options``: :mod:`mm2_failover.celery_config`). Importing that module imports them: name it, do not
    import it."""
    return {
        "AIRFLOW__SCHEDULER__MP_START_METHOD": "forkserver",
        "AIRFLOW__SCHEDULER__MP_FORKSERVER_PRELOAD": "mm2_failover.preload",
        "AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS": "mm2_failover.celery_config.CELERY_CONFIG",
    }


def artifacts_root():
    """Where run folders live (``MM2_FAILOVER_ARTIFACTS``): a local folder (default ``var/artifacts``) or an object
    store's URL (``s3://bucket/prefix``: :mod:`mm2_failover.adapters.store`)."""
    from mm2_failover.adapters.store import as_path

    return as_path(os.environ.get("MM2_FAILOVER_ARTIFACTS") or REPO_ROOT / "var" / "artifacts")


def state_root() -> Path:
    """The latest-checkpoint state Spark reads and writes (:mod:`mm2_failover.adapters.state`): always a local (or shared
    POSIX) folder - ``MM2_FAILOVER_STATE``, else ``<archive>/latest-state`` when the archive is a local folder, else
    ``var/state`` on each host: then it is this host's copy of :func:`state_store`."""
    from mm2_failover.adapters.store import is_remote

    if os.environ.get("MM2_FAILOVER_STATE"):
        if is_remote(os.environ["MM2_FAILOVER_STATE"]):
            raise ValueError(
                f"MM2_FAILOVER_STATE={os.environ['MM2_FAILOVER_STATE']}: the latest-checkpoint state is "
                "written by Spark into a local or shared folder, not an object store; set a folder (the "
                "state is kept in the store beside an archive there)"
            )
        return Path(os.environ["MM2_FAILOVER_STATE"])
    arch = archive_root()
    return REPO_ROOT / "var" / "state" if is_remote(arch) else arch / "latest-state"


def state_store():
    """Where the state is kept when the archive is in an object store (``<archive>/latest-state`` there; each job
    works on the host's copy, :func:`state_root`, pulled before and pushed after a refresh); None otherwise."""
    from mm2_failover.adapters.store import is_remote

    arch = archive_root()
    return arch / "latest-state" if is_remote(arch) else None


def archive_root() -> Path:
    """Where MM2's offset syncs are archived on the target side (``MM2_FAILOVER_ARCHIVE``; default beside the run
    artifacts). Shared by the archive DAG, the failover DAG and the CLI."""
    from mm2_failover.adapters.store import as_path

    return as_path(os.environ.get("MM2_FAILOVER_ARCHIVE") or artifacts_root() / "archive")


@dataclass(frozen=True)
class WriterLockSettings:
    """Where the one-writer-per-target lock lives (``MM2_FAILOVER_LOCK``): ``file`` (default: an ``flock`` under the
    artifacts folder, :mod:`mm2_failover.adapters.locks`; every writer on one host or a shared filesystem) or ``kafka`` (a
    lease in a topic of the target cluster, :mod:`mm2_failover.adapters.kafka_lock`; writers on any host). The lease's times,
    in seconds: ``MM2_FAILOVER_LOCK_LEASE_SECONDS`` (60; a dead holder's lease runs out within it),
    ``MM2_FAILOVER_LOCK_MARGIN_SECONDS`` (20; a holder stops writing this long before its lease would run out, more
    than one write's timeout), ``MM2_FAILOVER_LOCK_RENEW_SECONDS`` (10); ``MM2_FAILOVER_LOCK_TOPIC``
    (``mm2-failover.locks``), which also names the holders' transactional ids (:meth:`transactional_id`)."""

    kind: str = "file"
    topic: str = "mm2-failover.locks"
    lease_s: float = 60.0
    margin_s: float = 20.0
    renew_s: float = 10.0

    KINDS = ("file", "kafka")

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "WriterLockSettings":
        """A ValueError naming the variable for a bad value."""
        env = dict(os.environ if env is None else env)
        kind = (env.get("MM2_FAILOVER_LOCK") or "file").strip().lower()
        if kind not in cls.KINDS:
            raise ValueError(f"MM2_FAILOVER_LOCK={kind!r}: use one of {', '.join(cls.KINDS)}")
        from mm2_failover.adapters.store import is_remote

        art = env.get("MM2_FAILOVER_ARTIFACTS") or ""
        if kind == "file" and is_remote(art):
            raise ValueError(
                f"MM2_FAILOVER_ARTIFACTS={art} is an object store, where a file lock cannot keep one "
                "writer per target cluster across hosts: set MM2_FAILOVER_LOCK=kafka (docs/architecture.md, "
                '"Deploying")'
            )
        times = {}
        for name, var, default in (
            ("lease_s", "MM2_FAILOVER_LOCK_LEASE_SECONDS", cls.lease_s),
            ("margin_s", "MM2_FAILOVER_LOCK_MARGIN_SECONDS", cls.margin_s),
            ("renew_s", "MM2_FAILOVER_LOCK_RENEW_SECONDS", cls.renew_s),
        ):
            raw = env.get(var)
            try:
                times[name] = float(raw) if raw not in (None, "") else default
            except ValueError:
                raise ValueError(f"{var}={raw!r} is not a number of seconds") from None
        topic = (env.get("MM2_FAILOVER_LOCK_TOPIC") or cls.topic).strip()
        return cls(kind, topic, **times)

    def transactional_id(self, cluster_id: str) -> str:
        """The transactional id every holder of target ``cluster_id``'s lease commits through
        (:mod:`mm2_failover.adapters.fenced`): the lock topic's name, a dot, the cluster id. The least-privilege ACL is Write
        on the TransactionalId prefix ``<lock topic>.``."""
        return f"{self.topic}.{cluster_id}"


def spark_jars(s3a: bool | None = None) -> list[str]:
    """The jars every Spark job of the project is given (``--jars``): Spark's Kafka source, and S3A's when ``s3a``
    (default: when the job writes through S3A, :func:`spark_io`)."""
    d = Path(os.environ.get("MM2_FAILOVER_SPARK_JARS", REPO_ROOT / ".cache" / "jars" / "spark"))
    jars = sorted(str(p) for p in d.glob("*.jar"))
    if not jars:
        raise FileNotFoundError(
            f"Spark's Kafka source jars not found in {d}: run scripts/fetch_jars.sh "
            "(make setup) or set MM2_FAILOVER_SPARK_JARS"
        )
    if s3a if s3a is not None else spark_io() == "s3a":
        d = Path(os.environ.get("MM2_FAILOVER_S3A_JARS", REPO_ROOT / ".cache" / "jars" / "s3a"))
        more = sorted(str(p) for p in d.glob("*.jar"))
        if not any(Path(j).name.startswith("hadoop-aws-") for j in more):
            raise FileNotFoundError(
                f"S3A's jars (hadoop-aws and the AWS SDK's) not found in {d}, and the job "
                "writes through S3A (MM2_FAILOVER_SPARK_IO): run scripts/fetch_jars.sh (make "
                "setup) or set MM2_FAILOVER_S3A_JARS"
            )
        jars += more
    return jars


SPARK_IO = ("stage", "s3a")


def spark_io(env: dict[str, str] | None = None) -> str:
    """How the latest-checkpoints job's answers reach a run folder in an object store (``MM2_FAILOVER_SPARK_IO``):

    * ``s3a`` (the default for ``s3://`` artifacts) - Spark writes them into the store itself (``s3a://``, Hadoop's
      S3 filesystem: :func:`s3a_settings`), from whichever hosts its executors run on;
    * ``stage`` (the default otherwise) - the job writes them on the driver's host and the task uploads them
      (:meth:`mm2_failover.adapters.spark.JobSubmission.publish`): any fsspec store, but every executor must be able to
      write that host's folder (``local[N]``, or a cluster on one host). With local artifacts there is nothing to
      stage: the job writes the run folder.

    A ValueError naming the variable for a bad value."""
    from mm2_failover.adapters.store import scheme_of

    env = os.environ if env is None else env
    art = env.get("MM2_FAILOVER_ARTIFACTS") or ""
    s3 = scheme_of(art) in ("s3", "s3a")
    raw = (env.get("MM2_FAILOVER_SPARK_IO") or "").strip().lower()
    if not raw:
        return "s3a" if s3 else "stage"
    if raw not in SPARK_IO:
        raise ValueError(f"MM2_FAILOVER_SPARK_IO={raw!r}: use one of {', '.join(SPARK_IO)}")
    if raw == "s3a" and not s3:
        raise ValueError(
            f"MM2_FAILOVER_SPARK_IO=s3a, but MM2_FAILOVER_ARTIFACTS is {art or 'a local folder'}, not "
            "s3://: S3A writes only to S3 (or an S3-compatible server); unset MM2_FAILOVER_SPARK_IO"
        )
    return raw


def s3a_settings(env: dict[str, str] | None = None) -> dict[str, str]:
    """Hadoop's S3A settings for the job, from the standard AWS variables the rest of the pipeline reads (s3fs):
    ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` (an S3-compatible server: path-style requests),
    ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, and the keys ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``
    (``AWS_SESSION_TOKEN``). Without keys S3A's own chain decides (instance profile, web identity...). They are
    secrets: they go into the job's private options file, never onto a command line (:mod:`mm2_failover.adapters.spark`),
    and the job sets them on its Spark session."""
    env = os.environ if env is None else env
    out: dict[str, str] = {}
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        out["fs.s3a.endpoint"] = endpoint
        out["fs.s3a.path.style.access"] = "true"
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        out["fs.s3a.endpoint.region"] = region
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        out["fs.s3a.access.key"] = env["AWS_ACCESS_KEY_ID"]
        out["fs.s3a.secret.key"] = env["AWS_SECRET_ACCESS_KEY"]
        if env.get("AWS_SESSION_TOKEN"):
            out["fs.s3a.session.token"] = env["AWS_SESSION_TOKEN"]
            out["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
    return out


def s3a_url(url: str) -> str:
    """``s3://bucket/key`` as Hadoop's ``s3a://bucket/key``."""
    return "s3a://" + url.split("://", 1)[1]


def java_kafka_classpath() -> str:
    """Kafka's Java client for the small JVM helpers (the Spark Kafka source's kafka-clients jar and pyspark's
    slf4j), as a java -cp value."""
    import importlib.util

    jars = [j for j in spark_jars(s3a=False) if "kafka-clients" in Path(j).name]
    spec = importlib.util.find_spec("pyspark")
    if spec and spec.origin:
        jars += sorted(str(p) for p in (Path(spec.origin).parent / "jars").glob("slf4j-api-*.jar"))
    return os.pathsep.join(jars)


def spark_conf() -> dict[str, str]:
    raw = os.environ.get("MM2_FAILOVER_SPARK_CONF", "")
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"MM2_FAILOVER_SPARK_CONF is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ValueError("MM2_FAILOVER_SPARK_CONF must be a JSON object of spark-submit --conf settings")
    return {str(k): str(v) for k, v in data.items()}


def run_dir(dag_id: str, run_id: str) -> Path:
    """Where one DAG run keeps its artifacts (snapshot, checkpoints, plan, backup, report)."""
    safe = re.sub(r"[^A-Za-z0-9_.+-]", "_", run_id)
    return artifacts_root() / dag_id / safe


@dataclass(frozen=True)
class ParamSpec:
    """What a run parameter means to the people who set it: the trigger form's title, help and section, the CLI's flag
    (``""``: ``--<name>`` with dashes; ``None``: not on the command line, where a command or another flag decides it),
    the bounds of an integer (enforced whatever sets it), the allowed values of a parameter that has a fixed set,
    each with the form's label (``labels``, in order: :attr:`RunParams.CHOICES` is made from them), whether a run's
    results depend on it (``binds``: :attr:`RunParams.RESULT_PARAMS`), and further JSON-schema keys for the form."""

    title: str
    help: str
    section: str
    cli: str | None = ""
    cli_help: str = ""
    bounds: tuple[int, int | None] | None = None
    labels: dict[str, str] | None = None
    form: dict = field(default_factory=dict)
    binds: bool = False

    def cli_flag(self, name: str) -> str | None:
        return None if self.cli is None else (self.cli or "--" + name.replace("_", "-"))


#: the trigger form's sections, in order: the incident's decisions first (which groups, dry run, is the source
#: reachable, approval), then what else selects them, the safety rules, how MM2 runs, and tuning
SECTIONS = ("Decisions", "What to move", "Safety", "MM2", "Advanced")


@dataclass(frozen=True)
class RunParams:
    """The parameters of one failover run (the DAG's trigger form, the CLI's flags): their one definition and
    their defaults (``params.py`` builds the trigger form from these)."""

    source_alias: str = "primary"
    groups_regex: str = ".*"
    groups_exclude_regex: str = ""
    dry_run: bool = False
    replication_policy: str = "default"  # default | identity
    replication_policy_separator: str = "."
    internal_topic_separator_enabled: bool = True  # MM2's replication.policy.internal.topic.separator.enabled
    # per-alias overrides of the three settings above, e.g. {"dc3": {"separator": "_"}}
    alias_policies: dict = field(default_factory=dict)
    # the Airflow connection (CLI: the config) of each source alias's cluster; "" = none (that alias is not checked)
    source_connections: dict = field(default_factory=dict)
    source_reachable: str = "detect"  # detect | yes | no (disaster mode)
    topics_regex: str = ""  # drain scope; empty = the topics the selected groups consume
    drain_quiet_seconds: int = 5
    drain_timeout_seconds: int = 1800
    groups_empty_timeout_seconds: int = 1800
    max_quarantined_records: int = 0
    checkpoint_policy: str = "latest"  # latest | max
    allow_rewind: bool = False
    on_existing_target_offsets: str = "fail"  # fail | skip | overwrite
    accept_groups_without_checkpoints: bool = False
    # exact: translate each group's source position from MM2's offset syncs where they prove it; checkpoint: MM2's
    # checkpoints as they are (conservative)
    translation: str = "exact"
    mm2_target_alias: str = ""  # MM2's alias of the target cluster (names the offset-sync topic); "": discover it
    offset_syncs_location: str = "source"  # MM2's offset-syncs.topic.location: source | target
    # where MM2 keeps its Connect offsets (its replication progress, for the drain check) on the target: "" = the
    # dedicated mode's mm2-offsets.<alias>.internal; on a Connect cluster, the worker's offset.storage.topic
    mm2_offsets_topic: str = ""
    # failing back: MM2's alias of the target cluster (e.g. "primary" when backup -> primary); groups' commits on
    # <home_alias>.<topic> on the source return to <topic> on the target. "": a failover
    home_alias: str = ""
    source_groups_must_be_empty: bool = True
    # the pre-flight audit: MM2's configuration file as MM2 runs it ("": audit what the clusters show), and the
    # recovery point objective its intervals are held against
    mm2_config: str = ""
    rpo_seconds: int = 60
    apply_concurrency: int = 32
    lock_wait_seconds: int = 120
    # the failover DAG waits for a human's approval of the plan before it writes (mm2_failover.rules.approval); an
    # automation that decided already opts out. The CLI's apply is its operator's own decision: not asked there
    require_approval: bool = True
    approval_timeout_seconds: int = 3600
    # four eyes: an approval by the user who triggered the run is refused (nothing written)
    approver_not_triggerer: bool = False

    #: the parameters a run's results depend on (:attr:`ParamSpec.binds`): a run folder keeps them, and a later step
    #: with other values is refused (the others - waits, concurrency - may change between retries); set below PARAMS
    RESULT_PARAMS: ClassVar[tuple[str, ...]] = ()

    #: the allowed values of the parameters that have a fixed set (:attr:`ParamSpec.labels`; the trigger form's and
    #: the CLI's choices), enforced whenever a run's parameters are built, with the bounds of :data:`PARAMS`
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __post_init__(self):
        for name, allowed in self.CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"parameter {name}: {getattr(self, name)!r} is not one of {', '.join(allowed)}")
        for name, spec in PARAMS.items():
            if spec.bounds is None:
                continue
            v, (low, high) = getattr(self, name), spec.bounds
            if not isinstance(v, int) or isinstance(v, bool) or v < low or (high is not None and v > high):
                raise ValueError(
                    f"parameter {name}: {v!r} is not a whole number from {low} to {'any' if high is None else high}"
                )

    def policies(self) -> list:
        """One ReplicationPolicy per source alias."""
        from mm2_failover.rules.naming import ReplicationPolicy

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


#: every run parameter's title, help, section, CLI flag, bounds and form keys: the trigger form and the CLI's flags are
#: generated from these and from RunParams' defaults and choices (params.py, cli.py); one entry per RunParams field
PARAMS: dict[str, ParamSpec] = {
    "source_alias": ParamSpec(
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
        binds=True,
        title="Groups to leave alone (regex)",
        help=("Groups matching this (whole id) are never moved, even if groups_regex matches. Empty: none."),
        section="What to move",
        form={"format": "regex"},
    ),
    "dry_run": ParamSpec(
        title="Dry run",
        help=("Build and export the plan (JSON + CSV for kafka-consumer-groups) and stop: nothing is written."),
        section="Decisions",
        cli=None,
    ),
    "replication_policy": ParamSpec(
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
        title="Drain quiet window (s)",
        help=("Source end offsets must not move for this long for producers to count as stopped."),
        section="Safety",
        bounds=(1, 600),
    ),
    "drain_timeout_seconds": ParamSpec(
        title="Drain timeout (s)",
        help=("How long verify_producers_drained waits before failing with the table of what is not drained."),
        section="Safety",
        bounds=(1, 86400),
    ),
    "groups_empty_timeout_seconds": ParamSpec(
        title="Empty-group timeout (s)",
        help=("How long check_groups_empty waits for live consumers on the target to stop."),
        section="Safety",
        cli=None,
        bounds=(1, 86400),
    ),
    "max_quarantined_records": ParamSpec(
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
        binds=True,
        title="Allow rewinding target commits",
        help=(
            "When a group's commit on the target is already ahead of its checkpoint, move it back anyway (more "
            "re-reads). Default: keep the commit that is ahead."
        ),
        section="Safety",
    ),
    "on_existing_target_offsets": ParamSpec(
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
        binds=True,
        title="MM2's alias of the target cluster",
        help=(
            "Names MM2's offset-sync topic (mm2-offset-syncs.<alias>.internal). Empty: found on the cluster, when"
            " there is only one."
        ),
        section="MM2",
        cli_help="MM2's alias of the target (names mm2-offset-syncs.<alias>.internal); default: discovered",
    ),
    "home_alias": ParamSpec(
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
    "offset_syncs_location": ParamSpec(
        binds=True,
        title="Where MM2 keeps offset syncs",
        help=(
            "MM2's offset-syncs.topic.location (source by default: lost with the source; the archive keeps a copy"
            " on the target side)."
        ),
        labels={"source": "source: on the source cluster (MM2's default)", "target": "target: on the target cluster"},
        section="MM2",
    ),
    "mm2_config": ParamSpec(
        title="MM2's configuration file",
        help=(
            "Path of the mm2.properties MM2 runs with, as seen by the Airflow workers: the pre-flight audit warns"
            " about settings that cost records or re-reads (see the report). Empty: only what the clusters show "
            "is audited."
        ),
        section="MM2",
        cli_help="MM2's mm2.properties, for the pre-flight audit (warnings in the log and the report)",
    ),
    "mm2_offsets_topic": ParamSpec(
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
    "rpo_seconds": ParamSpec(
        title="Recovery point objective (s)",
        help=("The audit warns when MM2's checkpoint or progress intervals are longer than this."),
        section="Safety",
        bounds=(1, None),
    ),
    "source_groups_must_be_empty": ParamSpec(
        binds=True,
        title="Source groups must be stopped too",
        help=(
            "When the source is reachable, also wait until the groups have no live members on the source (stop "
            "the consumers there first). Turn off only if you accept double consumption."
        ),
        section="Safety",
        cli="--no-source-groups-must-be-empty",
    ),
    "apply_concurrency": ParamSpec(
        title="Requests in flight",
        help=("How many groups are read or committed at the same time (one request per group)."),
        section="Advanced",
        bounds=(1, 256),
    ),
    "require_approval": ParamSpec(
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
        title="Approved by someone else",
        help=(
            "On: an approval by the user who triggered this run is refused - nothing is written and the report says "
            "why (four eyes: the person who plans a failover is not the one who lets it write). Off (default): "
            "anyone allowed to answer Required Actions decides."
        ),
        section="Safety",
        cli=None,
    ),
    "lock_wait_seconds": ParamSpec(
        title="Writer lock wait (s)",
        help=(
            "One writer per target cluster (failover, rollback, drill writes, the CLI): how long to wait for "
            "another writer before failing (naming it)."
        ),
        section="Advanced",
        bounds=(0, 86400),
    ),
}

RunParams.CHOICES = {name: tuple(spec.labels) for name, spec in PARAMS.items() if spec.labels}
RunParams.RESULT_PARAMS = tuple(name for name, spec in PARAMS.items() if spec.binds)


#: the MM2 topology: the run parameters a deployment sets once, in Airflow's configuration (:func:`deployment_defaults`)
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
CONFIG_SECTION = "mm2_failover"


def deployment_defaults(env: dict | None = None) -> dict:
    """The MM2 topology as the deployment set it once (:data:`TOPOLOGY`): the ``[mm2_failover]`` section of Airflow's
    configuration - ``AIRFLOW__MM2_FAILOVER__SOURCE_ALIAS=dc1`` or ``source_alias = dc1`` in airflow.cfg - read where
    Airflow is loaded already (DAG files, tasks), and its environment-variable form everywhere (the CLI too). Every
    DAG's parameter defaults come from it, the scheduled DAGs' included, and the CLI's flags; what a run's conf or a
    flag gives still wins. Only the keys set; a bad value is a ValueError naming the section and the parameter."""
    env = os.environ if env is None else env
    loaded = sys.modules.get("airflow.configuration")
    raw = {}
    for name in TOPOLOGY:
        v = env.get(f"AIRFLOW__{CONFIG_SECTION.upper()}__{name.upper()}")
        if v is None and loaded is not None and env is os.environ:
            try:
                v = loaded.conf.get(CONFIG_SECTION, name, fallback=None)
            except Exception:  # noqa: BLE001 - a configuration that cannot be read sets nothing here
                v = None
        if v is not None and str(v).strip() != "":
            raw[name] = v
    try:
        p = RunParams.from_mapping(raw)
    except ValueError as e:
        raise ValueError(f"[{CONFIG_SECTION}] in Airflow's configuration: {e}") from None
    return {k: getattr(p, k) for k in raw}


def four_eyes(params) -> bool:
    """Whether an approval by the user who triggered the run is refused (approval rule 6): the run's
    ``approver_not_triggerer``, or the deployment's ``[mm2_failover] approver_not_triggerer`` - which the person it
    restrains cannot turn off on the trigger form."""
    if params.approver_not_triggerer:
        return True
    v = os.environ.get(f"AIRFLOW__{CONFIG_SECTION.upper()}__APPROVER_NOT_TRIGGERER")
    loaded = sys.modules.get("airflow.configuration")
    if v is None and loaded is not None:
        try:
            v = loaded.conf.get(CONFIG_SECTION, "approver_not_triggerer", fallback=None)
        except Exception:  # noqa: BLE001 - not readable: the run's own setting decides
            v = None
    return str(v or "").strip().lower() in ("true", "1", "yes", "on")


def parameters_markdown() -> str:
    """``docs/reference/parameters.md``: every run parameter from its one definition (:class:`RunParams`' type and
    default, :data:`PARAMS`' title, help, section, CLI flag, bounds, allowed values, whether it binds a run), by the
    trigger form's sections. ``make reference`` writes it; ``tests/unit/test_params_definition.py`` checks that the
    page is what this gives."""
    defaults = RunParams().as_dict()

    def default_text(name: str) -> str:
        v = defaults[name]
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
        "Generated from their one definition (`plugins/mm2_failover/adapters/config.py`: `RunParams` and `PARAMS`) by "
        "`make reference`; a test fails when this page differs. The trigger forms, the CLI's flags and the "
        "operators' `run_params` are generated from the same definition. *Set once*: the MM2 topology's default "
        f"for every DAG and the CLI comes from Airflow's configuration (`[{CONFIG_SECTION}]`, or "
        f"`AIRFLOW__{CONFIG_SECTION.upper()}__<NAME>`) where the deployment sets it. *Binds a run*: a run folder "
        "keeps the value, and a later step or retry with another is refused.",
        "",
    ]
    for section in SECTIONS:
        names = [n for n in (f.name for f in fields(RunParams)) if PARAMS[n].section == section]
        lines += [
            f"## {section}",
            "",
            "| parameter | default | values | CLI | binds a run | what it does |",
            "|---|---|---|---|---|---|",
        ]
        for n in names:
            spec = PARAMS[n]
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
    import ast

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


def _jaas_quote(v) -> str:
    """A value inside a JAAS quoted string (Kafka's JaasConfig reads it with a StreamTokenizer)."""
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")


# librdkafka settings whose names and meaning are the same in the Java client
_SAME_IN_JAVA = (
    "security.protocol",
    "sasl.mechanism",
    "ssl.endpoint.identification.algorithm",
    "sasl.kerberos.service.name",
    "client.id",
)


def java_client_options(conf: dict) -> dict[str, str]:
    """Translate a connection's librdkafka settings to the Java client's, for Spark's Kafka source.

    Covers bootstrap servers, security protocol, SASL PLAIN/SCRAM user+password (as ``sasl.jaas.config``)
    and a PEM CA file. Anything else the Java client needs goes in ``MM2_FAILOVER_SPARK_KAFKA_OPTIONS``
    (a JSON object, merged over this). The result contains secrets: never log it.
    """
    out = {k: str(conf[k]) for k in _SAME_IN_JAVA if k in conf}
    if out.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        out["ssl.endpoint.identification.algorithm"] = ""  # librdkafka's "none" is the Java client's ""
    if "bootstrap.servers" in conf:
        out["bootstrap.servers"] = str(conf["bootstrap.servers"])
    if "sasl.mechanisms" in conf and "sasl.mechanism" not in out:
        out["sasl.mechanism"] = str(conf["sasl.mechanisms"])
    if "sasl.username" in conf:
        mech = out.get("sasl.mechanism", "PLAIN").upper()
        module = (
            "org.apache.kafka.common.security.plain.PlainLoginModule"
            if mech == "PLAIN"
            else "org.apache.kafka.common.security.scram.ScramLoginModule"
        )
        user, pw = _jaas_quote(conf["sasl.username"]), _jaas_quote(conf.get("sasl.password", ""))
        out["sasl.jaas.config"] = f'{module} required username="{user}" password="{pw}";'
    if "ssl.ca.location" in conf:
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.location"] = str(conf["ssl.ca.location"])
    raw = os.environ.get("MM2_FAILOVER_SPARK_KAFKA_OPTIONS", "")
    if raw:
        out.update({str(k): str(v) for k, v in json.loads(raw).items()})
    return out
