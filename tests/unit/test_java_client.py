"""java_client.java_client_options: a connection's librdkafka settings -> the Java client's, for Spark's Kafka source
and the Java helper (the module's rules 1-8)."""

from __future__ import annotations

import json

import pytest

from mm2_failover.adapters.java_client import java_client_options, java_system_properties

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
JAVA_KEYS = {
    "bootstrap.servers",
    "security.protocol",
    "sasl.mechanism",
    "sasl.jaas.config",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.endpoint.identification.algorithm",
    "sasl.kerberos.service.name",
    "client.id",
}


@pytest.fixture(autouse=True)
def no_override(monkeypatch):
    monkeypatch.delenv("MM2_FAILOVER_SPARK_KAFKA_OPTIONS", raising=False)


def java_unquote(jaas: str, option: str) -> str:
    """The value of ``option="..."`` as Kafka's JaasConfig reads it (java.io.StreamTokenizer quoted strings:
    backslash escapes \\\\ \\" \\t \\n ..., any other escaped character stands for itself)."""
    start = jaas.index(f'{option}="') + len(option) + 2
    out, i = [], start
    escapes = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
    while i < len(jaas):
        c = jaas[i]
        if c == '"':
            return "".join(out)
        if c == "\\":
            i += 1
            out.append(escapes.get(jaas[i], jaas[i]))
        else:
            out.append(c)
        i += 1
    raise ValueError(f"unterminated quoted string in {jaas!r}")


def test_plaintext():
    assert java_client_options({"bootstrap.servers": "h1:9092,h2:9092"}) == {"bootstrap.servers": "h1:9092,h2:9092"}


def test_sasl_plain():
    out = java_client_options(
        {
            "bootstrap.servers": "b:9093",
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "s3cret",
        }
    )
    assert out == {
        "bootstrap.servers": "b:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN} required username="alice" password="s3cret";',
    }


def test_sasl_plain_is_the_default_mechanism():
    out = java_client_options({"sasl.username": "alice", "sasl.password": "pw"})
    assert out["sasl.jaas.config"] == f'{PLAIN} required username="alice" password="pw";'
    assert "sasl.mechanism" not in out  # the Java client's default is GSSAPI: the connection should say PLAIN


@pytest.mark.parametrize("key", ["sasl.mechanisms", "sasl.mechanism"])
@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512", "scram-sha-512"])
def test_sasl_scram(key, mech):
    out = java_client_options(
        {"security.protocol": "SASL_PLAINTEXT", key: mech, "sasl.username": "bob", "sasl.password": "pw"}
    )
    assert out["sasl.mechanism"] == mech
    assert out["sasl.jaas.config"] == f'{SCRAM} required username="bob" password="pw";'
    assert out["security.protocol"] == "SASL_PLAINTEXT"


def test_java_style_mechanism_wins_over_librdkafka_style():
    out = java_client_options({"sasl.mechanism": "SCRAM-SHA-256", "sasl.mechanisms": "PLAIN", "sasl.username": "u"})
    assert out["sasl.mechanism"] == "SCRAM-SHA-256" and out["sasl.jaas.config"].startswith(SCRAM)


def test_missing_password_is_empty():
    assert (
        java_client_options({"sasl.username": "u"})["sasl.jaas.config"] == f'{PLAIN} required username="u" password="";'
    )


@pytest.mark.parametrize("password", ['with"quote', '"', "pl@in:;=,{}'", "\u00e9\u20ac\U0001f642"])
def test_jaas_values_read_back_as_given(password):
    jaas = java_client_options({"sasl.username": f"us{password}er", "sasl.password": password})["sasl.jaas.config"]
    assert java_unquote(jaas, "password") == password
    assert java_unquote(jaas, "username") == f"us{password}er"
    assert jaas.endswith('";')


@pytest.mark.parametrize("password", ["back\\slash", "ends\\", "tab\\tx", 'a\\"b'])
def test_jaas_values_with_backslashes_read_back_as_given(password):
    jaas = java_client_options({"sasl.username": "u", "sasl.password": password})["sasl.jaas.config"]
    assert java_unquote(jaas, "password") == password


def test_pem_ca():
    out = java_client_options({"security.protocol": "SSL", "ssl.ca.location": "/etc/kafka/ca.pem"})
    assert out == {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/kafka/ca.pem",
    }


def test_same_named_settings_pass_through_as_strings():
    out = java_client_options(
        {"ssl.endpoint.identification.algorithm": "https", "sasl.kerberos.service.name": "kafka", "client.id": 42}
    )
    assert out == {
        "ssl.endpoint.identification.algorithm": "https",
        "sasl.kerberos.service.name": "kafka",
        "client.id": "42",
    }


def test_endpoint_identification_none_is_translated():
    assert java_client_options({"ssl.endpoint.identification.algorithm": "none"}) == {
        "ssl.endpoint.identification.algorithm": ""
    }


def test_no_unrelated_librdkafka_keys_leak():
    conf = {
        "bootstrap.servers": "b:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "u",
        "sasl.password": "p",
        "ssl.ca.location": "/ca.pem",
        # librdkafka-only or meaningless for Spark's source: must not be passed on
        "enable.ssl.certificate.verification": "false",
        "debug": "all",
        "socket.keepalive.enable": "true",
        "statistics.interval.ms": "1000",
        "group.id": "g",
        "enable.auto.commit": "false",
        "api.version.request": "true",
        "log_level": 7,
        "client.rack": "r1",
        "topic.metadata.refresh.interval.ms": "1000",
        "sasl.oauthbearer.config": "x",
    }
    out = java_client_options(conf)
    assert set(out) == {
        "bootstrap.servers",
        "security.protocol",
        "sasl.mechanism",
        "sasl.jaas.config",
        "ssl.truststore.type",
        "ssl.truststore.location",
    }
    assert set(out) <= JAVA_KEYS
    assert all(isinstance(v, str) for v in out.values())
    assert "sasl.username" not in out and "sasl.password" not in out and "sasl.mechanisms" not in out
    assert conf["sasl.username"] == "u"  # the input is not modified


def test_env_override_is_merged_over(monkeypatch):
    conf = {"bootstrap.servers": "b:9093", "sasl.username": "u", "sasl.password": "p", "ssl.ca.location": "/ca.pem"}
    monkeypatch.setenv(
        "MM2_FAILOVER_SPARK_KAFKA_OPTIONS",
        json.dumps(
            {
                "ssl.truststore.location": "/other.pem",
                "kafka.request.timeout.ms": 60000,
                "sasl.login.callback.handler.class": "com.example.Handler",
            }
        ),
    )
    out = java_client_options(conf)
    assert out["ssl.truststore.location"] == "/other.pem"  # overridden
    assert out["kafka.request.timeout.ms"] == "60000"  # added, as a string
    assert out["sasl.login.callback.handler.class"] == "com.example.Handler"
    assert out["ssl.truststore.type"] == "PEM" and out["bootstrap.servers"] == "b:9093"  # the rest stays
    assert out["sasl.jaas.config"] == f'{PLAIN} required username="u" password="p";'


def test_empty_env_override_changes_nothing(monkeypatch):
    monkeypatch.setenv("MM2_FAILOVER_SPARK_KAFKA_OPTIONS", "")
    assert java_client_options({"bootstrap.servers": "b:1"}) == {"bootstrap.servers": "b:1"}


def test_the_java_helpers_timeout_is_bounded_by_windows_of_groups_not_by_groups():
    """Issue 31 item 13: the process timeout was 60 s + the cluster timeout per group - 17 days at 100k groups; now
    one timeout per window of 1,000 groups (the helper's own deadline) plus a minute."""
    from mm2_failover.adapters.kafka.java_bridge import java_call_timeout

    assert java_call_timeout(15.0, 1) == 60 + 15 * 2
    assert java_call_timeout(15.0, 1000) == 60 + 15 * 2 and java_call_timeout(15.0, 1001) == 60 + 15 * 3
    assert java_call_timeout(15.0, 100_000) == 60 + 15 * 101 < 30 * 60


def test_credentials_go_to_one_private_folder_whose_owner_and_mode_are_checked(tmp_path, monkeypatch):
    """Issue 32: the Java client's settings file (passwords included) went to <tmp>/mm2-failover-<uid> created with
    mkdir(exist_ok=True) and no check: a folder another user made first, or one left world-readable, was used as it
    was. Both writers (the Spark job's options file and the Java client's) use the one checked helper now."""
    import os
    import tempfile

    import pytest

    from mm2_failover.adapters.kafka import java_bridge
    from mm2_failover.adapters.kafka.cluster import Cluster

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    d = tmp_path / f"mm2-failover-{os.getuid()}"
    d.mkdir(mode=0o755)
    os.chmod(d, 0o755)  # world-readable: refused before any secret is written into it
    cluster = Cluster({"bootstrap.servers": "127.0.0.1:1", "sasl.password": "s3cret"}, "target", 1.0)
    with pytest.raises(PermissionError, match="mode 0700"):
        java_bridge.run_java_offsets(cluster, "read", [], 0)
    assert list(d.iterdir()) == []


@pytest.mark.parametrize(
    "name,value",
    [
        ("translation", "exactt"),
        ("source_reachable", "maybe"),
        ("replication_policy", "Identity "),
        ("checkpoint_policy", "newest"),
        ("on_existing_target_offsets", "replace"),
        ("offset_syncs_location", "both"),
        ("apply_concurrency", 0),
        ("drain_timeout_seconds", -1),
        ("rpo_seconds", 0),
    ],
)
def test_a_value_outside_a_parameters_allowed_values_is_refused_whatever_the_entry_point(name, value):
    """Issue 32: allowed values were checked by the trigger form and the CLI's argparse only; a value that bypassed
    them (a REST trigger's conf, an operator's templated argument) silently meant something else - translation
    'exactt' ran as 'checkpoint'."""
    from mm2_failover.rules.run_params import RunParams

    with pytest.raises(ValueError, match=f"parameter {name}: "):
        RunParams.from_mapping({name: value})
    with pytest.raises(ValueError, match=f"parameter {name}: "):
        RunParams(**{name: value})


def test_the_writer_lock_is_the_file_lock_unless_the_environment_says_kafka_and_bad_values_are_named():
    """Issue 34 item 2: MM2_FAILOVER_LOCK chooses where the one-writer lock lives (config.WriterLockSettings)."""
    from mm2_failover.adapters.config import WriterLockSettings as W

    assert W.from_env({}) == W("file", "mm2-failover.locks", 60.0, 20.0, 10.0)
    got = W.from_env(
        {
            "MM2_FAILOVER_LOCK": "Kafka",
            "MM2_FAILOVER_LOCK_TOPIC": "ops.locks",
            "MM2_FAILOVER_LOCK_LEASE_SECONDS": "30",
            "MM2_FAILOVER_LOCK_MARGIN_SECONDS": "12",
            "MM2_FAILOVER_LOCK_RENEW_SECONDS": "5",
        }
    )
    assert got == W("kafka", "ops.locks", 30.0, 12.0, 5.0)
    with pytest.raises(ValueError, match="MM2_FAILOVER_LOCK='zookeeper': use one of file, kafka"):
        W.from_env({"MM2_FAILOVER_LOCK": "zookeeper"})
    with pytest.raises(ValueError, match="MM2_FAILOVER_LOCK_LEASE_SECONDS='a minute' is not a number of seconds"):
        W.from_env({"MM2_FAILOVER_LOCK_LEASE_SECONDS": "a minute"})


# -- rule 4: mTLS -------------------------------------------------------------------------------------------------


def _client_cert(tmp_path, key_format: str, password: bytes | None = None):
    """A self-signed client certificate and its key in ``key_format`` (PKCS8 or TraditionalOpenSSL), as files."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "client")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    enc = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    fmt = getattr(serialization.PrivateFormat, key_format)
    (tmp_path / "c.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "k.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, fmt, enc))
    return key


@pytest.mark.parametrize(
    "key_format,password",
    [("PKCS8", None), ("TraditionalOpenSSL", None), ("TraditionalOpenSSL", b"kp-1"), ("PKCS8", b"kp-2")],
)
def test_rule4_a_client_certificate_is_a_pem_keystore_with_a_pkcs8_key_whatever_form_librdkafka_read(
    tmp_path, key_format, password
):
    from cryptography.hazmat.primitives import serialization

    key = _client_cert(tmp_path, key_format, password)
    conf = {
        "security.protocol": "SSL",
        "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": str(tmp_path / "c.pem"),
        "ssl.key.location": str(tmp_path / "k.pem"),
        **({"ssl.key.password": password.decode()} if password else {}),
    }
    out = java_client_options(conf)
    assert out["ssl.keystore.type"] == "PEM" and out["ssl.truststore.location"] == "/ca.pem"
    assert out["ssl.keystore.certificate.chain"] == (tmp_path / "c.pem").read_text()
    pem = out["ssl.keystore.key"]
    assert pem.startswith("-----BEGIN PRIVATE KEY-----")  # unencrypted PKCS#8: what the Java client's PEM store reads
    again = serialization.load_pem_private_key(pem.encode(), None)
    assert again.private_numbers() == key.private_numbers()
    assert "ssl.key.password" not in out and "ssl.key.location" not in out


def test_rule4_inline_pem_and_pkcs12_and_half_a_certificate(tmp_path):
    _client_cert(tmp_path, "PKCS8")
    inline = {"ssl.certificate.pem": (tmp_path / "c.pem").read_text(), "ssl.key.pem": (tmp_path / "k.pem").read_text()}
    assert java_client_options(inline)["ssl.keystore.key"] == inline["ssl.key.pem"]
    p12 = java_client_options({"ssl.keystore.location": "/ks.p12", "ssl.keystore.password": "pw"})
    assert p12 == {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/ks.p12", "ssl.keystore.password": "pw"}
    with pytest.raises(ValueError, match="ssl.key.location"):
        java_client_options({"ssl.certificate.location": str(tmp_path / "c.pem")})
    with pytest.raises(ValueError, match=r"ssl.key.location /nowhere/k.pem: cannot be read"):
        java_client_options({"ssl.certificate.location": str(tmp_path / "c.pem"), "ssl.key.location": "/nowhere/k.pem"})


# -- rules 5 and 6: OAUTHBEARER -----------------------------------------------------------------------------------


def test_rule5_oidc_client_credentials_use_kafkas_login_handler_and_allow_the_token_endpoint():
    conf = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "failover",
        "sasl.oauthbearer.client.secret": 'se"cret',
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,identityPoolId=pool-2",
    }
    out = java_client_options(conf)
    assert out["sasl.mechanism"] == "OAUTHBEARER"
    assert out["sasl.login.callback.handler.class"].endswith("oauthbearer.OAuthBearerLoginCallbackHandler")
    assert out["sasl.oauthbearer.token.endpoint.url"] == "https://idp.example/token"
    line = out["sasl.jaas.config"]
    assert line.startswith("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required")
    assert java_unquote(line, "clientId") == "failover" and java_unquote(line, "clientSecret") == 'se"cret'
    assert java_unquote(line, "scope") == "kafka"
    assert java_unquote(line, "extension_logicalCluster") == "lkc-1"
    assert java_unquote(line, "extension_identityPoolId") == "pool-2"
    assert java_system_properties(conf) == {
        "org.apache.kafka.sasl.oauthbearer.allowed.urls": "https://idp.example/token"
    }
    with pytest.raises(ValueError, match="sasl.oauthbearer.client.secret"):
        java_client_options({k: v for k, v in conf.items() if k != "sasl.oauthbearer.client.secret"})


def test_rule6_an_unsecured_jwt_is_kafkas_unsecured_login():
    conf = {
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": "true",
        "sasl.oauthbearer.config": "principal=failover-oauth scope=read,write lifeSeconds=600 extension_traceId=t1",
    }
    line = java_client_options(conf)["sasl.jaas.config"]
    assert java_unquote(line, "unsecuredLoginStringClaim_sub") == "failover-oauth"
    assert java_unquote(line, "unsecuredLoginListClaim_scope") == ",read,write"
    assert java_unquote(line, "unsecuredLoginLifetimeSeconds") == "600"
    assert java_unquote(line, "unsecuredLoginExtension_traceId") == "t1"
    assert java_system_properties(conf) == {}


def test_oauthbearer_no_rule_maps_is_refused_naming_what_to_set_unless_the_override_gives_it(monkeypatch):
    conf = {"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.config": "principal=x"}
    with pytest.raises(ValueError, match="sasl.oauthbearer.method=oidc") as e:
        java_client_options(conf)
    assert "MM2_FAILOVER_SPARK_KAFKA_OPTIONS" in str(e.value)
    monkeypatch.setenv("MM2_FAILOVER_SPARK_KAFKA_OPTIONS", json.dumps({"sasl.jaas.config": "x required;"}))
    assert java_client_options(conf)["sasl.jaas.config"] == "x required;"


# -- rule 7: GSSAPI -----------------------------------------------------------------------------------------------


def test_rule7_kerberos_with_a_keytab_or_the_ticket_cache():
    conf = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "sasl.kerberos.principal": "failover@EXAMPLE.COM",
        "sasl.kerberos.keytab": "/etc/security/failover.keytab",
    }
    out = java_client_options(conf)
    assert out["sasl.kerberos.service.name"] == "kafka" and out["sasl.mechanism"] == "GSSAPI"
    line = out["sasl.jaas.config"]
    assert line.startswith("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true")
    assert java_unquote(line, "keyTab") == "/etc/security/failover.keytab"
    assert java_unquote(line, "principal") == "failover@EXAMPLE.COM"
    no_keytab = java_client_options({k: v for k, v in conf.items() if k != "sasl.kerberos.keytab"})
    assert "useTicketCache=true" in no_keytab["sasl.jaas.config"] and "keyTab" not in no_keytab["sasl.jaas.config"]


def test_the_jvm_properties_reach_the_jobs_driver_and_executors_after_the_deployments(monkeypatch, tmp_path):
    from mm2_failover.adapters.spark import submission_of

    monkeypatch.setenv("MM2_FAILOVER_SPARK_CONF", json.dumps({"spark.driver.extraJavaOptions": "-Xss4m"}))
    sub = submission_of([], tmp_path / "o.json", {"org.apache.kafka.sasl.oauthbearer.allowed.urls": "https://i/t"})
    assert (
        sub.conf["spark.driver.extraJavaOptions"]
        == "-Xss4m -Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=https://i/t"
    )
    assert sub.conf["spark.executor.extraJavaOptions"] == "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=https://i/t"


# -- found by a review (each failed before its fix) ----------------------------------------------------------------


def test_gssapi_without_a_service_name_gets_librdkafkas_default_kafka():
    out = java_client_options(
        {"sasl.mechanisms": "GSSAPI", "sasl.kerberos.keytab": "/k.keytab", "sasl.kerberos.principal": "p@R"}
    )
    assert out["sasl.kerberos.service.name"] == "kafka"  # librdkafka's default; the Java client has none


def test_the_ca_in_every_form_librdkafka_reads(tmp_path):
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    assert java_client_options({"ssl.ca.pem": pem}) == {
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": pem,
    }
    assert "ssl.truststore.location" not in java_client_options({"ssl.ca.location": "probe"})  # the JVM's own CAs
    with pytest.raises(ValueError, match="ssl.ca.location .* is a folder"):
        java_client_options({"ssl.ca.location": str(tmp_path)})


def test_a_password_given_for_an_unencrypted_key_is_ignored_as_openssl_does(tmp_path):
    _client_cert(tmp_path, "PKCS8")
    out = java_client_options(
        {
            "ssl.certificate.location": str(tmp_path / "c.pem"),
            "ssl.key.location": str(tmp_path / "k.pem"),
            "ssl.key.password": "pw",
        }
    )
    assert out["ssl.keystore.key"].startswith("-----BEGIN PRIVATE KEY-----")


def test_the_unsecured_jwt_config_is_split_on_whitespace_as_librdkafka_does():
    line = java_client_options(
        {
            "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": "principal=o'brien",
        }
    )["sasl.jaas.config"]
    assert java_unquote(line, "unsecuredLoginStringClaim_sub") == "o'brien"


def test_the_java_helpers_classpath_needs_no_pyspark_and_spark_gets_none_of_its_own_jars(monkeypatch, tmp_path):
    """A review found the helper's slf4j and Jackson taken from PySpark's jars only: with the wheel's spark-connect
    extra (no PySpark jars) Kafka's Java client could not load. They now come from the Kafka source's jar folder."""
    import importlib.util

    from mm2_failover.adapters.config import java_kafka_classpath, spark_jars

    names = ["kafka-clients-3.9.2.jar", "jose4j-0.9.6.jar", "slf4j-api-1.7.36.jar", "jackson-databind-2.21.2.jar"]
    for n in [*names, "jackson-core-2.21.2.jar", "spark-sql-kafka-0-10_2.13-4.2.0.jar", "commons-pool2-2.13.1.jar"]:
        (tmp_path / n).write_bytes(b"")
    monkeypatch.setenv("AIRFLOW__MM2_FAILOVER__SPARK_JARS", str(tmp_path))
    monkeypatch.delenv("MM2_FAILOVER_SPARK_JARS", raising=False)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "pyspark" else real(n, *a))
    helper = {p.rsplit("/", 1)[1] for p in java_kafka_classpath().split(":")}
    assert set(names) <= helper and "spark-sql-kafka-0-10_2.13-4.2.0.jar" not in helper
    assert {p.rsplit("/", 1)[1] for p in spark_jars(s3a=False)} == {
        "kafka-clients-3.9.2.jar",
        "jose4j-0.9.6.jar",
        "spark-sql-kafka-0-10_2.13-4.2.0.jar",
        "commons-pool2-2.13.1.jar",
    }  # Spark has its own slf4j and Jackson
