"""The local bed: a source and a target Kafka cluster (one KRaft broker each) and MirrorMaker 2.

``make demo``, ``make bed`` (``python -m testbed.bed``), the test suite and the benchmarks all start the bed
through :class:`Bed`.

* Jars come from Maven Central through ``jvm/*/pom.xml`` (``scripts/fetch_jars.sh`` caches them in
  ``.cache/jars``); Java 17+ runs them.
* Everything listens on 127.0.0.1 on free ports; each process logs into the run folder, and the logs are
  printed when a process fails to become ready.
* Readiness is observed, never slept for: a broker is ready when it answers metadata, MM2 when
  ``<source>.checkpoints.internal`` exists on the target.
* Processes are stopped on :meth:`Bed.stop`, at interpreter exit, on SIGTERM, and (through
  ``PR_SET_PDEATHSIG``) by the kernel if the Python process dies without cleaning up.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from testbed.tls import CLIENT_CN

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JARS = REPO_ROOT / ".cache" / "jars"
DEFAULT_RUNS = REPO_ROOT / "var" / "bed"

LOG4J2 = """\
status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c{1})%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = out
logger.reflections.name = org.reflections
logger.reflections.level = error
"""


# The SCRAM user every bed broker knows on its SASL_PLAINTEXT listener (Broker.sasl_bootstrap). A test credential.
SCRAM_USER = "failover"
SCRAM_PASSWORD = "bed-Scram-Secret-7f3c"
# MirrorMaker 2's own SCRAM user: on a bed with tls=True, MM2 reaches both clusters over SASL_SSL as this user (a
# super user when acls=True: MM2's ACLs are not the pipeline's)
MM2_USER = "mm2"
MM2_PASSWORD = "bed-Mm2-Secret-21d9"


# the principal of the bed's OAUTHBEARER listener (an unsecured JWT's sub) and the login module both sides use
OAUTH_USER = "failover-oauth"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def mtls_conf(broker: "Broker") -> dict:
    """librdkafka settings for a bed broker's mTLS listener: the bed's client certificate and key."""
    t = broker.tls
    return {
        "bootstrap.servers": broker.mtls_bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(t.ca),
        "ssl.certificate.location": str(t.client_cert),
        "ssl.key.location": str(t.client_key),
    }


def oauth_conf(broker: "Broker") -> dict:
    """librdkafka settings for a bed broker's OAUTHBEARER listener: an unsecured JWT for :data:`OAUTH_USER`."""
    return {
        "bootstrap.servers": broker.oauth_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": "true",
        "sasl.oauthbearer.config": f"principal={OAUTH_USER}",
    }


def scram_conf(bootstrap: str, password: str = SCRAM_PASSWORD, ca: Path | None = None) -> dict:
    """librdkafka settings for a broker's SASL_PLAINTEXT listener (with ``ca``: its SASL_SSL one, verified
    against that CA file)."""
    conf = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": SCRAM_USER,
        "sasl.password": password,
    }
    if ca is not None:
        conf.update({"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca)})
    return conf


class BedError(RuntimeError):
    """The bed could not start; the message names the process and includes its log tail."""


_handed_out: set[int] = set()


def free_port() -> int:
    """A free loopback port never handed out before in this process: the kernel may return a port it just gave
    (bound and closed, nobody listening yet), which once made two brokers of one bed pick the same port."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise BedError("no free loopback port after 100 tries")


# A bed started with acls=True: Kafka's StandardAuthorizer, nothing allowed without an ACL. The PLAINTEXT listeners
# (the bed's and the tests' own clients, the controller, and MM2 unless tls=True) authenticate as ANONYMOUS, a super
# user, and so is MM2's own user; the SCRAM user :data:`SCRAM_USER` - the pipeline's principal - gets exactly the
# ACLs a test grants.
ACL_BROKER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "false",
    # the mTLS and OAUTHBEARER principals too: their tests are of authentication, not of the pipeline's ACLs
    "super.users": f"User:ANONYMOUS;User:{MM2_USER};User:CN={CLIENT_CN};User:{OAUTH_USER}",
}


def set_acls(bed, bindings, create: bool) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    from mm2_failover.adapters.kafka.cluster import Cluster

    ops = {
        "Read": AclOperation.READ,
        "Describe": AclOperation.DESCRIBE,
        "Delete": AclOperation.DELETE,
        "DescribeConfigs": AclOperation.DESCRIBE_CONFIGS,
        "Write": AclOperation.WRITE,
        "Create": AclOperation.CREATE,
    }
    kinds = {
        "Topic": ResourceType.TOPIC,
        "Group": ResourceType.GROUP,
        "Cluster": ResourceType.BROKER,
        "TransactionalId": ResourceType.TRANSACTIONAL_ID,
    }
    by_cluster: dict[str, list] = {}
    for b in bindings:
        kind = AclBinding if create else AclBindingFilter
        by_cluster.setdefault(b.cluster, []).append(
            kind(
                kinds[b.resource],
                b.name,
                ResourcePatternType.PREFIXED if b.prefixed else ResourcePatternType.LITERAL,
                f"User:{SCRAM_USER}",
                "*",
                ops[b.operation],
                AclPermissionType.ALLOW,
            )
        )
    for cluster, acls in by_cluster.items():
        c = Cluster(
            {"bootstrap.servers": bed.source_bootstrap if cluster == "source" else bed.target_bootstrap}, cluster
        )
        futs = c.admin.create_acls(acls) if create else c.admin.delete_acls(acls)
        for f in futs.values():
            f.result(30)
        log.info("%s %d ACL(s) on %s", "granted" if create else "revoked", len(acls), cluster)
    time.sleep(1.0)  # ACLs reach the authorizer through the metadata log: a moment


def _pdeathsig() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    os.setpgrp()  # own process group: Ctrl-C in a terminal reaches us, and we stop children in order


#: ``1`` (the test suite sets it: tests/conftest.py): the bed's JVMs run C1 only. On the suite's small loads the JIT's
#: second tier costs more than it saves - measured (a bed's two brokers and MM2): started in 10.4 CPU-s against 16.2,
#: idle at 4.5 CPU-s a minute against 5.8, 30,000 records replicated in 3.2 against 6.7. Unset (the benchmarks, the
#: demo), the brokers run as a deployment's do.
QUICK_JIT_ENV = "MM2_FAILOVER_BED_QUICK_JIT"


def quick_jit() -> list[str]:
    """The JIT option of the bed's JVMs (:data:`QUICK_JIT_ENV`)."""
    return ["-XX:TieredStopAtLevel=1"] if os.environ.get(QUICK_JIT_ENV) == "1" else []


def java_cmd(jars: Path, main: str, *args: str, heap: str = "512m", log4j: Path | None = None) -> list[str]:
    java = shutil.which("java")
    if not java:
        raise BedError(
            "java not found on PATH: the bed needs Java 17+ (Debian: apt-get install openjdk-17-jre-headless)"
        )
    cmd = [java, f"-Xmx{heap}", "-XX:+UseSerialGC", *quick_jit(), "-Djava.awt.headless=true"]
    if log4j:
        cmd.append(f"-Dlog4j2.configurationFile={log4j}")
    return cmd + ["-cp", f"{jars}/*", main, *args]


def kafka_jars(jars_root: Path = DEFAULT_JARS) -> Path:
    d = jars_root / "kafka"
    if not d.is_dir() or not any(d.glob("kafka_2.13-*.jar")):
        raise BedError(f"Kafka jars not found in {d}: run scripts/fetch_jars.sh (make setup) first")
    return d


def kafka_consumer_groups(bootstrap: str, *args: str, jars_root: Path | None = None) -> subprocess.CompletedProcess:
    """Kafka's own kafka-consumer-groups (ConsumerGroupCommand from the Maven-fetched tools jar)."""
    cmd = java_cmd(
        kafka_jars(jars_root or DEFAULT_JARS),
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "--bootstrap-server",
        bootstrap,
        *args,
        heap="256m",
    )
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def cluster_id() -> str:
    # StorageTool reads an id starting with '-' as an option (about 1 id in 64): never make one.
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def run_until_interrupted(what: str, alive) -> int:
    """Keep a started bed/cluster up for a person at a shell: 0 on Ctrl-C, 1 when one of its processes exits."""
    print(f"{what} running; Ctrl-C stops it", flush=True)
    try:
        while alive():
            time.sleep(1)
        print(f"a {what} process exited; stopping", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


class StartedInContext:
    """``with X(...) as x:`` starts x and always stops it, also when the start itself fails half-way."""

    def start(self):
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@dataclass
class Process:
    name: str
    cmd: list[str]
    log_path: Path
    popen: subprocess.Popen | None = None

    def start(self, env: dict | None = None) -> None:
        """Start it, its output appended to its log. It gets SIGTERM when the *thread* that started it ends
        (PR_SET_PDEATHSIG): start bed processes from a thread that outlives them (not a ``threading.Timer``)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.log_path, "ab")
        self.popen = subprocess.Popen(
            self.cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_pdeathsig,
            env=env,
        )
        out.close()
        log.info("started %s (pid %s), log %s", self.name, self.popen.pid, self.log_path)

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        p = self.popen
        if p is None or p.poll() is not None:
            return
        p.terminate()
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop in %.0fs after SIGTERM: killing it", self.name, timeout)
            p.kill()
            p.wait(5)

    def fail(self, why: str) -> BedError:
        return BedError(
            f"{self.name} {why}. Command: {' '.join(self.cmd)}\n--- {self.log_path} (tail) ---\n{tail(self.log_path)}"
        )


def add_listener(props: dict, name: str, port: int, protocol: str) -> None:
    """One more listener on loopback: listened on, advertised, and its security protocol."""
    props["listeners"] += f",{name}://127.0.0.1:{port}"
    props["advertised.listeners"] += f",{name}://127.0.0.1:{port}"
    props["listener.security.protocol.map"] += f",{name}:{protocol}"


@dataclass
class Broker:
    """One KRaft broker in combined mode (broker + controller) = one cluster."""

    alias: str
    run_dir: Path
    jars: Path
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    sasl_port: int = field(default_factory=free_port)
    extra: dict = field(default_factory=dict)
    process: Process | None = None
    tls: "object | None" = None  # testbed.tls.Tls: a third listener, SASL_SSL (SCRAM-SHA-512 over TLS), and two more
    ssl_port: int = field(default_factory=free_port)
    mtls_port: int = field(default_factory=free_port)
    oauth_port: int = field(default_factory=free_port)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        """A second listener, SASL_PLAINTEXT with SCRAM-SHA-512 (user :data:`SCRAM_USER`): for tests of
        credentials and authentication errors. MM2 and everything else use the PLAINTEXT one."""
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def ssl_bootstrap(self) -> str:
        """With ``tls``: the SASL_SSL listener (SCRAM-SHA-512 over TLS, the broker's certificate signed by the bed's
        own CA ``tls.ca``), the way production clusters are reached."""
        return f"127.0.0.1:{self.ssl_port}"

    @property
    def mtls_bootstrap(self) -> str:
        """With ``tls``: an SSL listener that requires a client certificate signed by the bed's CA (mTLS; the
        principal is ``User:CN=<the certificate's CN>``)."""
        return f"127.0.0.1:{self.mtls_port}"

    @property
    def oauth_bootstrap(self) -> str:
        """With ``tls``: a SASL_PLAINTEXT listener with OAUTHBEARER, tokens checked by Kafka's own unsecured JWT
        validator (the principal is the token's ``sub``)."""
        return f"127.0.0.1:{self.oauth_port}"

    @property
    def dir(self) -> Path:
        return self.run_dir / self.alias

    def properties(self) -> dict:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},"
                f"CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "log.dirs": str(self.dir / "data"),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            # the fenced writer's first initTransactions on a bed creates __transaction_state: one partition, not 50
            "transaction.state.log.num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            # an idle controller appends a no-op record to the metadata log every 500 ms by default: measured on
            # this machine, an idle broker took 5.0% of a core with it and 3.0% at 5 s, and the suite keeps 6-10
            # brokers up at once on 2 cores. Metadata changes (a topic created) are still appended at once.
            "metadata.max.idle.interval.ms": "5000",
        }
        if self.tls is not None:
            add_listener(props, "SASL_SSL", self.ssl_port, "SASL_SSL")
            props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            )
            props["ssl.keystore.type"] = "PEM"
            props["ssl.keystore.location"] = str(self.tls.keystore)
            # mTLS: a client certificate signed by the bed's CA, required
            add_listener(props, "MTLS", self.mtls_port, "SSL")
            props["listener.name.mtls.ssl.client.auth"] = "required"
            props["listener.name.mtls.ssl.truststore.type"] = "PEM"
            props["listener.name.mtls.ssl.truststore.location"] = str(self.tls.ca)
            # OAUTHBEARER, unsecured JWTs (Kafka's default validator for the mechanism)
            add_listener(props, "OAUTH", self.oauth_port, "SASL_PLAINTEXT")
            props["listener.name.oauth.sasl.enabled.mechanisms"] = "OAUTHBEARER"
            props["listener.name.oauth.oauthbearer.sasl.jaas.config"] = (
                f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="{OAUTH_USER}";'
            )
        props.update(self.extra)
        return props

    def format_cmd(self) -> list[str]:
        cfg = self.dir / "server.properties"
        return java_cmd(
            self.jars,
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id(),
            "-c",
            str(cfg),
            "--standalone",
            "--add-scram",
            f"SCRAM-SHA-512=[name={SCRAM_USER},password={SCRAM_PASSWORD}]",
            "--add-scram",
            f"SCRAM-SHA-512=[name={MM2_USER},password={MM2_PASSWORD}]",
            heap="256m",
            log4j=self.dir / "log4j2.properties",
        )

    def prepare(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        write_properties(self.dir / "server.properties", self.properties())
        (self.dir / "log4j2.properties").write_text(LOG4J2.replace("{level}", "info"))

    def format_storage(self) -> None:
        """:meth:`prepare`, then KRaft's storage format (raises, naming its log, when it fails)."""
        self.prepare()
        fmt = Process(f"storage format {self.alias}", self.format_cmd(), self.dir / "format.log")
        fmt.start()
        if fmt.popen.wait(60) != 0:
            raise fmt.fail(f"exited with {fmt.popen.returncode}")

    def start(self) -> None:
        self.process = Process(
            f"broker {self.alias}",
            java_cmd(
                self.jars, "kafka.Kafka", str(self.dir / "server.properties"), log4j=self.dir / "log4j2.properties"
            ),
            self.dir / "broker.log",
        )
        self.process.start()


def write_properties(path: Path, props: dict) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


def _quiet_logger() -> logging.Logger:
    lg = logging.getLogger("testbed.bed.librdkafka")
    lg.setLevel(logging.CRITICAL)
    lg.propagate = False
    return lg


def broker_ready(bootstrap: str, timeout: float = 1.0) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, "logger": _quiet_logger()})
    try:
        md = admin.list_topics(timeout=timeout)
        return bool(md.brokers)
    except Exception:  # noqa: BLE001 - any failure is "not up yet": the caller polls
        return False


def topic_exists(bootstrap: str, topic: str, timeout: float = 2.0) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, "logger": _quiet_logger()})
    try:
        return topic in admin.list_topics(timeout=timeout).topics
    except Exception:  # noqa: BLE001 - any failure is "not there yet": the caller polls
        return False


class Bed(StartedInContext):
    """Source cluster + target cluster + MirrorMaker 2 (dedicated mode), on loopback.

    ``with Bed() as bed: ...`` starts everything and always stops it. ``mm2`` settings are added to (and
    override) the defaults, e.g. ``{"offset.lag.max": "0"}``.
    """

    def __init__(
        self,
        run_dir: Path | str | None = None,
        source_alias: str = "primary",
        target_alias: str = "backup",
        mm2: dict | None = None,
        jars_root: Path = DEFAULT_JARS,
        start_mm2: bool = True,
        acls: bool = False,
        tls: bool = False,
    ):
        stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
        self.run_dir = Path(run_dir) if run_dir else DEFAULT_RUNS / stamp
        self.source_alias = source_alias
        self.target_alias = target_alias
        self.jars = kafka_jars(jars_root)
        self.source = Broker(source_alias, self.run_dir, self.jars)
        self.target = Broker(target_alias, self.run_dir, self.jars)
        if acls:
            for b in (self.source, self.target):
                b.extra.update(ACL_BROKER)
        self.tls = None
        if tls:  # one CA for the bed; each broker's listener certificate signed by it
            from testbed.tls import make

            self.tls = make(self.run_dir / "tls")
            self.source.tls = self.target.tls = self.tls
        self.mm2_overrides = dict(mm2 or {})
        self.with_mm2 = start_mm2
        self.mm2: Process | None = None
        self.extra_mm2: list[Process] = []
        self.extra_brokers: list[Broker] = []
        self.reverse_mm2: Process | None = None
        self._atexit = False

    # -- addresses ----------------------------------------------------------------------------------
    @property
    def source_bootstrap(self) -> str:
        return self.source.bootstrap

    @property
    def target_bootstrap(self) -> str:
        return self.target.bootstrap

    @property
    def checkpoints_topic(self) -> str:
        return f"{self.source_alias}.checkpoints.internal"

    # -- the pipeline's view of the bed: one way for every test and drill ------------------------------
    def client(self, role: str, timeout: float | None = None):
        """The pipeline's client (``adapters.kafka.cluster.Cluster``) of this bed's ``source`` or ``target`` cluster,
        over PLAINTEXT; ``timeout``: its calls' deadline (None: the client's default)."""
        from mm2_failover.adapters.kafka.cluster import TIMEOUT_S, Cluster

        boot = {"source": self.source_bootstrap, "target": self.target_bootstrap}[role]
        return Cluster({"bootstrap.servers": boot}, role, TIMEOUT_S if timeout is None else timeout)

    def run_context(self, folder, timeout: float = 15.0, **params):
        """A run on this bed as the CLI builds it (``RunContext.from_cli``), in ``folder``, with these run
        parameters over a drain's quiet window of 1 s."""
        from mm2_failover.rules.run_params import RunParams
        from mm2_failover.stages.context import RunContext

        confs = {
            "target": {"bootstrap.servers": self.target_bootstrap},
            "source": {"bootstrap.servers": self.source_bootstrap},
        }
        return RunContext.from_cli(RunParams(**{"drain_quiet_seconds": 1, **params}), folder, confs, timeout)

    def info(self) -> dict:
        return {
            "run_dir": str(self.run_dir),
            "source_alias": self.source_alias,
            "target_alias": self.target_alias,
            "source_bootstrap": self.source_bootstrap,
            "target_bootstrap": self.target_bootstrap,
            "checkpoints_topic": self.checkpoints_topic,
        }

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> "Bed":
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if not self._atexit:
            atexit.register(self.stop)
            self._atexit = True
        _install_sigterm()
        t0 = time.monotonic()
        brokers = [self.source, self.target]
        for b in brokers:
            b.prepare()
        fmt = [Process(f"storage format {b.alias}", b.format_cmd(), b.dir / "format.log") for b in brokers]
        for p in fmt:
            p.start()
        for p in fmt:
            if p.popen.wait(60) != 0:
                raise p.fail(f"exited with {p.popen.returncode}")
        for b in brokers:
            b.start()
        for b in brokers:
            self._wait(lambda b=b: broker_ready(b.bootstrap), b.process, timeout, "did not answer metadata")
        log.info(
            "brokers ready in %.1fs: %s=%s %s=%s",
            time.monotonic() - t0,
            self.source_alias,
            self.source_bootstrap,
            self.target_alias,
            self.target_bootstrap,
        )
        if self.with_mm2:
            self.start_mm2(timeout)
        return self

    def mm2_properties(self) -> dict:
        s, t = self.source_alias, self.target_alias
        props = {
            "clusters": f"{s}, {t}",
            f"{s}.bootstrap.servers": self.source_bootstrap,
            f"{t}.bootstrap.servers": self.target_bootstrap,
            f"{s}->{t}.enabled": "true",
            f"{t}->{s}.enabled": "false",
            f"{s}->{t}.topics": ".*",
            f"{s}->{t}.groups": ".*",
            # our pipeline, not MM2, moves the groups
            "sync.group.offsets.enabled": "false",
            # checkpoints and progress quickly, for a bed
            "emit.checkpoints.interval.seconds": "1",
            "emit.heartbeats.interval.seconds": "1",
            "refresh.topics.interval.seconds": "1",
            "refresh.groups.interval.seconds": "1",
            f"{t}.offset.flush.interval.ms": "1000",
            f"{s}.plugin.discovery": "service_load",
            f"{t}.plugin.discovery": "service_load",
            # one broker per cluster
            "replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "config.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
        }
        if self.tls is not None:  # MM2 with its own credentials, over TLS, like production
            for alias, broker in ((s, self.source), (t, self.target)):
                props.update(
                    {
                        f"{alias}.bootstrap.servers": broker.ssl_bootstrap,
                        f"{alias}.security.protocol": "SASL_SSL",
                        f"{alias}.sasl.mechanism": "SCRAM-SHA-512",
                        f"{alias}.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                        f'username="{MM2_USER}" password="{MM2_PASSWORD}";',
                        f"{alias}.ssl.truststore.type": "PEM",
                        f"{alias}.ssl.truststore.location": str(self.tls.ca),
                    }
                )
        props.update(self.mm2_overrides)
        return props

    def start_mm2(self, timeout: float = 90.0) -> None:
        self.mm2 = self._start_mm2_process("mm2", self.source_alias, self.mm2_properties(), timeout)

    def start_extra_mm2(self, alias: str, topics: str, overrides: dict | None = None, timeout: float = 90.0) -> Process:
        """Another MM2 flow from the same source cluster to the target under another source alias (e.g. with
        the identity replication policy), for scenarios with several sources. Its offset syncs live on the
        target so that it does not share the source-side sync topic with the main flow."""
        s, t = alias, self.target_alias
        props = {
            k: v
            for k, v in self.mm2_properties().items()
            if not k.startswith((f"{self.source_alias}.", f"{self.source_alias}->", f"{t}->"))
        }
        props.update(
            {
                "clusters": f"{s}, {t}",
                f"{s}.bootstrap.servers": self.source_bootstrap,
                f"{s}->{t}.enabled": "true",
                f"{t}->{s}.enabled": "false",
                f"{s}->{t}.topics": topics,
                f"{s}->{t}.groups": ".*",
                f"{s}.plugin.discovery": "service_load",
                "offset-syncs.topic.location": "target",
                "emit.heartbeats.enabled": "false",
            }
        )
        props.update(overrides or {})
        proc = self._start_mm2_process(f"mm2-{alias}", alias, props, timeout)
        self.extra_mm2.append(proc)
        return proc

    def start_reverse_mm2(self, overrides: dict | None = None, timeout: float = 90.0) -> Process:
        """MirrorMaker 2's ``backup->primary`` flow in a process of its own (bidirectional replication, default
        policy: ``primary.orders`` is never copied back - a cycle -, ``orders`` written on backup arrives on primary
        as ``backup.orders``; checkpoints in ``backup.checkpoints.internal`` on primary): failing back. Started once
        the primary is back; stopped with the bed."""
        s, t = self.source_alias, self.target_alias
        props = self.mm2_properties()
        props.update(
            {
                f"{s}->{t}.enabled": "false",
                f"{t}->{s}.enabled": "true",
                f"{t}->{s}.topics": ".*",
                f"{t}->{s}.groups": ".*",
                f"{s}.offset.flush.interval.ms": "1000",
            }
        )
        props.update(overrides or {})
        self.reverse_mm2 = self._start_mm2_process("mm2-reverse", t, props, timeout, to=(s, self.source))
        self.extra_mm2.append(self.reverse_mm2)
        return self.reverse_mm2

    def _start_mm2_process(
        self, name: str, alias: str, props: dict, timeout: float, to: tuple[str, "Broker"] | None = None
    ) -> Process:
        to_alias, to_broker = to or (self.target_alias, self.target)
        d = self.run_dir / name
        d.mkdir(parents=True, exist_ok=True)
        write_properties(d / "mm2.properties", props)
        (d / "log4j2.properties").write_text(LOG4J2.replace("{level}", "info"))
        proc = Process(
            f"MirrorMaker 2 ({alias}->{to_alias})",
            java_cmd(
                self.jars,
                "org.apache.kafka.connect.mirror.MirrorMaker",
                str(d / "mm2.properties"),
                "--clusters",
                to_alias,
                log4j=d / "log4j2.properties",
            ),
            d / "mm2.log",
        )
        t0 = time.monotonic()
        proc.start()
        from mm2_failover.rules.naming import checkpoints_topic

        internal_sep = props.get("replication.policy.separator", ".")
        if props.get("replication.policy.internal.topic.separator.enabled", "true").lower() == "false":
            internal_sep = "."  # MM2 keeps '.' for its own topics then
        cp = checkpoints_topic(alias, internal_sep)
        self._wait(lambda: topic_exists(to_broker.bootstrap, cp), proc, timeout, f"did not create {cp} on {to_alias}")
        log.info("%s ready in %.1fs (%s exists)", proc.name, time.monotonic() - t0, cp)
        return proc

    def add_source_cluster(
        self, alias: str, topics: str = ".*", overrides: dict | None = None, timeout: float = 90.0
    ) -> Broker:
        """Another source cluster (one more KRaft broker) replicated to the target by its own MM2 flow under
        ``alias``: a second data centre. Stopped with the bed."""
        b = Broker(alias, self.run_dir, self.jars)
        b.format_storage()
        b.start()
        self.extra_brokers.append(b)
        self._wait(lambda: broker_ready(b.bootstrap), b.process, timeout, "did not answer metadata")
        s, t = alias, self.target_alias
        props = {
            k: v
            for k, v in self.mm2_properties().items()
            if not k.startswith((f"{self.source_alias}.", f"{self.source_alias}->", f"{t}->"))
        }
        props.update(
            {
                "clusters": f"{s}, {t}",
                f"{s}.bootstrap.servers": b.bootstrap,
                f"{s}->{t}.enabled": "true",
                f"{t}->{s}.enabled": "false",
                f"{s}->{t}.topics": topics,
                f"{s}->{t}.groups": ".*",
                f"{s}.plugin.discovery": "service_load",
                "emit.heartbeats.enabled": "false",
            }
        )
        props.update(overrides or {})
        self.extra_mm2.append(self._start_mm2_process(f"mm2-{alias}", alias, props, timeout))
        return b

    def mark(self) -> tuple[int, int]:
        """Where the extra MM2 flows and source clusters stand now, for :meth:`stop_extras`."""
        return len(self.extra_mm2), len(self.extra_brokers)

    def stop_extras(self, since: tuple[int, int] = (0, 0)) -> None:
        """Stop the extra MM2 flows, then the extra source clusters, started after ``since`` (a :meth:`mark`): a
        test module that added them to the session's bed leaves it as it found it (idle, an MM2 and a broker still
        take CPU from every later test of the session)."""
        m, b = since
        for p in [*self.extra_mm2[m:], *(x.process for x in self.extra_brokers[b:])]:
            if p is not None:
                with contextlib.suppress(Exception):
                    p.stop()
        del self.extra_mm2[m:], self.extra_brokers[b:]

    def stop_mm2(self) -> None:
        if self.mm2:
            self.mm2.stop()

    def kill_mm2(self) -> None:
        """SIGKILL MirrorMaker 2 (no clean shutdown: its unflushed progress is lost, so a restart copies some
        records again). :meth:`start_mm2` starts it again on the same configuration and state."""
        if self.mm2 and self.mm2.alive:
            self.mm2.popen.kill()
            self.mm2.popen.wait(15)
            log.info("killed %s (SIGKILL)", self.mm2.name)

    def kill_target(self) -> None:
        """SIGKILL the target broker (a crash: no clean shutdown); :meth:`restart_target` brings it back."""
        proc = self.target.process
        if proc and proc.alive:
            proc.popen.kill()
            proc.popen.wait(15)
            log.info("killed %s (SIGKILL)", proc.name)

    def restart_target(self, timeout: float = 90.0) -> None:
        """Start the target broker again on its data, ports and settings; returns when it answers."""
        self.target.start()
        self._wait(lambda: broker_ready(self.target_bootstrap), self.target.process, timeout, "did not answer again")

    def grant(self, bindings) -> None:
        """Create ACLs for :data:`SCRAM_USER` (the pipeline's principal) on a bed started with ``acls=True``:
        ``bindings`` are :class:`mm2_failover.rules.acls.Binding` (source or target each)."""
        set_acls(self, bindings, create=True)

    def revoke(self, bindings) -> None:
        set_acls(self, bindings, create=False)

    def stop_source(self) -> None:
        """Stop the source broker (disaster scenarios)."""
        if self.source.process:
            self.source.process.stop()

    def restart_source(self, timeout: float = 90.0) -> None:
        """The source broker back on its data, ports and settings (the primary recovered); returns when it
        answers."""
        self.source.start()
        self._wait(lambda: broker_ready(self.source_bootstrap), self.source.process, timeout, "did not answer again")

    def stop(self) -> None:
        for p in (
            *self.extra_mm2,
            self.mm2,
            *(b.process for b in self.extra_brokers),
            self.source.process,
            self.target.process,
        ):
            if p is not None:
                with contextlib.suppress(Exception):
                    p.stop()

    def _wait(self, ready, process: Process, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        delay = 0.2
        while time.monotonic() < deadline:
            if not process.alive:
                raise process.fail(f"exited with {process.popen.returncode} before it was ready")
            if ready():
                return
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)
        raise process.fail(f"{what} within {timeout:.0f}s")


_sigterm_installed = False


def _install_sigterm() -> None:
    """Turn SIGTERM into SystemExit so that atexit and ``with`` blocks stop the bed."""
    global _sigterm_installed
    if _sigterm_installed:
        return
    try:
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        _sigterm_installed = True
    except ValueError:  # not the main thread
        pass


def main(argv: list[str] | None = None) -> int:
    """``python -m testbed.bed``: start the bed, print how to reach it, run until Ctrl-C."""
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python -m testbed.bed", description=main.__doc__)
    ap.add_argument("--run-dir", type=Path, default=None)
    ap.add_argument("--mm2", action="append", default=[], metavar="KEY=VALUE", help="extra/overriding mm2.properties")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    mm2 = dict(kv.split("=", 1) for kv in args.mm2)
    from testbed.localenv import kafka_conn

    with Bed(run_dir=args.run_dir, mm2=mm2) as bed:
        info = bed.info()
        print(json.dumps(info, indent=2))
        print(f"export AIRFLOW_CONN_KAFKA_SOURCE='{kafka_conn(bed.source_bootstrap)}'")
        print(f"export AIRFLOW_CONN_KAFKA_TARGET='{kafka_conn(bed.target_bootstrap)}'")
        return run_until_interrupted(
            "bed", lambda: all(p is None or p.alive for p in (bed.mm2, bed.source.process, bed.target.process))
        )


if __name__ == "__main__":
    sys.exit(main())
