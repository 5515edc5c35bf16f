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
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path

SOURCE_CONN_ID = "kafka_source"
TARGET_CONN_ID = "kafka_target"
SPARK_CONN_ID = "spark_default"
SPARK_CONNECT_CONN_ID = "spark_connect_default"  # optional: a warm Spark Connect server (conn type spark_connect)

PACKAGE_DIR = Path(__file__).resolve().parent
PLUGINS_DIR = PACKAGE_DIR.parent  # what must be on the driver's PYTHONPATH
REPO_ROOT = PLUGINS_DIR.parent  # defaults for a checkout (var/, .cache/); a deployment sets the variables below
# the job ships inside the package: a deployment that copies only dags/ and plugins/ has it
SPARK_JOB = PACKAGE_DIR / "jobs" / "latest_checkpoints.py"


def artifacts_root() -> Path:
    return Path(os.environ.get("MM2_FAILOVER_ARTIFACTS", REPO_ROOT / "var" / "artifacts"))


def state_root() -> Path:
    """The latest-checkpoint state (:mod:`mm2_failover.state`): ``<archive>/latest-state``."""
    return archive_root() / "latest-state"


def archive_root() -> Path:
    """Where MM2's offset syncs are archived on the target side (``MM2_FAILOVER_ARCHIVE``; default beside the run
    artifacts). Shared by the archive DAG, the failover DAG and the CLI."""
    return Path(os.environ.get("MM2_FAILOVER_ARCHIVE", artifacts_root() / "archive"))


def spark_jars() -> list[str]:
    d = Path(os.environ.get("MM2_FAILOVER_SPARK_JARS", REPO_ROOT / ".cache" / "jars" / "spark"))
    jars = sorted(str(p) for p in d.glob("*.jar"))
    if not jars:
        raise FileNotFoundError(f"Spark's Kafka source jars not found in {d}: run scripts/fetch_jars.sh "
                                "(make setup) or set MM2_FAILOVER_SPARK_JARS")
    return jars


def java_kafka_classpath() -> str:
    """Kafka's Java client for the small JVM helpers (the Spark Kafka source's kafka-clients jar and pyspark's
    slf4j), as a java -cp value."""
    import importlib.util

    jars = [j for j in spark_jars() if "kafka-clients" in Path(j).name]
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

    #: the parameters a run's results depend on: a run folder keeps them, and a later step with other values is
    #: refused (the others - waits, concurrency - may change between retries)
    RESULT_PARAMS = ("source_alias", "groups_regex", "groups_exclude_regex", "replication_policy",
                     "replication_policy_separator", "internal_topic_separator_enabled", "alias_policies",
                     "source_connections", "source_reachable", "topics_regex", "max_quarantined_records",
                     "checkpoint_policy", "allow_rewind", "on_existing_target_offsets",
                     "accept_groups_without_checkpoints", "source_groups_must_be_empty", "translation",
                     "mm2_target_alias", "offset_syncs_location", "home_alias")

    #: the allowed values of the parameters that have a fixed set (the trigger form's and the CLI's choices come
    #: from here), and the lowest value of the numeric ones: enforced whenever a run's parameters are built
    CHOICES = {"replication_policy": ("default", "identity"), "source_reachable": ("detect", "yes", "no"),
               "checkpoint_policy": ("latest", "max"), "on_existing_target_offsets": ("fail", "skip", "overwrite"),
               "translation": ("exact", "checkpoint"), "offset_syncs_location": ("source", "target")}
    MINIMUM = {"drain_quiet_seconds": 0, "drain_timeout_seconds": 1, "groups_empty_timeout_seconds": 1,
               "max_quarantined_records": 0, "rpo_seconds": 1, "apply_concurrency": 1, "lock_wait_seconds": 0}

    def __post_init__(self):
        for name, allowed in self.CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"parameter {name}: {getattr(self, name)!r} is not one of {', '.join(allowed)}")
        for name, low in self.MINIMUM.items():
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise ValueError(f"parameter {name}: {v!r} is not a whole number >= {low}")

    def policies(self) -> list:
        """One ReplicationPolicy per source alias."""
        from mm2_failover.naming import ReplicationPolicy

        out = []
        for a in self.source_aliases:
            o = (self.alias_policies or {}).get(a, {})
            unknown = set(o) - {"policy", "separator", "internal_topic_separator_enabled"}
            if unknown:
                raise ValueError(f"alias_policies[{a!r}]: unknown key(s) {sorted(unknown)}; use 'policy', 'separator' "
                                 "and 'internal_topic_separator_enabled'")
            out.append(ReplicationPolicy(a, o.get("policy", self.replication_policy),
                                         o.get("separator", self.replication_policy_separator),
                                         bool(o.get("internal_topic_separator_enabled",
                                                    self.internal_topic_separator_enabled)),
                                         self.home_alias or None))
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
            f"Set source_connections, e.g. {{\"{alias}\": \"kafka_source_{alias}\"}} (an Airflow connection of "
            f"{alias}'s cluster; the CLI: --alias-source-config {alias}=FILE), or {{\"{alias}\": \"\"}} to fail over "
            f"its groups without checking its source (as in disaster mode).")

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
        return {f.name: ("{{ params.%s | tojson }}" if f.default_factory is not MISSING else "{{ params.%s }}") % f.name
                for f in fields(cls)}

    def as_dict(self) -> dict:
        return asdict(self)

    def result_params(self) -> dict:
        d = self.as_dict()
        return {k: d[k] for k in self.RESULT_PARAMS}


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
_SAME_IN_JAVA = ("security.protocol", "sasl.mechanism", "ssl.endpoint.identification.algorithm",
                 "sasl.kerberos.service.name", "client.id")


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
        module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mech == "PLAIN"
                  else "org.apache.kafka.common.security.scram.ScramLoginModule")
        user, pw = _jaas_quote(conf["sasl.username"]), _jaas_quote(conf.get("sasl.password", ""))
        out["sasl.jaas.config"] = f'{module} required username="{user}" password="{pw}";'
    if "ssl.ca.location" in conf:
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.location"] = str(conf["ssl.ca.location"])
    raw = os.environ.get("MM2_FAILOVER_SPARK_KAFKA_OPTIONS", "")
    if raw:
        out.update({str(k): str(v) for k, v in json.loads(raw).items()})
    return out
