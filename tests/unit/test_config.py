"""config.java_client_options: a connection's librdkafka settings -> the Java client's, for Spark's Kafka source."""

from __future__ import annotations

import json

import pytest

from mm2_failover.adapters.config import java_client_options

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
        "ssl.key.location": "/k.pem",
        "ssl.certificate.location": "/c.pem",
        "ssl.key.password": "kp",
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
