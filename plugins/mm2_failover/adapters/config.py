"""Configuration in one place: connection ids, what the deployment sets for the run parameters (their one
definition is :mod:`mm2_failover.rules.run_params`), and where artifacts and jars live.

Cluster access comes only from Airflow connections (or the same ids as ``AIRFLOW_CONN_*`` environment
variables for the CLI):

* ``kafka_source`` / ``kafka_target`` - connection type ``kafka``; the extra is a JSON object of librdkafka
  settings (``bootstrap.servers`` plus any ``security.protocol``/``sasl.*``/``ssl.*``), passed through
  untouched and never logged;
* ``spark_default`` - connection type ``spark``; host = master (``local[2]``, ``spark://host``, ``yarn``,
  ``k8s://...``).

The deployment's settings (:data:`DEPLOYMENT_SETTINGS`: where artifacts, the archive, the state and jars live, the
writer lock, Spark's settings) are read by :func:`setting`: ``[mm2_failover] <name>`` in Airflow's configuration (or
``AIRFLOW__MM2_FAILOVER__<NAME>``), set once for every component; the former environment variables
``MM2_FAILOVER_<NAME>`` still override it for one release and log a deprecation line. Defaults are under the
repository's ``var/`` and ``.cache/``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from mm2_failover.rules.run_params import CONFIG_SECTION, TOPOLOGY, RunParams

SOURCE_CONN_ID = "kafka_source"
TARGET_CONN_ID = "kafka_target"
SPARK_CONN_ID = "spark_default"
SPARK_CONNECT_CONN_ID = "spark_connect_default"  # optional: a warm Spark Connect server (conn type spark_connect)

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # mm2_failover/ (this module is in adapters/)
PLUGINS_DIR = PACKAGE_DIR.parent  # what must be on the driver's PYTHONPATH
REPO_ROOT = PLUGINS_DIR.parent  # defaults for a checkout (var/, .cache/); a deployment sets the variables below
# the job ships inside the package: a deployment that copies only dags/ and plugins/ has it
SPARK_JOB = PACKAGE_DIR / "jobs" / "run_checkpoint_pass.py"  # the file of the job (the package jobs/checkpoint_pass/)


log = logging.getLogger(__name__)

#: the deployment's settings: name in ``[mm2_failover]`` -> what it sets (the provider's configuration section and
#: docs/reference.md say these); the former environment variable of each is ``MM2_FAILOVER_<NAME>``
DEPLOYMENT_SETTINGS = {
    "artifacts": "Where runs keep their artifacts and the writer locks: a folder, or an object store's URL "
    "(s3://bucket/prefix). Default: var/artifacts of a checkout.",
    "archive": "Where MM2's offset syncs are archived. Default: archive/ in the artifacts folder.",
    "state": "The latest-checkpoint state's local or shared folder. Default: latest-state/ in the archive, or var/state "
    "with the archive in an object store.",
    "lock": "One writer per target cluster: file (a lock under the artifacts folder) or kafka (a lease in a topic of "
    "the target). Default: file.",
    "lock_topic": "The lease's topic (and its transactional ids' prefix). Default: mm2-failover.locks.",
    "lock_lease_seconds": "The lease's length in seconds. Default: 60.",
    "lock_margin_seconds": "A holder stops writing this long before its lease would run out. Default: 20.",
    "lock_renew_seconds": "How often a holder renews its lease. Default: 10.",
    "spark_jars": "The folder of Spark's Kafka source jars. Default: .cache/jars/spark of a checkout.",
    "s3a_jars": "The folder of S3A's jars (hadoop-aws and the AWS SDK's). Default: .cache/jars/s3a of a checkout.",
    "spark_io": "How the Spark job's answers reach an object store: s3a or stage. Default: s3a for s3:// artifacts.",
    "spark_conf": "A JSON object of extra spark-submit --conf settings.",
    "spark_kafka_options": "A JSON object of Java client settings merged over those translated from the connection.",
    "interval_seconds": "The archive's and readiness's interval, read when DAG files are parsed. Default: 300.",
    "run_deadlines": "Per DAG, dag_id=seconds|off, comma-separated: when on-call hears of a run not ended in time.",
    "asset_events_per_part": "The moved groups sent per part of their Asset events (1 to 10000). Default: 2500 when "
    "the worker's [database] sql_alchemy_conn is a server database, 500 for SQLite or when it does not say.",
}
_deprecation_said: set[str] = set()


_file_cache: dict = {}


def section_value(name: str) -> str | None:
    """``[mm2_failover] <name>`` of Airflow's configuration, as every process of the deployment sees it: through
    Airflow's own reader where Airflow is loaded (DAG files, tasks, the API server), else from the configuration file
    Airflow would read (``$AIRFLOW_CONFIG``, or ``$AIRFLOW_HOME/airflow.cfg``, default ``~/airflow``) - the CLI runs
    without Airflow and must not take another lock or folder than the DAGs on the same host. None when unset or
    unreadable (then the rest decides)."""
    loaded = sys.modules.get("airflow.configuration")
    if loaded is not None:
        try:
            return loaded.conf.get(CONFIG_SECTION, name, fallback=None)
        except Exception:  # noqa: BLE001 - a configuration that cannot be read sets nothing here
            return None
    import configparser  # lazy: only where Airflow is not loaded (the CLI)

    home = os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow")
    path = Path(os.environ.get("AIRFLOW_CONFIG") or Path(home) / "airflow.cfg")
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return None
    if _file_cache.get("key") != (str(path), stamp):
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(path)
        except (configparser.Error, OSError, UnicodeDecodeError):
            parser = configparser.ConfigParser(interpolation=None)
        _file_cache.update(
            key=(str(path), stamp), section=dict(parser[CONFIG_SECTION]) if parser.has_section(CONFIG_SECTION) else {}
        )
    return _file_cache["section"].get(name)


def legacy_variable(name: str) -> str:
    return f"MM2_FAILOVER_{name.upper()}"


def setting(name: str, env=None) -> str | None:
    """The deployment's setting ``name`` (:data:`DEPLOYMENT_SETTINGS`), or None when it is not set: its former
    environment variable ``MM2_FAILOVER_<NAME>`` while it is still honoured (it overrides; a deprecation line once
    per process), else ``AIRFLOW__MM2_FAILOVER__<NAME>``, else ``[mm2_failover] <name>`` of Airflow's configuration
    (:func:`section_value`). ``env``: a mapping to read instead of the environment (then Airflow's files are not)."""
    if name not in DEPLOYMENT_SETTINGS:
        raise KeyError(f"no deployment setting {name!r}")
    environ = os.environ if env is None else env
    legacy = environ.get(legacy_variable(name))
    if legacy not in (None, ""):
        if name not in _deprecation_said:
            _deprecation_said.add(name)
            log.warning(
                "%s is deprecated and will be ignored after the next release: set [%s] %s in Airflow's "
                "configuration (or %s) instead",
                legacy_variable(name),
                CONFIG_SECTION,
                name,
                f"AIRFLOW__{CONFIG_SECTION.upper()}__{name.upper()}",
            )
        return legacy
    v = environ.get(f"AIRFLOW__{CONFIG_SECTION.upper()}__{name.upper()}")
    if v is None and env is None:
        v = section_value(name)
    return None if v is None or str(v).strip() == "" else str(v)


def settings_markdown() -> str:
    """``docs/reference/settings.md``: every deployment setting from :data:`DEPLOYMENT_SETTINGS` (``make reference``
    writes it; ``tests/unit/test_settings.py`` checks that the page is what this gives)."""
    rows = [
        f"| `{n}` | {' '.join(t.split()).replace('|', chr(92) + '|')} | `{legacy_variable(n)}` |"
        for n, t in DEPLOYMENT_SETTINGS.items()
    ]
    return "\n".join(
        [
            "# Deployment settings",
            "",
            "Generated from their one definition (`plugins/mm2_failover/adapters/config.py`: `DEPLOYMENT_SETTINGS`) by "
            "`make reference`; a test fails when this page differs. Set each once for every Airflow component: "
            f"`[{CONFIG_SECTION}] <name>` in Airflow's configuration, or `AIRFLOW__{CONFIG_SECTION.upper()}__<NAME>` "
            "(the form the CLI reads: it runs without Airflow). The former environment variable still works for one "
            "release: where it is set it overrides the section, and the process logs once that it is deprecated.",
            "",
            "| setting | what it sets | former variable |",
            "|---|---|---|",
            *rows,
            "",
        ]
    )


def setting_label(name: str, env=None) -> str:
    """Where ``name`` was set, for a message: its former variable when that is what set it, else the section's key."""
    environ = os.environ if env is None else env
    if environ.get(legacy_variable(name)) not in (None, ""):
        return legacy_variable(name)
    return f"[{CONFIG_SECTION}] {name}"


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
    """Where run folders live (setting ``artifacts``): a local folder (default ``var/artifacts``) or an object
    store's URL (``s3://bucket/prefix``: :mod:`mm2_failover.adapters.store`)."""
    from mm2_failover.adapters.store import as_path  # lazy: not at DAG parse

    return as_path(setting("artifacts") or REPO_ROOT / "var" / "artifacts")


def state_root() -> Path:
    """The latest-checkpoint state Spark reads and writes (:mod:`mm2_failover.adapters.state`): always a local (or shared
    POSIX) folder - setting ``state``, else ``<archive>/latest-state`` when the archive is a local folder, else
    ``var/state`` on each host: then it is this host's copy of :func:`state_store`."""
    from mm2_failover.adapters.store import is_remote  # lazy: not at DAG parse

    given = setting("state")
    if given:
        if is_remote(given):
            raise ValueError(
                f"{setting_label('state')}={given}: the latest-checkpoint state is "
                "written by Spark into a local or shared folder, not an object store; set a folder (the "
                "state is kept in the store beside an archive there)"
            )
        return Path(given)
    arch = archive_root()
    return REPO_ROOT / "var" / "state" if is_remote(arch) else arch / "latest-state"


def state_store():
    """Where the state is kept when the archive is in an object store (``<archive>/latest-state`` there; each job
    works on the host's copy, :func:`state_root`, pulled before and pushed after a refresh); None otherwise."""
    from mm2_failover.adapters.store import is_remote  # lazy: not at DAG parse

    arch = archive_root()
    return arch / "latest-state" if is_remote(arch) else None


def archive_root() -> Path:
    """Where MM2's offset syncs are archived on the target side (setting ``archive``; default beside the run
    artifacts). Shared by the archive DAG, the failover DAG and the CLI."""
    from mm2_failover.adapters.store import as_path  # lazy: not at DAG parse

    return as_path(setting("archive") or artifacts_root() / "archive")


@dataclass(frozen=True)
class WriterLockSettings:
    """Where the one-writer-per-target lock lives (setting ``lock``; below, the former variables' names): ``file`` (default: an ``flock`` under the
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
        kind = (setting("lock", env) or "file").strip().lower()
        if kind not in cls.KINDS:
            raise ValueError(f"{setting_label('lock', env)}={kind!r}: use one of {', '.join(cls.KINDS)}")
        from mm2_failover.adapters.store import is_remote  # lazy: not at DAG parse

        art = setting("artifacts", env) or ""
        if kind == "file" and is_remote(art):
            raise ValueError(
                f"{setting_label('artifacts', env)}={art} is an object store, where a file lock cannot keep one "
                "writer per target cluster across hosts: set [mm2_failover] lock = kafka (or the former "
                "MM2_FAILOVER_LOCK=kafka; docs/operations.md)"
                + (
                    f"; {setting_label('lock', env)} is set and overrides the section"
                    if setting_label("lock", env).startswith("MM2_")
                    else ""
                )
            )
        times = {}
        for name, key, default in (
            ("lease_s", "lock_lease_seconds", cls.lease_s),
            ("margin_s", "lock_margin_seconds", cls.margin_s),
            ("renew_s", "lock_renew_seconds", cls.renew_s),
        ):
            raw = setting(key, env)
            try:
                times[name] = float(raw) if raw not in (None, "") else default
            except ValueError:
                raise ValueError(f"{setting_label(key, env)}={raw!r} is not a number of seconds") from None
        topic = (setting("lock_topic", env) or cls.topic).strip()
        return cls(kind, topic, **times)

    def transactional_id(self, cluster_id: str) -> str:
        """The transactional id every holder of target ``cluster_id``'s lease commits through
        (:mod:`mm2_failover.adapters.fenced`): the lock topic's name, a dot, the cluster id. The least-privilege ACL is Write
        on the TransactionalId prefix ``<lock topic>.``."""
        return f"{self.topic}.{cluster_id}"


#: what the Java helper takes from the Spark Kafka source's jar folder; the last ones only the helper (Spark has its own)
HELPER_ONLY_JARS = ("slf4j-api-", "jackson-")
HELPER_JARS = ("kafka-clients-", "jose4j-", *HELPER_ONLY_JARS)


def spark_jars(s3a: bool | None = None) -> list[str]:
    """The jars every Spark job of the project is given (``--jars``): Spark's Kafka source, and S3A's when ``s3a``
    (default: when the job writes through S3A, :func:`spark_io`)."""
    d = Path(setting("spark_jars") or REPO_ROOT / ".cache" / "jars" / "spark")
    jars = sorted(str(p) for p in d.glob("*.jar") if not p.name.startswith(HELPER_ONLY_JARS))
    if not jars:
        raise FileNotFoundError(
            f"Spark's Kafka source jars not found in {d}: run scripts/fetch_jars.sh "
            "(make setup) or set [mm2_failover] spark_jars"
        )
    if s3a if s3a is not None else spark_io() == "s3a":
        d = Path(setting("s3a_jars") or REPO_ROOT / ".cache" / "jars" / "s3a")
        more = sorted(str(p) for p in d.glob("*.jar"))
        if not any(Path(j).name.startswith("hadoop-aws-") for j in more):
            raise FileNotFoundError(
                f"S3A's jars (hadoop-aws and the AWS SDK's) not found in {d}, and the job "
                "writes through S3A ([mm2_failover] spark_io): run scripts/fetch_jars.sh (make "
                "setup) or set [mm2_failover] s3a_jars"
            )
        jars += more
    return jars


SPARK_IO = ("stage", "s3a")


def spark_io(env: dict[str, str] | None = None) -> str:
    """How the latest-checkpoints job's answers reach a run folder in an object store (setting ``spark_io``):

    * ``s3a`` (the default for ``s3://`` artifacts) - Spark writes them into the store itself (``s3a://``, Hadoop's
      S3 filesystem: :func:`s3a_settings`), from whichever hosts its executors run on;
    * ``stage`` (the default otherwise) - the job writes them on the driver's host and the task uploads them
      (:meth:`mm2_failover.adapters.spark.JobSubmission.publish`): any fsspec store, but every executor must be able to
      write that host's folder (``local[N]``, or a cluster on one host). With local artifacts there is nothing to
      stage: the job writes the run folder.

    A ValueError naming the variable for a bad value."""
    from mm2_failover.adapters.store import scheme_of  # lazy: not at DAG parse

    art = setting("artifacts", env) or ""
    s3 = scheme_of(art) in ("s3", "s3a")
    raw = (setting("spark_io", env) or "").strip().lower()
    if not raw:
        return "s3a" if s3 else "stage"
    io = setting_label("spark_io", env)
    if raw not in SPARK_IO:
        raise ValueError(f"{io}={raw!r}: use one of {', '.join(SPARK_IO)}")
    if raw == "s3a" and not s3:
        raise ValueError(
            f"{io}=s3a, but {setting_label('artifacts', env)} is {art or 'a local folder'}, not "
            f"s3://: S3A writes only to S3 (or an S3-compatible server); unset {io}"
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
    """Kafka's Java client for the small JVM helpers, as a java -cp value: from the Spark Kafka source's folder
    (setting ``spark_jars``), kafka-clients, jose4j (OAUTHBEARER's OIDC login), slf4j's API and Jackson (the
    unsecured-JWT login) - so the helper runs where PySpark is not installed."""
    d = Path(setting("spark_jars") or REPO_ROOT / ".cache" / "jars" / "spark")
    return os.pathsep.join(str(p) for p in sorted(d.glob("*.jar")) if p.name.startswith(HELPER_JARS))


def spark_conf() -> dict[str, str]:
    """Setting ``spark_conf``: extra spark-submit ``--conf`` settings."""
    raw = setting("spark_conf") or ""
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"{setting_label('spark_conf')} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{setting_label('spark_conf')} must be a JSON object of spark-submit --conf settings")
    return {str(k): str(v) for k, v in data.items()}


def run_dir(dag_id: str, run_id: str) -> Path:
    """Where one DAG run keeps its artifacts (snapshot, checkpoints, plan, backup, report)."""
    safe = re.sub(r"[^A-Za-z0-9_.+-]", "_", run_id)
    return artifacts_root() / dag_id / safe


def deployment_defaults(env: dict | None = None) -> dict:
    """The MM2 topology as the deployment set it once (:data:`mm2_failover.rules.run_params.TOPOLOGY`): the ``[mm2_failover]`` section of Airflow's
    configuration - ``AIRFLOW__MM2_FAILOVER__SOURCE_ALIAS=dc1`` or ``source_alias = dc1`` in airflow.cfg
    (:func:`section_value`: the same file for the CLI). Every
    DAG's parameter defaults come from it, the scheduled DAGs' included, and the CLI's flags; what a run's conf or a
    flag gives still wins. Only the keys set; a bad value is a ValueError naming the section and the parameter."""
    given = env
    env = os.environ if env is None else env
    raw = {}
    for name in TOPOLOGY:
        v = env.get(f"AIRFLOW__{CONFIG_SECTION.upper()}__{name.upper()}")
        if v is None and given is None:
            v = section_value(name)
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
    if v is None:
        v = section_value("approver_not_triggerer")
    return str(v or "").strip().lower() in ("true", "1", "yes", "on")
