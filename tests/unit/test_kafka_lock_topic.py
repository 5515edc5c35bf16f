"""The writer-lock topic's check (kafka_lock.KafkaLease.ensure_topic) against a fake admin client: a topic the run
just created may be unknown for a moment to the broker asked for its configuration (its metadata reaches the broker
after the controller created it). A fresh-clone run's apply task failed on exactly that with a bare
``KafkaError{code=UNKNOWN_TOPIC_OR_PART}``; the check asks again, within a bound, and then says what is wrong."""

from __future__ import annotations

import confluent_kafka.admin
import pytest
from confluent_kafka import KafkaError, KafkaException

from mm2_failover.adapters import kafka_lock
from mm2_failover.adapters.kafka.kafka_errors import KafkaConfigError

TOPIC = "mm2-failover.locks"


class Done:
    def __init__(self, value=None, error: Exception | None = None):
        self.value, self.error = value, error

    def result(self, _timeout=None):
        if self.error:
            raise self.error
        return self.value


class Entry:
    def __init__(self, value: str):
        self.value = value


class FakeAdmin:
    """A cluster where ``TOPIC`` exists once created, and whose configuration is unknown to the first ``unknown``
    DescribeConfigs after that."""

    def __init__(self, exists: bool, unknown: int, ts_type: str = "LogAppendTime", **settings: str):
        self.exists, self.unknown, self.ts_type, self.described, self.created = exists, unknown, ts_type, 0, 0
        self.settings = {"cleanup.policy": "delete", "retention.ms": "604800000", "retention.bytes": "-1", **settings}

    def list_topics(self, timeout=None):
        return type("Md", (), {"topics": {TOPIC: object()} if self.exists else {}, "brokers": {1: object()}})()

    def create_topics(self, topics):
        self.created += 1
        self.exists = True
        return {t.topic: Done() for t in topics}

    def describe_configs(self, resources):
        self.described += 1
        if self.described <= self.unknown:
            return {r: Done(error=KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))) for r in resources}
        return {
            r: Done({"message.timestamp.type": Entry(self.ts_type), **{k: Entry(v) for k, v in self.settings.items()}})
            for r in resources
        }


@pytest.fixture
def admin(monkeypatch):
    def use(fake: FakeAdmin) -> FakeAdmin:
        monkeypatch.setattr(confluent_kafka.admin, "AdminClient", lambda _conf: fake)
        return fake

    monkeypatch.setattr(kafka_lock.time, "sleep", lambda _s: None)
    return use


def lease() -> kafka_lock.KafkaLease:
    return kafka_lock.KafkaLease(
        {"bootstrap.servers": "127.0.0.1:1"},
        TOPIC,
        "cluster-id",
        {"writer": "test"},
        lease_s=25,
        margin_s=17,
        renew_s=2,
    )


@pytest.mark.parametrize("exists", [False, True])
def test_unknown_for_a_moment_is_asked_again_until_known(admin, exists):
    fake = admin(FakeAdmin(exists=exists, unknown=3))
    lease().ensure_topic()
    assert fake.described == 4 and fake.created == (0 if exists else 1)


def test_still_unknown_after_the_bound_is_an_error_naming_the_topic_and_what_to_check(admin, monkeypatch):
    clock = iter(range(0, 10_000, 5))
    monkeypatch.setattr(kafka_lock.time, "monotonic", lambda: float(next(clock)))
    fake = admin(FakeAdmin(exists=True, unknown=10_000))
    with pytest.raises(KafkaConfigError, match=f"writer-lock topic {TOPIC}.*not known") as e:
        lease().ensure_topic()
    assert "UNKNOWN_TOPIC_OR_PART" in str(e.value) and fake.described < 100


def test_a_topic_stamping_the_clients_time_is_still_refused(admin):
    admin(FakeAdmin(exists=True, unknown=1, ts_type="CreateTime"))
    with pytest.raises(KafkaConfigError, match="message.timestamp.type=CreateTime"):
        lease().ensure_topic()


def test_another_error_is_not_asked_again(admin):
    fake = admin(FakeAdmin(exists=True, unknown=0))
    fake.describe_configs = lambda rs: {
        r: Done(error=KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))) for r in rs
    }
    with pytest.raises(KafkaException):
        lease().ensure_topic()


@pytest.mark.parametrize(
    "setting, value",
    [
        ("cleanup.policy", "compact"),
        ("cleanup.policy", "compact,delete"),
        ("retention.ms", "3600000"),
        ("retention.bytes", "1048576"),
    ],
)
def test_a_topic_that_can_forget_a_holders_claim_is_refused_naming_the_setting(admin, setting, value):
    """Issue 50 item 8: only the timestamp type was checked. A compacted topic, or one whose retention is shorter than
    the longest hold plus a lease, forgets the holder's claim while it renews (test_lease shows the second grant)."""
    admin(FakeAdmin(exists=True, unknown=0, **{setting: value}))
    with pytest.raises(KafkaConfigError, match=f"{setting}={value}") as e:
        lease().ensure_topic()
    assert "kafka-configs --alter" in str(e.value)
