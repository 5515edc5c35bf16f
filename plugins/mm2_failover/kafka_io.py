"""Thin adapter over confluent-kafka's AdminClient and Consumer: the only module that talks to Kafka.

Every call has a timeout and turns transport failures into :class:`KafkaUnavailable` naming the cluster
and what to check. Client settings (``conf``) are librdkafka settings passed through untouched; only
``bootstrap.servers`` is ever logged or put in an error message.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

TIMEOUT_S = 15.0


class KafkaUnavailable(RuntimeError):
    """A cluster could not be reached or did not answer in time."""


class MissingTopics(LookupError):
    """Topics that should exist do not."""

    def __init__(self, cluster: str, topics: Iterable[str], hint: str = ""):
        self.topics = sorted(topics)
        super().__init__(f"{cluster}: topic(s) not found: {', '.join(self.topics)}" + (f". {hint}" if hint else ""))


TP = tuple[str, int]  # (topic, partition)


def _quiet_logger() -> logging.Logger:
    lg = logging.getLogger("mm2_failover.librdkafka")
    lg.setLevel(logging.ERROR)
    return lg


def describe_conf(conf: dict) -> str:
    """What may be said about a client config in logs: its bootstrap servers, nothing else."""
    return str(conf.get("bootstrap.servers", "?"))


def admin(conf: dict):
    from confluent_kafka.admin import AdminClient

    c = dict(conf)
    c.setdefault("log_level", 3)
    c.setdefault("logger", _quiet_logger())
    c.setdefault("socket.connection.setup.timeout.ms", 10000)
    return AdminClient(c)


def _result(fut: Future, conf: dict, what: str, timeout: float = TIMEOUT_S):
    from confluent_kafka import KafkaException

    try:
        return fut.result(timeout=timeout)
    except TimeoutError:
        raise KafkaUnavailable(
            f"{what}: no answer from {describe_conf(conf)} within {timeout:.0f}s. "
            "Check that the brokers are up and reachable, and the connection's bootstrap servers and security settings."
        ) from None
    except KafkaException as e:
        err = e.args[0] if e.args else e
        code = getattr(err, "name", lambda: "")()
        if code in ("_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN", "_RESOLVE", "_DESTROY"):
            raise KafkaUnavailable(
                f"{what}: cannot reach {describe_conf(conf)} ({code}: {getattr(err, 'str', lambda: err)()}). "
                "Check that the brokers are up and reachable, and the connection's security settings."
            ) from None
        raise


class Cluster:
    """One Kafka cluster, seen through an AdminClient (kept alive while its futures resolve)."""

    def __init__(self, conf: dict, name: str = "cluster", timeout: float = TIMEOUT_S):
        self.conf = dict(conf)
        self.name = name
        self.timeout = timeout
        self._admin = None

    def __repr__(self) -> str:
        return f"Cluster({self.name} at {describe_conf(self.conf)})"

    @property
    def admin(self):
        if self._admin is None:
            self._admin = admin(self.conf)
        return self._admin

    def _ms(self) -> int:
        return int(self.timeout * 1000)

    # -- topics ------------------------------------------------------------------------------------
    def topics(self) -> dict[str, int]:
        """All topics -> partition count."""
        try:
            md = self.admin.list_topics(timeout=self.timeout)
        except Exception as e:
            raise KafkaUnavailable(
                f"{self.name}: cannot list topics at {describe_conf(self.conf)} within {self.timeout:.0f}s ({e}). "
                "Check that the brokers are up and reachable, and the connection's security settings."
            ) from None
        return {t: len(m.partitions) for t, m in md.topics.items() if m.error is None}

    def partitions(self, topics: Iterable[str], hint: str = "") -> list[TP]:
        existing = self.topics()
        topics = sorted(set(topics))
        missing = [t for t in topics if t not in existing]
        if missing:
            raise MissingTopics(self.name, missing, hint)
        return [(t, p) for t in topics for p in range(existing[t])]

    def offsets(self, tps: Iterable[TP], spec: str = "latest") -> dict[TP, int]:
        """Log end (``latest``) or log start (``earliest``) offsets, in one request."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        tps = list(tps)
        if not tps:
            return {}
        s = OffsetSpec.latest() if spec == "latest" else OffsetSpec.earliest()
        futs = self.admin.list_offsets({TopicPartition(t, p): s for t, p in tps}, request_timeout=self.timeout)
        return {(tp.topic, tp.partition): _result(f, self.conf, f"{self.name}: list {spec} offsets", self.timeout).offset
                for tp, f in futs.items()}

    def create_topic(self, topic: str, partitions: int = 1, config: dict | None = None) -> None:
        from confluent_kafka.admin import NewTopic

        futs = self.admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})],
                                        request_timeout=self.timeout)
        _result(futs[topic], self.conf, f"{self.name}: create topic {topic}", self.timeout)

    def delete_records(self, before: dict[TP, int]) -> None:
        from confluent_kafka import TopicPartition

        futs = self.admin.delete_records([TopicPartition(t, p, o) for (t, p), o in before.items()],
                                         request_timeout=self.timeout)
        for f in futs.values():
            _result(f, self.conf, f"{self.name}: delete records", self.timeout)

    # -- groups ------------------------------------------------------------------------------------
    def groups(self) -> list[str]:
        fut = self.admin.list_consumer_groups(request_timeout=self.timeout)
        res = _result(fut, self.conf, f"{self.name}: list consumer groups", self.timeout)
        return sorted(g.group_id for g in res.valid)

    def describe_groups(self, groups: Iterable[str]) -> dict[str, "GroupState"]:
        from confluent_kafka import KafkaException

        groups = sorted(set(groups))
        if not groups:
            return {}
        out: dict[str, GroupState] = {}
        futs = self.admin.describe_consumer_groups(groups, request_timeout=self.timeout)
        for g, f in futs.items():
            try:
                d = _result(f, self.conf, f"{self.name}: describe group {g}", self.timeout)
            except KafkaException as e:
                err = e.args[0]
                if err.name() == "GROUP_ID_NOT_FOUND":
                    out[g] = GroupState(g, "UNKNOWN")
                    continue
                raise
            out[g] = GroupState(
                g,
                d.state.name if hasattr(d.state, "name") else str(d.state),
                [Member(m.member_id, m.client_id, m.host) for m in d.members],
            )
        return out

    def committed(self, group: str) -> dict[TP, int]:
        """The group's committed offsets (partitions without a commit are absent)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        futs = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                      request_timeout=self.timeout)
        res = _result(futs[group], self.conf, f"{self.name}: committed offsets of {group}", self.timeout)
        return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions or [] if tp.offset >= 0}

    def committed_many(self, groups: list[str], window: int = 32) -> dict[str, dict[TP, int]]:
        """Committed offsets of many groups: one request per group (the client's limit), up to ``window`` requests
        in flight on the client's own event loop (no threads)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        def submit(g):
            return self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)],
                                                          request_timeout=self.timeout)[g]

        out = {}
        for g, fut in _windowed(groups, submit, window):
            res = _result(fut, self.conf, f"{self.name}: committed offsets of {g}", self.timeout)
            out[g] = {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions or [] if tp.offset >= 0}
        return out

    def alter_many(self, offsets: dict[str, dict[TP, int]], window: int = 32) -> dict[str, str | None]:
        """Commit many groups' offsets: one request per group, ``window`` in flight. Returns group -> error text
        (None = every partition committed). A refused group does not stop the others."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        def submit(g):
            req = ConsumerGroupTopicPartitions(g, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets[g].items())])
            return self.admin.alter_consumer_group_offsets([req], request_timeout=self.timeout)[g]

        out: dict[str, str | None] = {}
        for g, fut in _windowed(sorted(offsets), submit, window):
            try:
                res = _result(fut, self.conf, f"{self.name}: alter offsets of {g}", self.timeout)
            except KafkaUnavailable:
                raise
            except Exception as e:  # the broker refused the group (e.g. it has live members)
                out[g] = f"{type(e).__name__}: {e}"
                continue
            bad = {f"{tp.topic}[{tp.partition}]": str(tp.error) for tp in res.topic_partitions if tp.error}
            out[g] = f"partition errors: {bad}" if bad else None
        return out

    def alter_offsets(self, group: str, offsets: dict[TP, int]) -> dict[TP, str | None]:
        """Commit ``offsets`` for ``group`` in one request. Returns per-partition error text (None = ok).

        A group-level refusal (e.g. the group has live members) raises ``KafkaException``.
        """
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        req = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
        futs = self.admin.alter_consumer_group_offsets([req], request_timeout=self.timeout)
        res = _result(futs[group], self.conf, f"{self.name}: alter offsets of {group}", self.timeout)
        return {(tp.topic, tp.partition): (str(tp.error) if tp.error else None) for tp in res.topic_partitions}

    def delete_group(self, group: str) -> None:
        """Delete an empty group and all its commits (confluent-kafka has no OffsetDelete; see steps.rollback)."""
        futs = self.admin.delete_consumer_groups([group], request_timeout=self.timeout)
        _result(futs[group], self.conf, f"{self.name}: delete group {group}", self.timeout)

    # -- records -------------------------------------------------------------------------------------
    def read(self, tps_end: dict[TP, int], start: dict[TP, int] | None = None,
             timeout: float = 60.0, extra: dict | None = None) -> Iterator[tuple[str, int, int, bytes | None, bytes | None, int]]:
        """Yield ``(topic, partition, offset, key, value, timestamp_ms)`` from start (default: log start) up to
        (excluding) the given end offsets. A bounded read: records past the end are never returned."""
        import time

        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        todo = {tp: end for tp, end in tps_end.items() if end > (start or {}).get(tp, 0)}
        if not todo:
            return
        c = Consumer({**self.conf, "group.id": "mm2-failover-reader", "enable.auto.commit": False,
                      "enable.partition.eof": True, "log_level": 3, "logger": _quiet_logger(), **(extra or {})})
        try:
            c.assign([TopicPartition(t, p, (start or {}).get((t, p), OFFSET_BEGINNING)) for t, p in todo])
            deadline = time.monotonic() + timeout
            while todo:
                if time.monotonic() > deadline:
                    raise KafkaUnavailable(f"{self.name}: reading {sorted(todo)} did not reach the end offsets "
                                           f"within {timeout:.0f}s")
                for m in c.consume(1000, 1.0):
                    tp = (m.topic(), m.partition())
                    if m.error():
                        if m.error().code() == -191:  # _PARTITION_EOF
                            if tp in todo and m.offset() >= todo[tp]:
                                todo.pop(tp)
                            continue
                        raise KafkaUnavailable(f"{self.name}: read {tp}: {m.error()}")
                    if tp not in todo:
                        continue
                    if m.offset() >= todo[tp]:
                        todo.pop(tp)
                        continue
                    yield m.topic(), m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1]
                    if m.offset() + 1 >= todo[tp]:
                        todo.pop(tp)
        finally:
            c.close()


def _windowed(items, submit, window: int):
    """Yield ``(item, future)`` in order, keeping at most ``window`` requests outstanding."""
    from collections import deque

    pending: deque = deque()
    for it in items:
        pending.append((it, submit(it)))
        if len(pending) >= max(1, window):
            yield pending.popleft()  # the caller waits for this one before the next is sent
    while pending:
        yield pending.popleft()


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    host: str

    def describe(self) -> str:
        return f"{self.client_id}@{self.host} ({self.member_id})"


@dataclass(frozen=True)
class GroupState:
    group: str
    state: str  # EMPTY, STABLE, PREPARING_REBALANCE, ..., DEAD, UNKNOWN (never committed)
    members: list[Member] = field(default_factory=list)

    @property
    def is_safe_to_move(self) -> bool:
        """The broker accepts admin commits only for groups without members."""
        return not self.members and self.state in ("EMPTY", "DEAD", "UNKNOWN")

    def describe(self) -> str:
        hosts = ", ".join(sorted({m.host for m in self.members})) or "-"
        return (f"{self.group}: state {self.state}, {len(self.members)} member(s) "
                f"[{'; '.join(m.describe() for m in self.members)}] on hosts {hosts}")
