"""Issue 18, secured clusters: both clusters run Kafka's StandardAuthorizer with nothing allowed without an ACL; the
pipeline reaches both over SASL_SSL - SCRAM-SHA-512 over TLS, the brokers' certificate signed by the bed's own CA,
verified by librdkafka and by Spark's Java Kafka source - as a principal that holds exactly the ACLs of
``mm2_failover.rules.acls`` (docs/reference.md, 'Least-privilege ACLs'). With them the failover DAG succeeds end to end -
librdkafka and Spark's Java Kafka source alike; with one taken away, the task that needs it fails and its error
names the missing permission and the resource; a CA that did not sign the broker's certificate is a TLS error naming
the cluster, never disaster mode. (MM2 replicates over SASL_SSL as its own user, a super user; the bed's own clients
use the PLAINTEXT listener, whose ANONYMOUS principal is one too: MM2's ACLs are not the pipeline's.)"""

from __future__ import annotations

import json

import pytest

from mm2_failover.adapters.config import run_dir
from mm2_failover.rules import acls
from mm2_failover.rules.naming import ReplicationPolicy
from testbed import localenv, scenario

pytestmark = [pytest.mark.bed, pytest.mark.spark, pytest.mark.airflow]

TOPIC = "acl-orders"
GROUPS = ["acl-app", "acl-second", "acl-third"]
LOCK_TOPIC = "mm2-failover.locks"  # the lease's (rows 10-14): the main run takes it


@pytest.fixture(scope="module")
def secured(bed, run_root):
    """A bed of its own with ACLs; the three groups consumed part of the topic and are checkpointed; the pipeline's
    principal granted exactly the table's ACLs for this topic and these groups."""
    from testbed.bed import Bed

    b = Bed(run_dir=run_root / "bed-acls", acls=True, tls=True)
    with b:
        target = b.client("target")
        prep = scenario.prepare(
            b.source_bootstrap,
            b.target_bootstrap,
            group=GROUPS[0],
            topic=TOPIC,
            partitions=2,
            produced=60,
            consumed_upto={0: 40, 1: 25},
        )
        for g in GROUPS[1:]:
            scenario.consume_and_commit(b.source_bootstrap, g, TOPIC, {0: 30, 1: 10})
        scenario.wait_checkpointed_groups(target, b.checkpoints_topic, {g: (prep.replica_topic, 2) for g in GROUPS[1:]})
        granted = acls.bindings(
            ReplicationPolicy(b.source_alias), b.target_alias, [TOPIC], GROUPS, lock_topic=LOCK_TOPIC
        )
        b.grant(granted)
        yield b, prep, target, granted


@pytest.fixture
def as_pipeline(secured, monkeypatch, spark_submit_route):
    """The DAG's connections: both clusters through their SASL_SSL listener, as the pipeline's principal; the job
    through spark-submit (Spark's Kafka source in a JVM of the run's own, with the principal's credentials)."""
    from testbed.bed import scram_conf

    b = secured[0]
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_SOURCE",
        json.dumps({"conn_type": "kafka", "extra": scram_conf(b.source.ssl_bootstrap, ca=b.tls.ca)}),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_TARGET",
        json.dumps({"conn_type": "kafka", "extra": scram_conf(b.target.ssl_bootstrap, ca=b.tls.ca)}),
    )
    return secured


def run(group: str):
    return localenv.run_dag(
        "mm2_failover", {"groups_regex": group, "drain_quiet_seconds": 1, "drain_timeout_seconds": 60}
    )


def test_with_exactly_the_documented_acls_the_dag_fails_over_end_to_end(as_pipeline, monkeypatch):
    """With exactly rows 1-13: the run's writer lock is the lease in the target (issue 34), whose topic it creates."""
    b, prep, target, _granted = as_pipeline
    g = GROUPS[0]
    monkeypatch.setenv("MM2_FAILOVER_LOCK", "kafka")
    mm2 = (b.run_dir / "mm2" / "mm2.properties").read_text()  # MM2 replicates over TLS with credentials of its own
    assert "primary.security.protocol=SASL_SSL" in mm2 and "backup.security.protocol=SASL_SSL" in mm2
    assert 'username="mm2"' in mm2 and 'username="failover"' not in mm2
    dr = run(g)
    assert dr.state == "success", localenv.task_states("mm2_failover", dr.run_id)
    report = json.loads((run_dir("mm2_failover", dr.run_id) / "report.json").read_text())
    assert report["outcome"] == "succeeded" and report["totals"]["committed"] == 2
    committed = target.committed(g)
    assert set(committed) == {(prep.replica_topic, 0), (prep.replica_topic, 1)}
    for (_t, p), o in committed.items():
        assert o <= prep.consumed_upto[p]  # never past what the group consumed: nothing lost
    assert LOCK_TOPIC in target.admin.list_topics(timeout=15).topics  # created by the run, as the principal


@pytest.mark.parametrize(
    "missing, task",
    [
        # the Spark job's Java consumer reads the checkpoints topic: Describe kept (the capture's end offsets), Read gone
        (4, "compute_latest_checkpoints"),
        # committing the group's offsets on the target (Describe kept for the live check and the backup)
        (8, "apply_group_offsets"),
    ],
)
def test_one_acl_missing_fails_the_task_that_needs_it_naming_the_permission_and_the_resource(
    as_pipeline, capfd, missing, task
):
    b, _prep, target, granted = as_pipeline
    g = GROUPS[1] if missing == 4 else GROUPS[2]
    need = next(x for x in granted if x.rule == missing and (x.resource != "Group" or x.name == g))
    describe = acls.Binding(need.cluster, need.resource, need.name, "Describe")
    b.revoke([need])
    b.grant([describe])
    try:
        capfd.readouterr()
        dr = run(g)
        out = capfd.readouterr()
    finally:
        b.revoke([describe])
        b.grant([need])
    states = localenv.task_states("mm2_failover", dr.run_id)
    assert dr.state == "failed" and states[task] == "failed", states
    text = out.out + out.err
    assert f"needs {acls.phrase(need.operation, need.resource, need.name)}" in text, text[-4000:]
    assert "Least-privilege ACLs" in text
    assert target.committed(g) == {}  # nothing written


def test_without_the_transactional_id_acl_the_leases_writer_is_refused_naming_it(secured):
    """Row 14: the lease's holder commits through the target's transactional id (mm2_failover.adapters.fenced). Without Write
    on it, taking the id fails before anything is written, naming the permission."""
    from mm2_failover.adapters.config import WriterLockSettings
    from mm2_failover.adapters.fenced import FencedWriter
    from mm2_failover.adapters.kafka.cluster import Cluster
    from mm2_failover.adapters.kafka.kafka_errors import KafkaAuthError
    from testbed.bed import scram_conf

    b, _prep, _target, granted = secured
    row = [x for x in granted if x.rule == 14]
    assert len(row) == 1 and row[0].resource == "TransactionalId" and row[0].prefixed, row
    target = Cluster(scram_conf(b.target.ssl_bootstrap, ca=b.tls.ca), "target")
    tid = WriterLockSettings(topic=LOCK_TOPIC).transactional_id(target.cluster_id())
    FencedWriter(target, tid, 30000).close()  # granted: taken
    b.revoke(row)
    try:
        with pytest.raises(KafkaAuthError) as e:
            FencedWriter(target, tid, 30000)
    finally:
        b.grant(row)
    assert f"needs {acls.phrase('Write', 'TransactionalId', tid)}" in str(e.value), e.value
    assert "row 14" in str(e.value)


def test_a_source_certificate_signed_by_another_ca_is_a_tls_error_never_disaster_mode(
    as_pipeline, monkeypatch, capfd, tmp_path
):
    from testbed.bed import scram_conf
    from testbed.tls import make

    b, _prep, target, _granted = as_pipeline
    other = make(tmp_path / "other-ca", cn="not the bed's CA")
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_SOURCE",
        json.dumps({"conn_type": "kafka", "extra": scram_conf(b.source.ssl_bootstrap, ca=other.ca)}),
    )
    capfd.readouterr()
    dr = run(GROUPS[2])
    out = capfd.readouterr()
    text = out.out + out.err
    states = localenv.task_states("mm2_failover", dr.run_id)
    assert dr.state == "failed" and states["verify_producers_drained"] == "failed", states
    assert "TLS with" in text and b.source.ssl_bootstrap in text and "ssl." in text, text[-4000:]
    assert "DISASTER MODE" not in text
    assert target.committed(GROUPS[2]) == {}


@pytest.mark.parametrize("kind", ["mtls", "oauthbearer"])
def test_mtls_and_oauthbearer_connections_reach_the_cluster_through_both_clients(secured, kind):
    """Issue 52 item 3: one connection's librdkafka settings - mTLS with a client certificate whose key is in the
    traditional EC form librdkafka reads and Java's PEM store does not; OAUTHBEARER with an unsecured JWT, checked by
    Kafka's own validator - reach the cluster through confluent-kafka and, as mm2_failover.adapters.java_client maps
    them, through Kafka's Java client: commits written with metadata by the Java helper read back by both clients."""
    from mm2_failover.adapters.kafka.cluster import Cluster
    from mm2_failover.adapters.kafka.java_bridge import commit_with_java, read_with_java
    from mm2_failover.rules.values import Commit
    from testbed.bed import mtls_conf, oauth_conf

    b, prep, _target, _granted = secured
    cluster = Cluster(mtls_conf(b.target) if kind == "mtls" else oauth_conf(b.target), f"target over {kind}")
    group = f"auth-{kind}"
    tp = (prep.replica_topic, 0)
    assert commit_with_java(cluster, {group: {tp: Commit(7, f"written over {kind}")}}) == {group: None}
    assert read_with_java(cluster, [group]) == {group: {tp: Commit(7, f"written over {kind}")}}
    assert cluster.committed(group) == {tp: 7}  # librdkafka over the same listener
