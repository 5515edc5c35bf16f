"""Replication policies and several source aliases, with checkpoints written by real MM2 flows: a second MM2
under alias `dc2` with the identity policy, and one under alias `dc3` with the default policy and separator `_`."""

from __future__ import annotations

import pytest

from mm2_failover import scenario
from mm2_failover.config import run_dir

pytestmark = [pytest.mark.bed, pytest.mark.spark, pytest.mark.airflow]


@pytest.fixture(scope="module")
def extra_flows(bed):
    bed.start_extra_mm2("dc2", "ident-.*", {
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"})
    bed.start_extra_mm2("dc3", "sep-.*", {"replication.policy.separator": "_"})  # -> dc3_checkpoints_internal
    return bed


def test_identity_policy_names_the_replica_topic_by_its_source_name(extra_flows, target, names):
    from mm2_failover import localenv

    bed = extra_flows
    topic, g = "ident-" + names["topic"], names["group"]
    prep = scenario.prepare(bed.source_bootstrap, bed.target_bootstrap, source_alias="dc2", group=g, topic=topic,
                            partitions=2, produced=50, consumed_upto={0: 50, 1: 50}, replica=topic)
    dr = localenv.run_dag("mm2_failover", {"source_alias": "dc2", "replication_policy": "identity",
                                           "groups_regex": g, "drain_quiet_seconds": 1, "drain_timeout_seconds": 60})
    assert dr.state == "success"
    # identity: the group is moved on the topic of the same name on the target
    assert target.committed(g) == {(topic, 0): 50, (topic, 1): 50}
    assert prep.replica_topic == topic


def test_one_run_over_two_source_aliases_says_where_each_row_came_from(extra_flows, target, names):
    import pyarrow.parquet as pq

    from mm2_failover import localenv

    bed = extra_flows
    topic, g = "sep-" + names["topic"], names["group"]
    # the same source topic is replicated by two flows: primary.<topic> (separator '.') and dc3_<topic> ('_')
    scenario.prepare(bed.source_bootstrap, bed.target_bootstrap, source_alias="dc3", group=g, topic=topic,
                     partitions=1, produced=40, consumed_upto={0: 40}, separator="_")
    scenario.wait_checkpointed(target, bed.checkpoints_topic, g, f"primary.{topic}", 1)
    dr = localenv.run_dag("mm2_failover", {"source_alias": "primary,dc3", "alias_policies": {"dc3": {"separator": "_"}},
                                           "groups_regex": g, "drain_quiet_seconds": 1, "drain_timeout_seconds": 60})
    assert dr.state == "success"
    rows = pq.read_table(str(run_dir("mm2_failover", dr.run_id) / "latest_checkpoints.parquet")).to_pylist()
    assert sorted((r["source_alias"], r["topic"]) for r in rows) == [("dc3", f"dc3_{topic}"), ("primary", f"primary.{topic}")]
    assert target.committed(g) == {(f"dc3_{topic}", 0): 40, (f"primary.{topic}", 0): 40}
