"""Submitting the latest-checkpoints Spark job: its arguments for one run, where its credentials go, the
``spark_default`` check (the Spark provider silently falls back to master ``yarn`` without one), and the venv's
``spark-submit`` command for the CLI and the benchmarks.

Credentials never go on a command line or into the job's environment: the Spark provider turns ``env_vars`` into
``--conf spark.yarn.appMasterEnv.*`` / ``spark.kubernetes.driverEnv.*`` for YARN and Kubernetes, visible in ``ps``.
They go into a file readable only by the job's user (0600, in a 0700 folder of that user under the temporary
folder, never the run folder), whose path alone is passed; the driver (client deploy mode: on the Airflow worker)
reads it, and the submitter deletes it when the job ends. The path is the same for every try of a run, so a retry
submits the same command.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from mm2_failover.adapters import state, store
from mm2_failover.adapters.answers import MANIFEST, is_part
from mm2_failover.adapters.config import (
    PLUGINS_DIR,
    SPARK_JOB,
    s3a_settings,
    s3a_url,
    spark_conf,
    spark_io,
    spark_jars,
    state_root,
    state_store,
)
from mm2_failover.adapters.java_client import java_client_options, java_system_properties
from mm2_failover.adapters.runfolder import CHECKPOINTS, CHECKPOINTS_SUMMARY, RunFolderError, private_dir

SIDES = ("_quarantine", "_regressions")  # the job's other outputs, beside its answers (<answers>_quarantine...)

log = logging.getLogger(__name__)


class SparkConnectionMissing(RuntimeError):
    pass


def check_spark_connection(conn_id: str) -> str:
    """Return the master of ``conn_id``, or fail naming the connection and how to set it."""
    from airflow.sdk import BaseHook  # lazy: airflow (the CLI runs without it)

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as e:
        raise SparkConnectionMissing(
            f"Airflow connection {conn_id!r} is not defined, and the Spark provider would silently submit to "
            f'master \'yarn\'. Define it, e.g. AIRFLOW_CONN_{conn_id.upper()}=\'{{"conn_type": "spark", '
            f'"host": "local[2]"}}\' (or host spark://<master>, port 7077), or '
            f"'airflow connections add {conn_id} --conn-type spark --conn-host \"local[2]\"'."
        ) from e
    master = conn.host or ""
    if conn.port:
        master = f"{master}:{conn.port}"
    return master


def spark_connect_url(conn_id: str, timeout: float = 3.0) -> tuple[str | None, str]:
    """(``sc://`` URL of the Spark Connect server of Airflow connection ``conn_id``, or None; what was found). None
    when the connection is not defined or its server does not answer: the caller falls back to spark-submit."""
    from airflow.sdk import BaseHook  # lazy: airflow (the CLI runs without it)

    try:
        BaseHook.get_connection(conn_id)
    except Exception:  # noqa: BLE001 - not defined: the documented fallback
        return None, f"no Airflow connection {conn_id!r} (conn type spark_connect): spark-submit"
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook  # lazy: airflow (not in the CLI)

    return answering(SparkConnectHook(conn_id).get_connection_url(), f"of {conn_id!r}", timeout)


def answering(url: str, whose: str, timeout: float = 3.0) -> tuple[str | None, str]:
    """(``url``, or None when its Spark Connect server does not answer: the caller falls back to spark-submit;
    what was found, naming the server by ``whose`` and host:port - never the URL's token)."""
    u = urlparse(url)
    host, port = u.hostname or "localhost", u.port or 15002
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as e:
        return None, f"the Spark Connect server {whose} ({host}:{port}) does not answer ({e}): spark-submit"
    return url, f"Spark Connect server {whose} ({host}:{port})"


def cli_spark_route(remote: str | None, conn_id: str) -> tuple[str | None, str]:
    """The CLI's route for the job: (``sc://`` URL of a warm Spark Connect server, or None for spark-submit; why).
    ``--spark-remote none``: spark-submit. ``--spark-remote sc://host:port``: that server. Neither: the DAG's rule
    (:func:`spark_connect_url`) when ``AIRFLOW_CONN_<CONN_ID>`` is set, else spark-submit. A server that does not
    answer falls back to spark-submit, as in the DAG (the same answers, later), and says so."""
    if remote is not None and remote.strip().lower() == "none":
        return None, "--spark-remote none: spark-submit"
    if remote is None:
        if f"AIRFLOW_CONN_{conn_id.upper()}" not in os.environ:
            return None, f"no --spark-remote and no AIRFLOW_CONN_{conn_id.upper()}: spark-submit"
        return spark_connect_url(conn_id)
    u = urlparse(remote)
    if u.scheme != "sc" or not u.hostname:
        raise ValueError(
            f"--spark-remote {remote.split(';')[0]!r}: expected sc://host:port (a Spark Connect server) or 'none'"
        )
    return answering(remote, "of --spark-remote")


def connect_run(remote: str, sub: JobSubmission, said: list[str] | None = None) -> int:
    """Run the job as a client of the Spark Connect server ``remote`` in a Python process of its own (the CLI's
    Connect route; a Connect session switches its whole process to remote mode). The URL (it may carry a token)
    goes in ``SPARK_REMOTE``, never on the command line. Output and ``said`` as :func:`spark_submit`."""
    env = {k: v for k, v in {**os.environ, **sub.env}.items() if k != "SPARK_CONNECT_MODE_ENABLED"}
    env["SPARK_REMOTE"] = remote
    return _stream([sys.executable, str(SPARK_JOB), *sub.args], env, said)


def _stream(cmd: list[str], env: dict[str, str], said: list[str] | None) -> int:
    """Run ``cmd``; its output goes to this process's stderr as it comes, the job's own messages
    (``latest_checkpoints: ...``) are also appended to ``said``; its exit code."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    for line in p.stdout:
        sys.stderr.write(line)
        if said is not None and line.startswith("latest_checkpoints:"):
            said.append(line.strip())
    return p.wait()


@dataclass
class JobSubmission:
    """The job's arguments, environment and Spark conf for one run, and the private options file they point at."""

    args: list[str]
    env: dict[str, str]
    conf: dict[str, str]
    options_file: Path | None = None
    staged: Path | None = None  # a run folder in an object store: the job writes here, publish() uploads
    folder: Any = None
    direct: bool = False  # the job writes its answers into the store itself (S3A): only the summary is staged
    state_url: str | None = None  # a refresh through S3A: Spark publishes its version in the store (s3a://)

    def cleanup(self) -> None:
        if self.options_file is not None:
            self.options_file.unlink(missing_ok=True)

    def publish(self) -> bool:
        """A run folder in an object store: the job's answers and then its summary, uploaded from the local staging
        folder (store rule 3: the answers' parts, their manifest, the summary last - the summary says they are
        whole). Only when the job wrote its summary (a job killed half-way publishes nothing). True if uploaded."""
        if self.staged is None or not (self.staged / CHECKPOINTS_SUMMARY).exists():
            return False
        if self.direct:  # Spark committed its answers in the store: its job commit's marker is there, or they are
            # not whole (a summary without it would vouch for them)
            marker = self.folder.checkpoints / "_SUCCESS"
            if not store.exists(marker):
                raise RunFolderError(
                    f"the latest-checkpoints job ended, but its answers at {store.url_of(marker)} "
                    "have no commit marker (_SUCCESS): Spark did not commit them whole, and they "
                    "are not read. Run compute_latest_checkpoints again."
                )
            summary = json.loads((self.staged / CHECKPOINTS_SUMMARY).read_text())
            summary["output_files"] = {
                n: size for n, size in store.listing(self.folder.checkpoints).items() if is_part(n)
            }  # what Spark committed: the reader checks it (rule 6)
            store.write_bytes(self.folder.checkpoints_summary, json.dumps(summary, sort_keys=True).encode())
            return True
        out = self.staged / CHECKPOINTS
        files: dict[str, int] = {}
        if out.is_dir():
            files = store.upload_tree(out, self.folder.checkpoints, skip=(MANIFEST,))
            if (out / MANIFEST).exists():  # after the parts it names
                store.write_bytes(self.folder.checkpoints / MANIFEST, (out / MANIFEST).read_bytes())
        published = store.url_of(self.folder.checkpoints)
        for side in SIDES:  # the quarantine and regressions tables the summary names
            if (self.staged / f"{CHECKPOINTS}{side}").is_dir():
                store.upload_tree(self.staged / f"{CHECKPOINTS}{side}", store.as_path(published + side))
        summary = json.loads((self.staged / CHECKPOINTS_SUMMARY).read_text())
        for k in ("output", "quarantine_output", "regressions_output"):  # named where they are now, not staged
            v = summary.get(k)
            if isinstance(v, str) and v.startswith(str(out)):
                summary[k] = published + v[len(str(out)) :]
        summary["output_files"] = {n: size for n, size in files.items() if is_part(n)}
        store.write_bytes(self.folder.checkpoints_summary, json.dumps(summary, sort_keys=True).encode())
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.publish()
        finally:
            self.cleanup()
            if self.staged is not None:
                shutil.rmtree(self.staged, ignore_errors=True)


def write_options_file(target_conf: dict, key: str, hadoop: dict[str, str] | None = None) -> Path:
    """The target's client settings for the job: Java (Spark's Kafka source) and librdkafka (the driver's checks),
    and ``hadoop``, the settings the job sets on its Spark session (S3A's, :func:`mm2_failover.adapters.config.s3a_settings`),
    in a 0600 file of :func:`private_dir` named by ``key`` (the run folder: the same path for every try)."""
    java = java_client_options(target_conf)
    rdk = {k: v for k, v in target_conf.items() if isinstance(v, (str, int, float, bool))}
    f = private_dir() / f"job-{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
    f.unlink(missing_ok=True)
    fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"java": java, "librdkafka": rdk, **({"hadoop": hadoop} if hadoop else {})}, out)
    return f


def job_submission(params, folder, snapshot, target_conf: dict) -> JobSubmission:
    """The latest-checkpoints job's submission for one run: the same for the Airflow operator and the CLI. The
    Kafka client settings (secrets) go into a private file (see the module docstring); call ``cleanup()`` after."""
    topics = snapshot.checkpoints_topics  # alias -> topic
    ends = {
        t: {str(p): o for (tt, p), o in sorted(snapshot.checkpoints_end.items()) if tt == t} for t in topics.values()
    }
    starts = {
        t: {str(p): o for (tt, p), o in sorted(snapshot.checkpoints_start.items()) if tt == t} for t in topics.values()
    }
    # the summary says the answers are complete (the job writes it last): an old one must never vouch for the
    # new, maybe partial, answers of a job that is killed (the plan reads answers only with their summary)
    store.remove_tree(folder.checkpoints_summary)
    remote = store.is_remote(folder.dir)
    key = store.url_of(folder.dir) if remote else str(Path(folder.dir).resolve())
    direct = remote and spark_io() == "s3a"
    options = write_options_file(target_conf, key, s3a_settings() if direct else None)
    staged = None
    output, summary = folder.checkpoints, folder.checkpoints_summary
    if remote:  # the summary (and, staged, the answers) written locally first, uploaded after (JobSubmission.publish)
        for what in (folder.checkpoints, *(store.as_path(f"{store.url_of(folder.checkpoints)}{s}") for s in SIDES)):
            store.remove_tree(what)  # what an earlier try left: never mixed with this one's
        staged = private_dir() / f"stage-{hashlib.sha256(key.encode()).hexdigest()[:32]}"
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(mode=0o700)
        output, summary = staged / CHECKPOINTS, staged / CHECKPOINTS_SUMMARY
        if direct:  # Spark writes the answers into the store itself (s3a://); only the summary is staged
            output = s3a_url(store.url_of(folder.checkpoints))
    args = ["--bootstrap-servers", str(target_conf["bootstrap.servers"])]
    for alias, t in topics.items():
        args += ["--checkpoints-topic", f"{alias}={t}"]
    args += [
        "--end-offsets",
        json.dumps(ends),
        "--start-offsets",
        json.dumps(starts),
        "--policy",
        params.checkpoint_policy,
        "--output",
        str(output),
        "--summary",
        str(summary),
        "--max-quarantined",
        str(params.max_quarantined_records),
        "--kafka-options-file",
        str(options),
    ]
    pull_state()
    if (state_root() / "CURRENT.json").exists():  # start from the newest usable state version, read the tail
        args += ["--state-dir", str(state_root())]
        url = state_url() if direct else None
        if url:
            args += ["--state-url", url]
    sub = submission_of(args, options, java_system_properties(target_conf))
    sub.staged, sub.folder, sub.direct = staged, folder, direct
    return sub


def refresh_submission(aliases_topics: dict[str, str], target_conf: dict) -> JobSubmission:
    """The scheduled refresh of the latest-checkpoint state (``--refresh-state``): every alias's checkpoints topic up
    to its current end; the summary goes to ``<state>/last-refresh.json``."""
    root = state_root()
    root.mkdir(parents=True, exist_ok=True)
    pull_state()  # with the archive in a store: start from the store's newest version, not this host's
    url = state_url() if spark_io() == "s3a" else None  # Spark publishes the version in the store itself
    options = write_options_file(target_conf, f"refresh:{root.resolve()}", s3a_settings() if url else None)
    args = ["--bootstrap-servers", str(target_conf["bootstrap.servers"])]
    for alias, t in sorted(aliases_topics.items()):
        args += ["--checkpoints-topic", f"{alias}={t}"]
    args += [
        "--end-offsets",
        "latest",
        "--state-dir",
        str(root),
        "--refresh-state",
        "--summary",
        str(root / "last-refresh.json"),
        "--kafka-options-file",
        str(options),
    ]
    if url:
        args += ["--state-url", url]
    sub = submission_of(args, options, java_system_properties(target_conf))
    sub.state_url = url
    return sub


def pull_state() -> None:
    """With the archive in an object store: this host's copy of the latest-checkpoint state brought up to the
    store's before a job reads it (:func:`mm2_failover.adapters.state.pull`); what it says goes to the log."""
    remote = state_store()
    if remote is None:
        return
    for line in state.pull(remote, state_root()):
        log.warning("%s", line)


def state_url() -> str | None:
    """Where Spark reads the state's versions when it writes through S3A: the store's ``latest-state`` as
    ``s3a://`` - when the archive is in S3 and every version of this host's copy is there too (a version a refresh
    here did not push yet is only on this host: then the host's copy, said in the log). None otherwise."""
    remote = state_store()
    if remote is None or store.scheme_of(store.url_of(remote)) not in ("s3", "s3a"):
        return None
    here = {d.name for d in state_root().glob("v-*") if (d / "version.json").is_file()}
    there = {n for n in store.names(remote) if n in here and store.exists(store.as_path(remote) / n / "version.json")}
    if here - there:
        log.warning(
            "the state versions %s are on this host only (not pushed to %s): Spark reads this host's copy",
            sorted(here - there),
            store.url_of(remote),
        )
        return None
    return s3a_url(store.url_of(remote))


def push_state(sub: JobSubmission | None = None) -> list[str]:
    """After a successful refresh (``sub``), with the archive in an object store: the versions it published
    uploaded, the pointer last (:func:`mm2_failover.adapters.state.push`). Returns the versions uploaded ([] for a local
    archive). A refresh through S3A published its version in the store itself: only its summary
    (``last-refresh.json``) is uploaded, and the store's ``CURRENT.json`` is left as Spark's refresh set it (this
    host's copy catches up at its next job's pull)."""
    remote = state_store()
    if remote is None:
        return []
    if sub is not None and sub.state_url:
        last = state_root() / "last-refresh.json"
        if last.exists():
            store.write_bytes(store.as_path(remote) / "last-refresh.json", last.read_bytes())
        return []
    return state.push(state_root(), remote)


def submission_of(args: list[str], options: Path, jvm_properties: dict[str, str] | None = None) -> JobSubmission:
    """The job's submission for these arguments: environment and Spark conf (credential redaction included), and the
    JVM system properties the Kafka connection needs (:func:`mm2_failover.adapters.java_client.java_system_properties`)
    on the driver's and the executors' JVMs, after any the deployment's Spark conf gives."""
    env = {"PYTHONPATH": str(PLUGINS_DIR), "PYSPARK_PYTHON": sys.executable}
    # redact anything that looks like a credential in Spark's UI, logs and event log too
    conf = {
        "spark.pyspark.python": sys.executable,
        "spark.redaction.regex": "(?i)secret|password|token|access[.]?key|jaas|sasl|keystore|truststore",
        **spark_conf(),
    }
    if jvm_properties:
        flags = " ".join(f"-D{k}={v}" for k, v in sorted(jvm_properties.items()))
        for side in ("driver", "executor"):
            key = f"spark.{side}.extraJavaOptions"
            conf[key] = f"{conf[key]} {flags}" if conf.get(key) else flags
    return JobSubmission(args, env, conf, options)


def spark_submit_cmd(
    master: str,
    conf: dict[str, str],
    args: list[str],
    job=None,
    name: str = "mm2-failover-latest-checkpoints",
    driver_memory: str | None = None,
    s3a: bool | None = None,
) -> list[str]:
    """The venv's spark-submit command line for the job (default: the package's job) with the Maven-fetched Kafka
    source jars (and S3A's: ``s3a``, default :func:`mm2_failover.adapters.config.spark_io`): one place for the CLI and the
    benchmarks."""
    cmd = [
        str(Path(sys.executable).with_name("spark-submit")),
        "--master",
        master,
        "--jars",
        ",".join(spark_jars(s3a)),
        "--name",
        name,
    ]
    if driver_memory:
        cmd += ["--driver-memory", driver_memory]
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    return cmd + [str(job or SPARK_JOB), *args]


def spark_submit(master: str, sub: JobSubmission, said: list[str] | None = None) -> int:
    """Run the job with the venv's spark-submit (the CLI path; Airflow uses SparkSubmitOperator). Its output goes
    to this process's stderr as it comes; the job's own messages (``latest_checkpoints: ...``) are also appended to
    ``said``, for the caller's error message."""
    return _stream(spark_submit_cmd(master, sub.conf, sub.args), {**os.environ, **sub.env}, said)
