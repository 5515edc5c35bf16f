"""The least-privilege ACL table (mm2_failover.rules.acls): one place, used by the error messages, the secured bed and the
reference page (docs/reference.md). Pure: no cluster."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mm2_failover.adapters.kafka.kafka_errors import KafkaAuthError, classify
from mm2_failover.rules import acls
from mm2_failover.rules.naming import ReplicationPolicy

README = Path(__file__).resolve().parents[2] / "docs" / "reference.md"


class Err:  # a librdkafka KafkaError's shape (name/str), for classify
    def __init__(self, code: str, text: str = "denied"):
        self.code, self.text = code, text

    def name(self) -> str:
        return self.code

    def str(self) -> str:
        return self.text


def test_the_reference_pages_table_is_the_code_table():
    text = README.read_text()
    section = text[text.index("## Least-privilege ACLs") :]
    rows = re.findall(r"^\| (\d+) \| (\w+) \| (\w+) \| `([^`]+)` \| (\w+) \| ([^|]+) \|$", section, re.M)
    assert [(int(r[0]), r[1], r[2], r[3], r[4], r[5].strip()) for r in rows] == [
        (n.rule, n.cluster, n.resource, n.name, n.operation, n.why) for n in (*acls.NEEDS, *acls.LEASE_NEEDS)
    ]


def test_least_privilege_no_write_no_cluster_no_create():
    assert {n.operation for n in acls.NEEDS} <= {"Read", "Describe", "DescribeConfigs", "Delete"}
    assert {n.resource for n in acls.NEEDS} == {"Topic", "Group"}


def test_bindings_name_every_resource_by_the_flows_policy():
    got = {
        (b.rule, b.cluster, b.resource, b.name, b.operation, b.prefixed)
        for b in acls.bindings(ReplicationPolicy("dc1"), "dc2", ["orders"], ["app"])
    }
    assert got == {
        (1, "source", "Topic", "orders", "Read", False),
        (2, "source", "Group", "app", "Describe", False),
        (3, "source", "Topic", "mm2-offset-syncs.dc2.internal", "Read", False),
        (4, "target", "Topic", "dc1.checkpoints.internal", "Read", False),
        (5, "target", "Topic", "dc1.checkpoints.internal", "DescribeConfigs", False),
        (6, "target", "Topic", "mm2-offsets.dc1.internal", "Read", False),
        (7, "target", "Topic", "dc1.orders", "Read", False),
        (8, "target", "Group", "app", "Read", False),
        (9, "target", "Group", "app", "Delete", False),
    }
    identity = acls.bindings(ReplicationPolicy("dc1", "identity", "_"), "dc2", ["orders"], [], group_prefix="app-")
    assert {b.name for b in identity if b.rule == 7} == {"orders"}
    assert {b.name for b in identity if b.rule == 4} == {"dc1_checkpoints_internal"}
    assert {(b.name, b.prefixed) for b in identity if b.resource == "Group"} == {("app-", True)}


def test_phrase_names_the_operation_and_the_resources():
    assert acls.phrase("Read", "Group", "orders-app") == "Read on Group 'orders-app'"
    assert acls.phrase("Describe", "Topic", {"b", "a"}) == "Describe on Topic 'a', 'b'"
    assert acls.phrase("Read", "Topic", [f"t{i}" for i in range(7)]).endswith("'t4' (+2 more)")
    with pytest.raises(ValueError):
        acls.phrase("Alter", "Topic", "t")  # no row of the table asks for it


@pytest.mark.parametrize(
    "code, named",
    [("GROUP_AUTHORIZATION_FAILED", "Read on Group 'g'"), ("TOPIC_AUTHORIZATION_FAILED", "Read on Topic 't'")],
)
def test_a_refusal_names_the_permission_its_code_points_at(code, named):
    e = classify(
        {"bootstrap.servers": "h:1"},
        "target: alter offsets of g",
        Err(code),
        need={"Group": "Read on Group 'g'", "Topic": "Read on Topic 't'"},
    )
    assert isinstance(e, KafkaAuthError)
    assert f"needs {named}" in str(e) and "Least-privilege ACLs" in str(e) and "h:1" in str(e)


def test_the_spark_sources_refusal_names_read_on_the_checkpoints_topic():
    from mm2_failover.jobs.checkpoint_pass.driver import not_authorized

    topics = {"primary": "primary.checkpoints.internal"}
    e = RuntimeError(
        "Job aborted ... org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to "
        "access topics: [primary.checkpoints.internal]\n\tat org.apache..."
    )
    msg = not_authorized(e, topics)
    assert "needs Read on Topic 'primary.checkpoints.internal'" in msg and "Least-privilege ACLs" in msg
    assert not_authorized(RuntimeError("java.lang.OutOfMemoryError"), topics) is None


def test_the_lease_adds_its_topic_only_when_it_is_the_lock():
    """Issue 34 item 5: the lease's topic and ACLs are in the table, granted only with MM2_FAILOVER_LOCK=kafka."""
    plain = acls.bindings(ReplicationPolicy("dc1"), "dc2", ["orders"], ["app"])
    leased = acls.bindings(ReplicationPolicy("dc1"), "dc2", ["orders"], ["app"], lock_topic="mm2-failover.locks")
    assert set(leased) - set(plain) == {
        acls.Binding("target", "Topic", "mm2-failover.locks", op, False, rule)
        for rule, op in ((10, "Write"), (11, "Read"), (12, "DescribeConfigs"), (13, "Create"))
    } | {acls.Binding("target", "TransactionalId", "mm2-failover.locks.", "Write", True, 14)}
    assert not [b for b in plain if b.operation in ("Write", "Create")]


def test_the_progress_topic_named_by_the_run_parameter_is_the_one_granted():
    """The review: with mm2_offsets_topic set (MM2 on a Connect cluster), the bindings still named
    mm2-offsets.<alias>.internal, and a least-privilege drain check was refused reading the real one."""
    got = {
        b.name
        for b in acls.bindings(
            ReplicationPolicy("dc1"), "dc2", ["orders"], ["app"], mm2_offsets_topic="connect-offsets"
        )
        if b.rule == 6
    }
    assert got == {"connect-offsets"}
