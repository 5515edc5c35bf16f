"""The gate's rules (plugins/mm2_failover/stages/gate.py), by number: which groups are described after the listing,
and which described ones are live."""

from __future__ import annotations

import pytest

from mm2_failover.adapters.kafka.groups import GroupState, Member
from mm2_failover.stages import gate


class Listed:
    """A cluster whose listing and descriptions are given; records what was described."""

    def __init__(self, listed: dict[str, str], described: dict[str, GroupState]):
        self.listed, self.described, self.asked = listed, described, []

    def group_states(self):
        return dict(self.listed)

    def describe_groups(self, groups):
        self.asked.append(sorted(groups))
        return {g: self.described.get(g, GroupState(g, "UNKNOWN")) for g in groups}


LIVE = GroupState("live", "STABLE", [Member("m-1", "app", "/10.0.0.7")])


# -- rule 1: live = members, or a state other than empty, dead or unknown


def test_rule1_a_described_group_with_members_or_mid_rebalance_is_live():
    rebalancing = GroupState("reb", "PREPARING_REBALANCE")
    c = Listed({"live": "STABLE", "reb": "PREPARING_REBALANCE", "quiet": "EMPTY"}, {"live": LIVE, "reb": rebalancing})
    assert gate.live_groups(c, ["live", "reb", "quiet"]) == [LIVE, rebalancing]


# -- rule 2: the listing proves EMPTY and DEAD only; anything else is described


def test_rule2_groups_listed_empty_or_dead_are_not_described():
    c = Listed({"a": "EMPTY", "b": "DEAD", "live": "STABLE"}, {"live": LIVE})
    assert gate.live_groups(c, ["a", "b", "live"]) == [LIVE]
    assert c.asked == [["live"]]


def test_rule2_a_group_missing_from_the_listing_is_described_never_assumed_empty():
    """A principal without Describe on a group does not see it listed: its absence is not evidence."""
    c = Listed({}, {"hidden": LIVE})
    assert gate.live_groups(c, ["hidden"]) == [LIVE]
    assert c.asked == [["hidden"]]


def test_rule2_a_state_the_broker_did_not_name_is_described():
    assert gate.unproven(
        ["u", "s", "c", "e"], {"u": "UNKNOWN", "s": "STABLE", "c": "COMPLETING_REBALANCING", "e": "EMPTY"}
    ) == ["u", "s", "c"]


def test_rule2_no_groups_reads_nothing():
    c = Listed({"a": "STABLE"}, {"a": LIVE})
    assert gate.live_groups(c, []) == [] and c.asked == []


# -- the reads: describe_groups asks at most DESCRIBE_WINDOW groups per request


def test_describe_groups_never_asks_more_than_a_window_of_groups_at_once(monkeypatch):
    """librdkafka (2.16) aborts the whole process (``rd_kafka_enq_once_del_source_return: Assertion `eonce->refcnt >
    0' failed``, librdkafka#4605) after a DescribeConsumerGroups of 10k groups timed out: measured on the bed
    (docs/performance.md, "The gate at 10k groups"). Windows of 1000 never timed out there, 12 rounds of 10k groups."""
    from concurrent.futures import Future

    from confluent_kafka.admin import ConsumerGroupDescription

    from mm2_failover.adapters.kafka import cluster, java_bridge

    class Admin:
        def __init__(self):
            self.calls = []

        def describe_consumer_groups(self, groups, request_timeout=None):
            self.calls.append(len(groups))
            out = {}
            for g in groups:
                f = Future()
                f.set_result(ConsumerGroupDescription(g, False, [], "range", librdkafka_state("EMPTY"), None))
                out[g] = f
            return out

    def librdkafka_state(name):
        from confluent_kafka import ConsumerGroupState

        return ConsumerGroupState[name]

    c = cluster.Cluster({"bootstrap.servers": "fake:9092"}, "target")
    c._admin = Admin()
    groups = [f"g{i:05d}" for i in range(2 * cluster.DESCRIBE_WINDOW + 5)]
    monkeypatch.setattr(java_bridge, "JAVA_BULK_GROUPS", len(groups))  # librdkafka's path (the Java one: below)
    states = c.describe_groups(groups)
    assert sorted(states) == groups and all(s.is_safe_to_move for s in states.values())
    assert c._admin.calls == [cluster.DESCRIBE_WINDOW, cluster.DESCRIBE_WINDOW, 5]


def test_describe_groups_of_more_than_java_bulk_groups_go_to_the_java_client(monkeypatch):
    """Above JAVA_BULK_GROUPS groups, one JVM describes them all (librdkafka sends a request per group: 2.6-4.4 s for
    10k groups on the bed, the Java client ~1 s); at or below, librdkafka, with no JVM to start."""
    from mm2_failover.adapters.kafka import java_bridge
    from mm2_failover.adapters.kafka.cluster import Cluster

    asked = []
    monkeypatch.setattr(
        java_bridge,
        "describe_with_java",
        lambda c, gs: asked.append(gs) or {g: GroupState(g, "EMPTY") for g in gs},
    )
    monkeypatch.setattr(Cluster, "_describe_window", lambda self, gs: {g: GroupState(g, "DEAD") for g in gs})
    c = Cluster({"bootstrap.servers": "fake:9092"}, "target")
    n = java_bridge.JAVA_BULK_GROUPS
    assert {s.state for s in c.describe_groups([f"g{i}" for i in range(n)]).values()} == {"DEAD"} and not asked
    got = c.describe_groups([f"g{i}" for i in range(n + 1)] + ["g0"])
    assert asked == [sorted({f"g{i}" for i in range(n + 1)})] and {s.state for s in got.values()} == {"EMPTY"}


def test_describe_with_java_reads_members_states_and_names_a_group_it_could_not_describe(monkeypatch):
    from mm2_failover.adapters.kafka import java_bridge
    from mm2_failover.adapters.kafka.cluster import Cluster
    from mm2_failover.adapters.kafka.kafka_errors import KafkaAuthError, KafkaUnavailable

    lines = [
        ["ROW", "a", "m1", "c1", "/h1"],
        ["ROW", "a", "m2", "c2", "/h2"],
        ["OK", "a", "STABLE"],
        ["OK", "b", "UNKNOWN"],
        ["OK", "c", "NOT_A_CONSUMER_GROUP"],
    ]
    monkeypatch.setattr(java_bridge, "run_java_offsets", lambda c, mode, rows, n: list(lines))
    c = Cluster({"bootstrap.servers": "fake:9092"}, "target")
    got = java_bridge.describe_with_java(c, ["a", "b", "c"])
    assert got["a"] == GroupState("a", "STABLE", [Member("m1", "c1", "/h1"), Member("m2", "c2", "/h2")])
    assert got["b"].is_safe_to_move and not got["c"].is_safe_to_move and not got["a"].is_safe_to_move
    lines[3] = ["ERR", "b", "GroupAuthorizationException: Not authorized to access group: b"]
    with pytest.raises(KafkaAuthError) as e:
        java_bridge.describe_with_java(c, ["a", "b", "c"])
    assert "describe group b" in str(e.value)
    lines[3] = ["OK", "b", "EMPTY"]
    with pytest.raises(KafkaUnavailable, match="did not describe d"):
        java_bridge.describe_with_java(c, ["a", "b", "c", "d"])
