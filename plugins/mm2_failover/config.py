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
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

SOURCE_CONN_ID = "kafka_source"
TARGET_CONN_ID = "kafka_target"
SPARK_CONN_ID = "spark_default"

REPO_ROOT = Path(__file__).resolve().parents[2]
PLUGINS_DIR = REPO_ROOT / "plugins"
SPARK_JOB = REPO_ROOT / "spark_jobs" / "latest_checkpoints.py"


def artifacts_root() -> Path:
    return Path(os.environ.get("MM2_FAILOVER_ARTIFACTS", REPO_ROOT / "var" / "artifacts"))


def spark_jars() -> list[str]:
    d = Path(os.environ.get("MM2_FAILOVER_SPARK_JARS", REPO_ROOT / ".cache" / "jars" / "spark"))
    jars = sorted(str(p) for p in d.glob("*.jar"))
    if not jars:
        raise FileNotFoundError(f"Spark's Kafka source jars not found in {d}: run scripts/fetch_jars.sh "
                                "(make setup) or set MM2_FAILOVER_SPARK_JARS")
    return jars


def spark_conf() -> dict[str, str]:
    raw = os.environ.get("MM2_FAILOVER_SPARK_CONF", "")
    return {str(k): str(v) for k, v in json.loads(raw).items()} if raw else {}


def run_dir(dag_id: str, run_id: str) -> Path:
    """Where one DAG run keeps its artifacts (snapshot, checkpoints, plan, backup, report)."""
    safe = re.sub(r"[^A-Za-z0-9_.+-]", "_", run_id)
    return artifacts_root() / dag_id / safe


@dataclass(frozen=True)
class RunParams:
    """The parameters of one failover run (the DAG's trigger form, the CLI's flags)."""

    source_alias: str = "primary"
    groups_regex: str = ".*"
    groups_exclude_regex: str = ""
    dry_run: bool = False
    replication_policy: str = "default"  # default | identity
    replication_policy_separator: str = "."
    drain_quiet_seconds: int = 5
    max_quarantined_records: int = 0
    allow_rewind: bool = False
    on_existing_target_offsets: str = "fail"  # fail | skip | overwrite
    apply_concurrency: int = 32
    source_groups_must_be_empty: bool = True
    checkpoint_policy: str = "latest"  # latest | max
    source_reachable: str = "detect"  # detect | yes | no (disaster mode)
    topics_regex: str = ""  # drain scope; empty = the topics the selected groups consume
    # per-alias overrides of replication_policy/replication_policy_separator, e.g. {"dc3": {"separator": "_"}}
    alias_policies: dict = field(default_factory=dict)

    def policies(self) -> list:
        """One ReplicationPolicy per source alias (the first is the one behind the kafka_source connection)."""
        from mm2_failover.naming import ReplicationPolicy

        out = []
        for a in self.source_aliases:
            o = (self.alias_policies or {}).get(a, {})
            unknown = set(o) - {"policy", "separator"}
            if unknown:
                raise ValueError(f"alias_policies[{a!r}]: unknown key(s) {sorted(unknown)}; use 'policy' and 'separator'")
            out.append(ReplicationPolicy(a, o.get("policy", self.replication_policy),
                                         o.get("separator", self.replication_policy_separator)))
        return out

    @property
    def source_aliases(self) -> list[str]:
        """``source_alias`` may name several aliases, comma-separated (groups replicated from several sources)."""
        return [a.strip() for a in self.source_alias.split(",") if a.strip()]

    @classmethod
    def from_mapping(cls, m: dict) -> "RunParams":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (m or {}).items() if k in names})

    def as_dict(self) -> dict:
        return asdict(self)


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
