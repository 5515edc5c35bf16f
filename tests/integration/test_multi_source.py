"""Replication policies and several source aliases, with checkpoints written by real MM2 flows: a second MM2
under alias `dc2` with the identity policy, and one under alias `dc3` with the default policy and separator `_`."""

from __future__ import annotations

import json

import pytest

from mm2_failover.adapters.config import run_dir
from testbed import scenario

pytestmark = [pytest.mark.bed, pytest.mark.spark, pytest.mark.airflow]


@pytest.fixture(scope="module")
def extra_flows(bed):
    mark = bed.mark()
    bed.start_extra_mm2(
        "dc2", "ident-.*", {"replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"}
    )
    bed.start_extra_mm2("dc3", "sep-.*", {"replication.policy.separator": "_"})  # -> dc3_checkpoints_internal
    bed.start_extra_mm2(
        "legacy",
        "legacy-.*",
        {"replication.policy.separator": "_", "replication.policy.internal.topic.separator.enabled": "false"},
    )
    yield bed
    bed.stop_extras(mark)  # the session's bed as this module found it


def test_identity_policy_names_the_replica_topic_by_its_source_name(extra_flows, target, names, monkeypatch):
    """The topology set once for the deployment (issue 52 item 1: ``[mm2_failover]``, here in its environment form)
    - alias dc2, the identity policy - is what the scheduled archive and readiness DAGs and the failover run with: no
    DAG file edited, nothing of it in the run's conf but the groups."""
    from mm2_failover.adapters.runfolder import RunFolder
    from mm2_failover.stages.archive import last_scheduled
    from testbed import localenv

    bed = extra_flows
    topic, g = "ident-" + names["topic"], names["group"]
    prep = scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        source_alias="dc2",
        group=g,
        topic=topic,
        partitions=2,
        produced=50,
        consumed_upto={0: 50, 1: 50},
        replica=topic,
    )
    monkeypatch.setenv("AIRFLOW__MM2_FAILOVER__SOURCE_ALIAS", "dc2")
    monkeypatch.setenv("AIRFLOW__MM2_FAILOVER__REPLICATION_POLICY", "identity")
    before = last_scheduled().get("dc2")
    assert localenv.run_dag("mm2_sync_archive").state == "success"
    assert last_scheduled().get("dc2") not in (None, before)  # the scheduled archive ran for alias dc2
    rd = localenv.run_dag("mm2_failover_readiness", {"groups_regex": g, "drain_quiet_seconds": 1})
    assert rd.state == "success", localenv.task_states("mm2_failover_readiness", rd.run_id)
    r = RunFolder(run_dir("mm2_failover_readiness", rd.run_id)).load_readiness()
    assert [(x["group"], x["partitions"]) for x in r.groups] == [(g, 2)]  # on dc2's identity-named replica
    assert {(p["topic"], p["partition"]) for p in r.partitions} == {(topic, 0), (topic, 1)}
    assert r.archive["dc2"]["updated_at"] is not None  # readiness read the archive the scheduled DAG kept for dc2
    dr = localenv.run_dag("mm2_failover", {"groups_regex": g, "drain_quiet_seconds": 1, "drain_timeout_seconds": 60})
    assert dr.state == "success"
    assert json.loads((run_dir("mm2_failover", dr.run_id) / "run.json").read_text())["params"]["source_alias"] == "dc2"
    # identity: the group is moved on the topic of the same name on the target
    assert target.committed(g) == {(topic, 0): 50, (topic, 1): 50}
    assert prep.replica_topic == topic


def test_one_run_over_two_source_aliases_says_where_each_row_came_from(extra_flows, target, names):
    import pyarrow.parquet as pq

    from testbed import localenv

    bed = extra_flows
    topic, g = "sep-" + names["topic"], names["group"]
    # the same source topic is replicated by two flows: primary.<topic> (separator '.') and dc3_<topic> ('_')
    scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        source_alias="dc3",
        group=g,
        topic=topic,
        partitions=1,
        produced=40,
        consumed_upto={0: 40},
        separator="_",
    )
    scenario.wait_checkpointed(target, bed.checkpoints_topic, g, f"primary.{topic}", 1)
    # both flows read the same source cluster: dc3's source connection is kafka_source too
    dr = localenv.run_dag(
        "mm2_failover",
        {
            "source_alias": "primary,dc3",
            "alias_policies": {"dc3": {"separator": "_"}},
            "source_connections": {"dc3": "kafka_source"},
            "groups_regex": g,
            "drain_quiet_seconds": 1,
            "drain_timeout_seconds": 60,
        },
    )
    assert dr.state == "success"
    rows = [
        r
        for r in pq.read_table(str(run_dir("mm2_failover", dr.run_id) / "latest_checkpoints.parquet")).to_pylist()
        if r["group"] == g
    ]
    assert sorted((r["source_alias"], r["topic"]) for r in rows) == [
        ("dc3", f"dc3_{topic}"),
        ("primary", f"primary.{topic}"),
    ]
    assert target.committed(g) == {(f"dc3_{topic}", 0): 40, (f"primary.{topic}", 0): 40}


@pytest.fixture(scope="module")
def east(bed):
    """A second source cluster of its own (alias east) replicated to the same target by its own MM2 flow."""
    mark = bed.mark()
    yield bed.add_source_cluster("east")
    bed.stop_extras(mark)


def test_every_source_alias_is_checked_on_its_own_cluster(
    extra_flows, east, target, names, monkeypatch, capfd, live_consumer
):
    """Issue 14 item 16: a group live on the second source cluster must not be moved as if it had been checked."""
    from testbed import localenv

    bed = extra_flows
    g, topic = names["group"], names["topic"]
    scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        group=g,
        topic=topic,
        partitions=1,
        produced=20,
        consumed_upto={0: 20},
    )
    scenario.prepare(
        east.bootstrap,
        bed.target_bootstrap,
        source_alias="east",
        group=g,
        topic=topic + "-e",
        partitions=1,
        produced=20,
        consumed_upto={0: 20},
    )
    lc = live_consumer(east.bootstrap, g, topic + "-e", client_id="still-on-east")
    lc.wait_stable(steps_cluster(east.bootstrap), g)
    conf = {
        "source_alias": "primary,east",
        "groups_regex": g,
        "drain_quiet_seconds": 1,
        "drain_timeout_seconds": 60,
        "groups_empty_timeout_seconds": 10,
    }
    dr = localenv.run_dag("mm2_failover", conf)  # no connection for east: refused, not silently unchecked
    assert dr.state == "failed"
    assert "east" in capfd.readouterr().out
    assert target.committed(g) == {}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SOURCE_EAST", localenv.kafka_conn(east.bootstrap))
    dr = localenv.run_dag("mm2_failover", {**conf, "source_connections": {"east": "kafka_source_east"}})
    assert dr.state == "failed"
    assert localenv.task_states("mm2_failover", dr.run_id)["check_groups_empty"] == "failed"
    out = capfd.readouterr().out
    assert "on source east" in out and "still-on-east" in out
    assert target.committed(g) == {}
    lc.stop()
    dr = localenv.run_dag("mm2_failover", {**conf, "source_connections": {"east": "kafka_source_east"}})
    assert dr.state == "success"
    report = json.loads((run_dir("mm2_failover", dr.run_id) / "report.json").read_text())
    [row] = [x for x in report["groups"] if x["group"] == g]
    assert row["source_aliases"] == ["east", "primary"]
    assert set(target.committed(g)) == {(f"primary.{topic}", 0), (f"east.{topic}-e", 0)}


def steps_cluster(bootstrap):
    from mm2_failover.adapters.kafka.cluster import Cluster

    return Cluster({"bootstrap.servers": bootstrap}, "east")


def test_internal_topic_separator_disabled(extra_flows, target, names):
    """Issue 14 item 17: MM2 with separator '_' and replication.policy.internal.topic.separator.enabled=false
    names its checkpoints legacy.checkpoints.internal and its replicas legacy_<topic>."""
    from testbed import localenv

    bed = extra_flows
    topic, g = "legacy-" + names["topic"], names["group"]
    scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        source_alias="legacy",
        group=g,
        topic=topic,
        partitions=1,
        produced=30,
        consumed_upto={0: 30},
        replica=f"legacy_{topic}",
    )
    dr = localenv.run_dag(
        "mm2_failover",
        {
            "source_alias": "legacy",
            "replication_policy_separator": "_",
            "internal_topic_separator_enabled": False,
            "groups_regex": g,
            "drain_quiet_seconds": 1,
            "drain_timeout_seconds": 60,
        },
    )
    assert dr.state == "success"
    assert target.committed(g) == {(f"legacy_{topic}", 0): 30}
