"""Topic names under MM2's replication policies, and group selection (mm2_failover.rules.naming)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mm2_failover.rules import naming as nm
from mm2_failover.rules.naming import ReplicationPolicy

topic_names = st.text(st.sampled_from("abcXYZ019._-"), min_size=1, max_size=40)


# ----------------------------------------------------------------------------------- default policy


def test_default_policy():
    p = ReplicationPolicy("primary")
    assert (p.kind, p.separator) == ("default", ".")
    assert p.replica_topic("orders") == "primary.orders"
    assert p.source_topic("primary.orders") == "orders"
    assert p.source_topic("primary.a.b") == "a.b"
    assert p.source_topic("other.orders") is None
    assert p.source_topic("primaryXorders") is None
    assert p.source_topic("orders") is None
    assert p.checkpoints_topic == "primary.checkpoints.internal"


def test_default_policy_with_a_custom_separator():
    p = ReplicationPolicy("dc1", separator="_")
    assert p.replica_topic("orders") == "dc1_orders"
    assert p.replica_topic("my.orders") == "dc1_my.orders"
    assert p.source_topic("dc1_orders") == "orders"
    assert p.source_topic("dc1.orders") is None
    assert p.source_topic("dc2_orders") is None
    # KIP-690: the separator is used for the internal topics too ...
    assert p.checkpoints_topic == "dc1_checkpoints_internal"
    # ... unless replication.policy.internal.topic.separator.enabled=false
    assert (
        ReplicationPolicy("dc1", separator="_", internal_topic_separator_enabled=False).checkpoints_topic
        == "dc1.checkpoints.internal"
    )
    assert ReplicationPolicy("dc1", separator="--").replica_topic("x") == "dc1--x"


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from("abc.-_"), min_size=1, max_size=10), st.sampled_from([".", "_", "-", "::"]), topic_names)
def test_source_topic_inverts_replica_topic(alias, sep, topic):
    p = ReplicationPolicy(alias, separator=sep)
    assert p.source_topic(p.replica_topic(topic)) == topic
    i = ReplicationPolicy(alias, kind="identity", separator=sep)
    assert i.source_topic(i.replica_topic(topic)) == topic == i.replica_topic(topic)


def test_identity_policy():
    p = ReplicationPolicy("primary", kind="identity")
    assert p.replica_topic("orders") == "orders"
    assert p.source_topic("orders") == "orders"
    assert p.source_topic("primary.orders") == "primary.orders"
    assert p.checkpoints_topic == "primary.checkpoints.internal"  # inherited from the default policy


def test_failing_back_topics_return_home_and_the_rest_is_replicated_as_usual():
    """backup -> primary with home_alias=primary: MM2's renameTopicPartition rule (primary.orders -> orders)."""
    p = ReplicationPolicy("backup", home_alias="primary")
    assert p.replica_topic("primary.orders") == "orders" and p.source_topic("orders") == "primary.orders"
    assert p.replica_topic("orders") == "backup.orders" and p.source_topic("backup.orders") == "orders"
    assert p.replica_topic("primary.a.b") == "a.b"  # one hop: the topic it was copied from
    assert p.is_home_topic("orders") and not p.is_home_topic("backup.orders")
    assert not p.is_home_topic("heartbeats") and not p.is_home_topic("backup.checkpoints.internal")
    assert p.replica_topics(
        ["orders", "backup.orders", "heartbeats", "__consumer_offsets", "mm2-offset-syncs.backup.internal"]
    ) == ["backup.orders", "orders"]
    assert not ReplicationPolicy("backup").is_home_topic("orders")  # a failover: no home topics


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"source_alias": "primary", "kind": "prefix"}, "unknown replication policy 'prefix'"),
        ({"source_alias": ""}, "source alias must not be empty"),
        (
            {"source_alias": "backup", "kind": "identity", "home_alias": "primary"},
            "needs the default replication policy",
        ),
        ({"source_alias": "backup", "home_alias": "backup"}, "must name the target's alias"),
    ],
)
def test_invalid_policies(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ReplicationPolicy(**kwargs)


# ----------------------------------------------------------------------------------- checkpoints topic


@pytest.mark.parametrize(
    "alias, sep, name",
    [
        ("primary", ".", "primary.checkpoints.internal"),
        ("dc1", "_", "dc1_checkpoints_internal"),
        ("a.b", ".", "a.b.checkpoints.internal"),
        ("dc_1", "_", "dc_1_checkpoints_internal"),
        ("dc", "--", "dc--checkpoints--internal"),
    ],
)
def test_checkpoints_topic_name_and_the_alias_it_names(alias, sep, name):
    assert nm.checkpoints_topic(alias, sep) == name
    assert ReplicationPolicy(alias, separator=sep).checkpoints_topic == name
    assert nm.checkpoint_topic_aliases([name]) == {name: alias}


def test_checkpoints_topic_default_separator():
    assert nm.checkpoints_topic("primary") == "primary.checkpoints.internal"


@pytest.mark.parametrize(
    "topic",
    [
        "orders",
        "primary.orders",
        "checkpoints.internal",
        "primary.checkpoints_internal",
        "primary.checkpoints.internal.x",
        "primary.heartbeats",
    ],
)
def test_not_a_checkpoints_topic(topic):
    assert nm.checkpoint_topic_aliases([topic]) == {}


def test_mm2_topic_names():
    p = ReplicationPolicy("primary")
    assert p.offset_syncs_topic("backup") == "mm2-offset-syncs.backup.internal"
    assert p.mm2_offsets_topic == "mm2-offsets.primary.internal"
    q = ReplicationPolicy("dc1", separator="_")
    assert q.offset_syncs_topic("backup") == "mm2-offset-syncs_backup_internal"
    assert q.mm2_offsets_topic == "mm2-offsets.dc1.internal"  # the Connect worker's name: always dots


# ----------------------------------------------------------------------------------- internal topics (MM2 4.3's rules)


@pytest.mark.parametrize(
    "topic",
    [
        "__consumer_offsets",
        "__transaction_state",
        ".hidden",
        "mm2-offset-syncs.backup.internal",
        "mm2-configs.backup.internal",
        "mm2-offsets.primary.internal",
        "primary.checkpoints.internal",
        "other.checkpoints.internal",
        "heartbeats",
        "primary.heartbeats",
        "dc0.primary.heartbeats",
    ],
)
def test_internal_topics(topic):
    assert ReplicationPolicy("primary").is_internal_topic(topic)


@pytest.mark.parametrize(
    "topic",
    [
        "orders",
        "primary.orders",
        "dc1_orders",
        "internal",
        "my-heartbeats-topic",
        "replica",
        "a_internal",
        "mm2orders",
        "connect-offsets",
        "something.internal",
        "x.replica",
        "user-heartbeats",
        "primary.user-heartbeats",
    ],
)
def test_user_topics(topic):
    assert not ReplicationPolicy("primary").is_internal_topic(topic)


def test_internal_topics_under_a_custom_separator():
    p = ReplicationPolicy("dc1", separator="_")
    assert p.is_internal_topic(p.replica_topic("heartbeats"))
    assert p.is_internal_topic("dc1_checkpoints_internal") and p.is_internal_topic("mm2-offset-syncs_b_internal")
    assert not p.is_internal_topic("dc1_orders")


def test_identity_policy_names_heartbeat_like_topics_like_the_default_policy():
    # IdentityReplicationPolicy.looksLikeHeartbeat: a topic ending with "heartbeats" is prefixed
    p = ReplicationPolicy("primary", kind="identity")
    assert p.replica_topic("user-heartbeats") == "primary.user-heartbeats"
    assert p.source_topic("primary.user-heartbeats") == "user-heartbeats"
    assert not p.is_internal_topic("primary.user-heartbeats")
    assert p.is_internal_topic("primary.heartbeats")


def test_replica_topics_of_an_alias():
    p = ReplicationPolicy("primary")
    assert p.replica_topics(
        [
            "primary.orders",
            "primary.heartbeats",
            "primary.checkpoints.internal",
            "orders",
            "dc2.orders",
            "__consumer_offsets",
            "primary.user-heartbeats",
        ]
    ) == ["primary.orders", "primary.user-heartbeats"]
