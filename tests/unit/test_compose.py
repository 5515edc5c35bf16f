"""docker-compose.yaml, checked without a Docker engine: it parses, it is valid against the Compose
specification (check-jsonschema's vendored schema), and it agrees with the project: image versions with the
pins (Kafka in jvm/kafka/pom.xml, Airflow and pyspark in requirements.txt), connection ids and formats with
config.py/localenv.py, MirrorMaker 2 and broker settings with the local bed, mounts with the repository."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import types
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from mm2_failover.adapters import config
from mm2_failover.rules.run_params import RunParams
from testbed import localenv
from testbed.bed import Bed, Broker

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yaml"
DOCKERFILE = REPO / "compose" / "airflow" / "Dockerfile"
MM2_PROPERTIES_MOUNT = "/etc/mm2/mm2.properties"

AIRFLOW_SERVICES = ("airflow-init", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor")
SERVICES = (
    "kafka-primary",
    "kafka-backup",
    "mm2",
    "postgres",
    "spark-master",
    "spark-worker",
    "spark-connect",
    "spark-connect-warm-up",
    *AIRFLOW_SERVICES,
)
# which compose service serves which MM2 alias / connection
CLUSTERS = {"primary": "kafka-primary", "backup": "kafka-backup"}
CONNECTIONS = {config.SOURCE_CONN_ID: "primary", config.TARGET_CONN_ID: "backup"}
ONE_SHOT = ("airflow-init", "fetch-spark-jars", "spark-connect-warm-up", "fetch-s3proxy")
MULTI_WORKER_ENV = REPO / "compose" / "multi-worker.env"
WORKERS = ("airflow-worker-a", "airflow-worker-b")


# -- helpers -----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def pinned(requirement: str) -> str:
    """The version a package is pinned to in requirements.txt (the hashed lock)."""
    m = re.search(rf"^{re.escape(requirement)}==([^\s\\;]+)", (REPO / "requirements.txt").read_text(), re.M | re.I)
    assert m, f"{requirement} is not pinned in requirements.txt"
    return m.group(1)


def kafka_version() -> str:
    root = ET.parse(REPO / "jvm" / "kafka" / "pom.xml").getroot()
    el = root.find("{http://maven.apache.org/POM/4.0.0}properties/{http://maven.apache.org/POM/4.0.0}kafka.version")
    assert el is not None and el.text, "no <kafka.version> in jvm/kafka/pom.xml"
    return el.text.strip()


def split_image(image: str) -> tuple[str, str]:
    """'repo/name:tag' -> (repo/name, tag); no tag -> ''. A digest-pinned reference counts as pinned."""
    if "@sha256:" in image:
        return image.split("@", 1)[0], image.split("@", 1)[1]
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:  # no tag (the colon was a registry port)
        return image, ""
    return name, tag


def interpolate(value: str, variables: dict[str, str]) -> str:
    """Compose's ``${VAR:-default}`` / ``${VAR}`` with ``variables`` (none given: the defaults, as a bare
    ``docker compose up`` does)."""
    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: variables.get(m.group(1)) or (m.group(2) or ""), value)


def env_of(service: dict, variables: dict[str, str] | None = None) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) if "=" in e else (e, "") for e in env)
    return {k: interpolate("" if v is None else str(v), variables or {}) for k, v in env.items()}


def env_file(path: Path) -> dict[str, str]:
    return dict(
        line.split("=", 1)
        for line in path.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )


def depends_of(service: dict) -> dict[str, str]:
    """depends_on as {service: condition} (the short list form means service_started)."""
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {d: "service_started" for d in deps}
    return {d: (spec or {}).get("condition", "service_started") for d, spec in deps.items()}


def mounts(service: dict) -> list[dict]:
    """Volumes in the long form: {type, source, target, read_only}."""
    out = []
    for v in service.get("volumes") or []:
        if isinstance(v, dict):
            out.append(
                {
                    "type": v.get("type", "volume"),
                    "source": v.get("source"),
                    "target": v["target"],
                    "read_only": bool(v.get("read_only")),
                }
            )
            continue
        parts = v.split(":")
        src, tgt = (parts[0], parts[1]) if len(parts) > 1 else (None, parts[0])
        kind = "bind" if src and src.startswith((".", "/", "~", "$")) else "volume"
        out.append({"type": kind, "source": src, "target": tgt, "read_only": len(parts) > 2 and "ro" in parts[2]})
    return out


def published_ports(service: dict) -> list[tuple[str, str, str]]:
    """(host ip, published port, protocol) of each published port."""
    out = []
    for p in service.get("ports") or []:
        if isinstance(p, dict):
            if p.get("published") is not None:
                out.append((p.get("host_ip", "0.0.0.0"), str(p["published"]), p.get("protocol", "tcp")))
            continue
        spec, _, proto = str(p).partition("/")
        parts = spec.rsplit(":", 2)
        if len(parts) == 3:
            out.append((parts[0].strip("[]"), parts[1], proto or "tcp"))
        elif len(parts) == 2:
            out.append(("0.0.0.0", parts[0], proto or "tcp"))
    return out


def read_properties(path: Path) -> dict[str, str]:
    props = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        k, _, v = line.partition("=")
        props[k.strip()] = v.strip()
    return props


def kafka_env_to_properties(env: dict[str, str]) -> dict[str, str]:
    """The apache/kafka image's mapping: KAFKA_FOO_BAR -> foo.bar, '__' -> '-', '___' -> '_'."""
    out = {}
    for k, v in env.items():
        if not k.startswith("KAFKA_") or k in ("KAFKA_HEAP_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS", "KAFKA_LOG4J_OPTS"):
            continue
        name = k[len("KAFKA_") :].lower().replace("___", "\0").replace("__", "-").replace("_", ".").replace("\0", "_")
        out[name] = v
    return out


def listener_ports(env: dict[str, str], name: str) -> set[int]:
    return {int(m.group(1)) for m in re.finditer(rf"\b{name}://[^:,]*:(\d+)", env.get("KAFKA_LISTENERS", ""))}


def advertised(env: dict[str, str], name: str) -> str:
    m = re.search(rf"\b{name}://([^,]+)", env.get("KAFKA_ADVERTISED_LISTENERS", ""))
    return m.group(1) if m else ""


# -- (1) it parses; (2) it is valid against the Compose specification ----------------------------------------
def test_compose_file_parses_as_yaml(compose):
    assert isinstance(compose, dict) and isinstance(compose.get("services"), dict)


def test_compose_file_is_valid_against_the_compose_specification():
    """check-jsonschema with its vendored Compose specification schema. The tool is a project dependency
    (requirements.in): missing, this FAILS. CHECK_JSONSCHEMA may point at another binary."""
    exe = os.environ.get("CHECK_JSONSCHEMA") or str(Path(sys.executable).with_name("check-jsonschema"))
    if not Path(exe).is_file():
        pytest.fail(
            f"check-jsonschema not found at {exe}: it is a dependency of this project (add "
            "check-jsonschema to requirements.in and recompile requirements.txt, then reinstall the venv), "
            "or point CHECK_JSONSCHEMA at the executable"
        )
    r = subprocess.run(
        [exe, "--builtin-schema", "vendor.compose-spec", str(COMPOSE.name)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, (
        f"docker-compose.yaml is not valid against the Compose specification:\n{r.stdout}\n{r.stderr}"
    )


def test_docker_compose_accepts_the_file():
    """Debian's docker-compose (1.29) must accept the file too (it needs no engine; scripts/setup.sh installs it)."""
    exe = shutil.which("docker-compose")
    assert exe is not None, "docker-compose is not on PATH: run scripts/setup.sh (apt-get install docker-compose)"
    for extra in ([], ["--env-file", str(MULTI_WORKER_ENV.relative_to(REPO))]):  # both shapes
        r = subprocess.run(
            [exe, *extra, "-f", str(COMPOSE.name), "config", "-q"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "AIRFLOW_UID": os.environ.get("AIRFLOW_UID", "50000")},
        )
        assert r.returncode == 0, f"docker-compose {extra} config rejected the file:\n{r.stdout}\n{r.stderr}"


# -- (3) consistency with the project ------------------------------------------------------------------------
def test_the_services_are_there(services):
    missing = set(SERVICES) - set(services)
    assert not missing, f"services missing from docker-compose.yaml: {sorted(missing)}"


def test_depends_on_names_services_with_valid_conditions(services):
    conditions = {"service_started", "service_healthy", "service_completed_successfully"}
    for name, svc in services.items():
        for dep, cond in depends_of(svc).items():
            assert dep in services, f"{name} depends on {dep!r}, which is not a service"
            assert dep != name, f"{name} depends on itself"
            assert cond in conditions, f"{name} -> {dep}: unknown condition {cond!r}"
            if cond == "service_healthy":
                assert "healthcheck" in services[dep], (
                    f"{name} waits for {dep} to be healthy, but it has no healthcheck"
                )
            if cond == "service_completed_successfully":
                assert services[dep].get("restart", "no") in ("no", "on-failure"), (
                    f"{name} waits for {dep} to complete, but {dep} restarts"
                )


def test_depends_on_has_no_cycle(services):
    state: dict[str, int] = {}

    def visit(n, path):
        if state.get(n) == 1:
            pytest.fail(f"depends_on cycle: {' -> '.join(path + [n])}")
        if state.get(n) == 2:
            return
        state[n] = 1
        for d in depends_of(services[n]):
            if d in services:  # unknown names: test_depends_on_names_services_with_valid_conditions
                visit(d, path + [n])
        state[n] = 2

    for n in services:
        visit(n, [])


def test_long_running_services_have_healthchecks(services):
    for name, svc in services.items():
        if name in ONE_SHOT:
            continue
        hc = svc.get("healthcheck")
        assert hc and not hc.get("disable") and hc.get("test"), f"{name} has no healthcheck"


def test_the_pipeline_waits_for_what_it_uses(services):
    deps = depends_of(services["airflow-scheduler"])
    for dep, cond in {
        "postgres": "service_healthy",
        "airflow-init": "service_completed_successfully",
        "airflow-apiserver": "service_healthy",
        "kafka-primary": "service_healthy",
        "kafka-backup": "service_healthy",
        "mm2": "service_healthy",
        "spark-worker": "service_healthy",
        "fetch-spark-jars": "service_completed_successfully",
    }.items():
        assert deps.get(dep) == cond, f"airflow-scheduler should wait for {dep} ({cond}), has {deps.get(dep)}"
    for name in ("airflow-apiserver", "airflow-dag-processor"):
        assert depends_of(services[name]).get("airflow-init") == "service_completed_successfully", name
    assert depends_of(services["airflow-init"]).get("postgres") == "service_healthy"
    assert depends_of(services["mm2"]) == {"kafka-primary": "service_healthy", "kafka-backup": "service_healthy"}
    assert depends_of(services["spark-worker"]).get("spark-master") == "service_healthy"


def test_every_image_tag_is_pinned(services):
    for name, svc in services.items():
        assert "image" in svc, f"{name} has no image (a built service needs a tagged name too)"
        repo, tag = split_image(svc["image"])
        assert tag and tag != "latest" and "$" not in svc["image"], f"{name}: image {svc['image']!r} is not pinned"
        assert tag.startswith("sha256:") or re.match(r"\d+\.\d+", tag), (
            f"{name}: tag {tag!r} of {repo} is not a version (major.minor at least)"
        )
    from_lines = [ln for ln in DOCKERFILE.read_text().splitlines() if ln.strip().upper().startswith("FROM ")]
    for ln in from_lines:
        repo, tag = split_image(ln.split()[1])
        assert tag and tag != "latest" and re.match(r"\d+\.\d+", tag), f"Dockerfile: {ln!r} is not pinned"


def test_kafka_images_are_the_kafka_version_of_the_bed(services):
    want = kafka_version()
    for name in ("kafka-primary", "kafka-backup", "mm2"):
        repo, tag = split_image(services[name]["image"])
        assert repo == "apache/kafka", f"{name} should run the official apache/kafka image, not {repo}"
        assert tag == want, f"{name}: apache/kafka:{tag}, but jvm/kafka/pom.xml pins Kafka {want}"


def test_airflow_image_is_the_pinned_airflow_on_the_locks_python(services):
    want = pinned("apache-airflow")
    m = re.search(r"--python-version\s+(\d+\.\d+)", (REPO / "requirements.txt").read_text()[:2000])
    python = m.group(1) if m else None
    from_lines = [ln.split()[1] for ln in DOCKERFILE.read_text().splitlines() if ln.strip().upper().startswith("FROM ")]
    assert len(from_lines) == 2, from_lines  # the wheel's build stage, then the image
    for image in from_lines:
        repo, tag = split_image(image)
        assert repo == "apache/airflow"
        assert tag.split("-python")[0] == want, f"Dockerfile FROM apache/airflow:{tag}, requirements.txt pins {want}"
        if python:
            assert tag.endswith(f"-python{python}"), f"requirements.txt is compiled for Python {python}; image {tag}"
    text = DOCKERFILE.read_text()
    # issue 34 item 4: the runtime lock (no test tools), then the wheel alone
    assert re.search(r"pip install\b.*-r\s+\S*requirements-runtime\.txt", text), (
        "the Dockerfile must install requirements-runtime.txt"
    )
    assert re.search(r"COPY\b.*\brequirements-runtime\.txt\b", text)
    assert re.search(r"pip wheel\b.*--no-deps", text) and re.search(
        r"pip install\b.*--no-deps\s+\S*mm2_failover-\S*\.whl", text
    ), "the Dockerfile must build and install the wheel"
    assert re.search(r"\bjre\b|openjdk|temurin", text, re.I), "the Dockerfile must install a JRE for spark-submit"
    for name in AIRFLOW_SERVICES:
        svc = services[name]
        assert split_image(svc["image"])[1] == want, f"{name}: image {svc['image']} should be tagged {want}"
        build = svc.get("build")
        assert isinstance(build, dict), f"{name} should build compose/airflow/Dockerfile"
        ctx = (REPO / build.get("context", ".")).resolve()
        assert (ctx / build.get("dockerfile", "Dockerfile")).resolve() == DOCKERFILE.resolve()
        for f in ("requirements-runtime.txt", "pyproject.toml", "plugins/mm2_failover/__init__.py"):
            assert (ctx / f).is_file(), f"the build context must contain {f}"
        assert svc.get("command") == {
            "airflow-apiserver": "api-server",
            "airflow-scheduler": "scheduler",
            "airflow-dag-processor": "dag-processor",
        }.get(name, svc.get("command"))
        env = env_of(svc)
        assert env.get("AIRFLOW__CORE__EXECUTOR") == "LocalExecutor", name
        assert env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "").startswith("postgresql"), name
        # the same preload as the local deployment's (tests/unit/test_preload.py checks what it does)
        assert {k: env.get(k) for k in config.preload_settings()} == config.preload_settings(), name
    ignore = DOCKERFILE.with_name("Dockerfile.dockerignore")
    if ignore.exists():
        sent = ignore.read_text().split()
        for f in ("!requirements-runtime.txt", "!pyproject.toml", "!README.md", "!plugins/mm2_failover"):
            assert f in sent, f"the build context would lack {f[1:]}"
    assert "8080" in [p[1] for p in published_ports(services["airflow-apiserver"])]


def test_spark_images_are_the_pinned_pyspark(services):
    want = pinned("pyspark")
    for name, cls in (
        ("spark-master", "org.apache.spark.deploy.master.Master"),
        ("spark-worker", "org.apache.spark.deploy.worker.Worker"),
    ):
        repo, tag = split_image(services[name]["image"])
        assert repo in ("apache/spark", "spark"), f"{name}: {repo}"
        assert tag.split("-")[0] == want, f"{name}: {repo}:{tag}, but requirements.txt pins pyspark {want}"
        cmd = services[name]["command"]
        cmd = " ".join(cmd) if isinstance(cmd, list) else cmd
        assert "spark-class" in cmd and cls in cmd, f"{name} should run spark-class {cls}"


def test_connections_are_the_projects_ids_in_the_local_beds_format(services):
    for name in AIRFLOW_SERVICES:
        env = env_of(services[name])
        conns = {k[len("AIRFLOW_CONN_") :].lower(): v for k, v in env.items() if k.startswith("AIRFLOW_CONN_")}
        assert set(conns) == {
            config.SOURCE_CONN_ID,
            config.TARGET_CONN_ID,
            config.SPARK_CONN_ID,
            config.SPARK_CONNECT_CONN_ID,
        }, name
        for conn_id, alias in CONNECTIONS.items():
            bootstrap = json.loads(conns[conn_id])["extra"]["bootstrap.servers"]
            assert json.loads(conns[conn_id]) == json.loads(localenv.kafka_conn(bootstrap)), conn_id
            host, _, port = bootstrap.rpartition(":")
            kafka = CLUSTERS[alias]
            assert host == kafka, f"{conn_id} should name the {kafka} service, names {host}"
            kenv = env_of(services[kafka])
            assert int(port) in listener_ports(kenv, "PLAINTEXT"), f"{conn_id}: {kafka} does not listen on {port}"
            assert advertised(kenv, "PLAINTEXT") == bootstrap, f"{kafka} advertises another address than {bootstrap}"
        spark = json.loads(conns[config.SPARK_CONN_ID])
        master_cmd = services["spark-master"]["command"]
        master_port = int(master_cmd[master_cmd.index("--port") + 1]) if "--port" in master_cmd else 7077
        assert spark == json.loads(localenv.spark_conn(f"spark://spark-master:{master_port}")), spark
        worker_cmd = services["spark-worker"]["command"]
        worker_cmd = " ".join(worker_cmd) if isinstance(worker_cmd, list) else worker_cmd
        assert f"spark://spark-master:{master_port}" in worker_cmd, "the worker must register with the master"
        json.loads(env.get("MM2_FAILOVER_SPARK_CONF", "{}"))  # valid JSON, as config.spark_conf() reads it


def test_the_warm_spark_connect_server_is_where_its_connection_points_and_sees_what_the_job_writes(services):
    """spark-connect: Spark's Connect server on the standalone master, with the Kafka source jars, bound where the
    spark_connect_default connection points; its driver commits the executors' Parquet, so it mounts the artifacts
    at Airflow's path; spark-connect-warm-up runs the job's warm-up against that URL once it answers."""
    svc = services["spark-connect"]
    repo, tag = split_image(svc["image"])
    assert repo in ("apache/spark", "spark") and tag.split("-")[0] == pinned("pyspark"), svc["image"]
    cmd = " ".join(svc["command"]) if isinstance(svc["command"], list) else svc["command"]
    assert "--class org.apache.spark.sql.connect.service.SparkConnectServer" in cmd
    master_cmd = services["spark-master"]["command"]
    assert f"--master spark://spark-master:{master_cmd[master_cmd.index('--port') + 1]}" in cmd
    port = int(re.search(r"spark\.connect\.grpc\.binding\.port=(\d+)", cmd).group(1))
    assert "spark.connect.grpc.binding.address=0.0.0.0" in cmd  # reachable from the Airflow containers
    sched_env = env_of(services["airflow-scheduler"])
    conn = json.loads(sched_env["AIRFLOW_CONN_" + config.SPARK_CONNECT_CONN_ID.upper()])
    assert conn == {"conn_type": "spark_connect", "host": "spark-connect", "port": port}, conn
    ms = {m["target"]: m for m in mounts(svc)}
    sched = {m["target"]: m for m in mounts(services["airflow-scheduler"])}
    art, jars = sched_env["MM2_FAILOVER_ARTIFACTS"], sched_env["MM2_FAILOVER_SPARK_JARS"]
    assert ms[art]["source"] == sched[art]["source"], "spark-connect must see the artifacts at Airflow's path"
    jar_dir = [t for t in ms if jars.startswith(t)]
    assert jar_dir and ms[jar_dir[0]]["source"] == sched[jar_dir[0]]["source"] and f"{jars}/*.jar" in cmd
    assert f"{sched_env['MM2_FAILOVER_S3A_JARS']}/*.jar" in cmd  # and S3A's: sessions of s3:// run folders
    assert depends_of(svc) == {"spark-worker": "service_healthy", "fetch-spark-jars": "service_completed_successfully"}
    warm = services["spark-connect-warm-up"]
    wcmd = " ".join(warm["command"]) if isinstance(warm["command"], list) else warm["command"]
    assert f"-m mm2_failover.jobs.warm_up sc://spark-connect:{port}" in wcmd and f"--folder {art}/" in wcmd
    assert depends_of(warm) == {"spark-connect": "service_healthy"}
    assert (config.PLUGINS_DIR / "mm2_failover" / "jobs" / "warm_up.py").exists()


def test_artifacts_and_jars_are_where_the_pipeline_and_spark_look(services):
    for name in AIRFLOW_SERVICES:
        svc = services[name]
        env, ms = env_of(svc), {m["target"]: m for m in mounts(svc)}
        # the job ships inside the package, which the image installs as a wheel: mounting dags/ is all it needs
        assert "/opt/airflow/plugins" not in ms and "PYTHONPATH" not in env, name
        assert ms["/opt/airflow/dags"]["source"] == "./dags"
        assert config.SPARK_JOB.is_relative_to(config.PLUGINS_DIR)
        assert "/opt/airflow/spark_jobs" not in ms
        art = env.get("MM2_FAILOVER_ARTIFACTS")
        assert art in ms and ms[art]["type"] == "volume", f"{name}: MM2_FAILOVER_ARTIFACTS must be a mounted volume"
        jars = env.get("MM2_FAILOVER_SPARK_JARS", "")
        jar_mounts = [m for t, m in ms.items() if jars == t or jars.startswith(t.rstrip("/") + "/")]
        assert jar_mounts and jar_mounts[0]["type"] == "volume", f"{name}: MM2_FAILOVER_SPARK_JARS is not in a volume"
    # the executors on the worker write the job's Parquet where the tasks read it
    sched = {m["target"]: m for m in mounts(services["airflow-scheduler"])}
    worker = {m["target"]: m for m in mounts(services["spark-worker"])}
    art = env_of(services["airflow-scheduler"])["MM2_FAILOVER_ARTIFACTS"]
    assert art in worker and worker[art]["source"] == sched[art]["source"], (
        "spark-worker must mount the artifacts volume at the same path as Airflow"
    )
    # the jars volume is filled by fetch-spark-jars from the project's pom
    jars_src = [
        m for t, m in sched.items() if env_of(services["airflow-scheduler"])["MM2_FAILOVER_SPARK_JARS"].startswith(t)
    ][0]
    fetch = services["fetch-spark-jars"]
    assert jars_src["source"] in {m["source"] for m in mounts(fetch)}
    assert "jvm/spark-kafka/pom.xml" in " ".join(
        fetch["command"] if isinstance(fetch["command"], list) else [fetch["command"]]
    )


def test_mm2_runs_dedicated_mode_with_the_beds_properties(services):
    mm2 = services["mm2"]
    cmd = mm2["command"]
    cmd = cmd if isinstance(cmd, list) else cmd.split()
    assert cmd == ["/opt/kafka/bin/connect-mirror-maker.sh", MM2_PROPERTIES_MOUNT, "--clusters", "backup"]
    m = [m for m in mounts(mm2) if m["target"] == MM2_PROPERTIES_MOUNT]
    assert m and m[0]["type"] == "bind", f"mm2 must mount its properties at {MM2_PROPERTIES_MOUNT}"
    path = (REPO / m[0]["source"]).resolve()
    assert path.is_file(), f"{m[0]['source']} does not exist"
    props = read_properties(path)
    assert [a.strip() for a in props["clusters"].split(",")] == ["primary", "backup"]
    assert RunParams().source_alias == "primary"
    assert props["sync.group.offsets.enabled"] == "false"
    assert props["primary->backup.enabled"] == "true"
    # exactly the bed's settings, with the compose services as bootstrap servers
    bed = types.SimpleNamespace(
        source_alias="primary",
        target_alias="backup",
        mm2_overrides={},
        tls=None,
        source_bootstrap=props.get("primary.bootstrap.servers"),
        target_bootstrap=props.get("backup.bootstrap.servers"),
    )
    assert props == Bed.mm2_properties(bed)
    for alias, svc in CLUSTERS.items():
        assert props[f"{alias}.bootstrap.servers"] == advertised(env_of(services[svc]), "PLAINTEXT")
    assert "primary.checkpoints.internal" in " ".join(mm2["healthcheck"]["test"])


def test_brokers_have_the_beds_settings_in_kraft_combined_mode(services):
    want = Broker("x", Path("/nonexistent"), Path("/nonexistent")).properties()
    addressing = {
        "controller.quorum.bootstrap.servers",
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "log.dirs",
        # the bed's second listener (SASL_PLAINTEXT, SCRAM) exists for the tests of credentials
        "sasl.enabled.mechanisms",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config",
        # the bed's CPU on a 2-core test machine, not a setting of the deployment (Kafka's default there)
        "metadata.max.idle.interval.ms",
    }
    cluster_ids = set()
    for _alias, name in CLUSTERS.items():
        env = env_of(services[name])
        props = kafka_env_to_properties(env)
        for k, v in want.items():
            if k not in addressing:
                assert props.get(k) == v, f"{name}: {k}={props.get(k)!r}, the bed has {v!r}"
        assert props["process.roles"] == "broker,controller"
        assert props["controller.quorum.voters"] == f"1@{name}:{min(listener_ports(env, 'CONTROLLER'))}"
        assert env.get("CLUSTER_ID"), f"{name} needs a CLUSTER_ID to format its storage"
        cluster_ids.add(env["CLUSTER_ID"])
        assert listener_ports(env, "PLAINTEXT") == {9092}
    assert len(cluster_ids) == 2, "the two clusters must have distinct cluster ids"


def test_every_host_path_mounted_exists_and_named_volumes_are_declared(compose, services):
    declared = set(compose.get("volumes") or {})
    for name, svc in services.items():
        for m in mounts(svc):
            if m["type"] == "bind":
                src = m["source"]
                assert src.startswith("./"), f"{name}: mount {src} should be relative to the repository"
                assert (REPO / src).exists(), f"{name}: host path {src} does not exist in the repository"
            elif m["type"] == "volume" and m["source"]:
                assert m["source"] in declared, f"{name}: volume {m['source']} is not declared"


def test_published_ports_are_unique(services):
    taken: list[tuple[str, str, str, str]] = []
    for name, svc in services.items():
        for ip, port, proto in published_ports(svc):
            for other, oip, oport, oproto in taken:
                clash = port == oport and proto == oproto and (ip == oip or "0.0.0.0" in (ip, oip))
                assert not clash, f"host port {port}/{proto} is published by both {other} and {name}"
            taken.append((name, ip, port, proto))
    assert taken, "nothing is published"


def test_the_multi_worker_profile_shares_no_disk_and_keeps_artifacts_in_the_object_store(services):
    """Issue 34 item 5: with compose/multi-worker.env the Airflow components run the CeleryExecutor on Redis, the
    artifacts are in S3Proxy's bucket, the writers' lock is the lease in Kafka (a file lock is refused there), and
    the two workers mount no volume in common but the code's (dags, jars, the components' secrets)."""
    variables = env_file(MULTI_WORKER_ENV)
    assert variables["COMPOSE_PROFILES"] == "multi-worker"
    for name in ("redis", "s3proxy", "fetch-s3proxy", *WORKERS):
        assert services[name].get("profiles") == ["multi-worker"], name
    for name in (*AIRFLOW_SERVICES, *WORKERS):
        env = env_of(services[name], variables)
        assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor", name
        assert env["AIRFLOW__CELERY__BROKER_URL"] == "redis://redis:6379/0", name
        assert env["MM2_FAILOVER_ARTIFACTS"].startswith("s3://mm2-failover/"), name
        assert config.WriterLockSettings.from_env(env).kind == "kafka"
        assert env["AWS_ENDPOINT_URL"] == "http://s3proxy:8081", name
        default = env_of(services[name])  # without the env file: the single-host shape
        assert default["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor" and default["MM2_FAILOVER_LOCK"] == "file"
    s3 = " ".join(services["s3proxy"]["command"])
    assert "s3proxy.identity=mm2-failover" in s3 and "s3proxy.credential=mm2-failover-drill" in s3
    assert "jclouds.filesystem.basedir=/data" in s3 and "mkdir -p /data/mm2-failover" in s3
    assert "s3proxy.endpoint=http://0.0.0.0:8081" in s3
    assert "jvm/s3proxy/pom.xml" in " ".join(services["fetch-s3proxy"]["command"])
    a, b = ({m["target"]: m["source"] for m in mounts(services[w])} for w in WORKERS)
    shared = {t for t in a if t in b and a[t] == b[t]}
    assert shared == {"/opt/airflow/dags", "/opt/airflow/secrets", "/opt/airflow/jars"}, shared
    assert "/opt/airflow/artifacts" not in a and "/opt/airflow/logs" not in a
    queues = [services[w]["command"].split("--queues", 1)[1].split()[0].split(",") for w in WORKERS]
    assert queues == [["default", "worker-a"], ["default", "worker-b"]]
    fetch = " ".join(services["fetch-spark-jars"]["command"])
    assert "-f /jvm/s3a/pom.xml" in fetch and "/jars/s3a" in fetch  # S3A's jars, beside the Kafka source's
    for w in WORKERS:
        env = env_of(services[w], variables)
        assert json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])["host"].startswith("local")
        # the job's answers written into the bucket by Spark (S3A), its jars where the job looks for them
        assert config.spark_io(env) == "s3a" and env["MM2_FAILOVER_S3A_JARS"] == "/opt/airflow/jars/s3a"
        deps = depends_of(services[w])
        assert deps["redis"] == "service_healthy" and deps["s3proxy"] == "service_healthy"
