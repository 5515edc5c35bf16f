"""Topic names under MM2's replication policies, and group selection (mm2_failover.naming)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mm2_failover import naming as nm
from mm2_failover.naming import ReplicationPolicy

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
    assert ReplicationPolicy("dc1", separator="_", internal_topic_separator_enabled=False).checkpoints_topic == \
        "dc1.checkpoints.internal"
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


@pytest.mark.parametrize("kwargs, message", [
    ({"source_alias": "primary", "kind": "prefix"}, "unknown replication policy 'prefix'"),
    ({"source_alias": ""}, "source alias must not be empty"),
])
def test_invalid_policies(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ReplicationPolicy(**kwargs)


# ----------------------------------------------------------------------------------- checkpoints topic


@pytest.mark.parametrize("alias, sep, name", [
    ("primary", ".", "primary.checkpoints.internal"),
    ("dc1", "_", "dc1_checkpoints_internal"),
    ("a.b", ".", "a.b.checkpoints.internal"),
    ("dc_1", "_", "dc_1_checkpoints_internal"),
])
def test_checkpoints_topic_name_and_its_inverse(alias, sep, name):
    assert nm.checkpoints_topic(alias, sep) == name
    assert nm.source_alias_of_checkpoints_topic(name) == alias


def test_checkpoints_topic_default_separator():
    assert nm.checkpoints_topic("primary") == "primary.checkpoints.internal"


@pytest.mark.parametrize("topic", ["orders", "primary.orders", "checkpoints.internal", "primary.checkpoints_internal",
                                   "primary.checkpoints.internal.x", "primary.heartbeats"])
def test_not_a_checkpoints_topic(topic):
    assert nm.source_alias_of_checkpoints_topic(topic) is None


# ----------------------------------------------------------------------------------- internal topics


@pytest.mark.parametrize("topic", [
    "__consumer_offsets", "__transaction_state", "mm2-offset-syncs.backup.internal", "mm2-configs.backup.internal",
    "primary.checkpoints.internal", "dc1_checkpoints_internal", "heartbeats", "primary.heartbeats",
    "connect-offsets", "something.internal", "x.replica",
])
def test_internal_topics(topic):
    assert nm.is_internal_topic(topic)


@pytest.mark.parametrize("topic", ["orders", "primary.orders", "dc1_orders", "internal", "my-heartbeats-topic",
                                   "replica", "a_internal", "mm2orders"])
def test_user_topics(topic):
    assert not nm.is_internal_topic(topic)


# ----------------------------------------------------------------------------------- regexes and groups


def test_compile_regex():
    assert nm.compile_regex("orders-.*", "groups_regex").fullmatch("orders-app")
    with pytest.raises(ValueError) as e:
        nm.compile_regex("orders-(", "groups_regex")
    msg = str(e.value)
    assert msg.startswith("groups_regex 'orders-(' is not a valid regular expression: ")
    assert "missing )" in msg
    assert e.value.__cause__ is None and e.value.__suppress_context__


def test_group_selected_uses_full_match():
    inc = re.compile("orders")
    assert nm.group_selected("orders", inc, None)
    assert not nm.group_selected("orders-app", inc, None)  # not a prefix match
    assert not nm.group_selected("my-orders", inc, None)  # not a search
    assert nm.group_selected("anything", re.compile(".*"), None)
    assert nm.group_selected("", re.compile(".*"), None)
    assert nm.group_selected("a", re.compile("a|b"), None) and nm.group_selected("b", re.compile("a|b"), None)
    assert not nm.group_selected("ab", re.compile("a|b"), None)


def test_group_selected_with_exclude():
    inc = re.compile(".*")
    exc = re.compile("test")
    assert not nm.group_selected("test", inc, exc)
    assert nm.group_selected("test-1", inc, exc)  # exclude is a full match too
    assert nm.group_selected("my-test", inc, exc)
    exc = re.compile("test-.*|tmp")
    assert not nm.group_selected("test-1", inc, exc)
    assert not nm.group_selected("tmp", inc, exc)
    assert nm.group_selected("tmp2", inc, exc)
    assert not nm.group_selected("other", re.compile("orders.*"), exc)  # not included at all


def test_replicated_heartbeats_under_a_custom_separator_are_internal():
    p = ReplicationPolicy("dc1", separator="_")
    assert nm.is_internal_topic(p.replica_topic("heartbeats"))
