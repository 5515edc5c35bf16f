"""Thin adapter over confluent-kafka's AdminClient and Consumer: how the pipeline talks to Kafka, but for the lease
(:mod:`kafka_lock` builds its own clients, and :mod:`fenced` writes through Kafka's Java client).

:class:`Cluster` is one cluster: its topics and offsets, its consumer groups' commits and states, and bounded reads of
its records. Every call has a timeout, and a failure is one of :mod:`kafka_errors`' exceptions (unreachable, refused,
misconfigured). Commits with metadata, and the commits and states of many groups at once, go through Kafka's Java
client (:mod:`java_bridge`). Client settings (``conf``) are librdkafka settings passed through untouched
(:func:`check_conf`); only ``bootstrap.servers`` is ever logged or put in an error message.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait

import confluent_kafka.admin
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import ConfigResource, NewTopic, OffsetSpec, ResourceType

from mm2_failover.adapters import faults
from mm2_failover.adapters.kafka import java_bridge
from mm2_failover.adapters.kafka.groups import GroupState, Member
from mm2_failover.adapters.kafka.kafka_errors import (
    AUTH,
    LEADERSHIP,
    UNREACHABLE,
    KafkaConfigError,
    KafkaUnavailable,
    MissingTopics,
    OutOfRange,
    RecordedErrors,
    classify,
    describe_conf,
    error_code,
    error_text,
    is_leadership,
)
from mm2_failover.rules import evidence as ev
from mm2_failover.rules.acls import phrase
from mm2_failover.rules.evidence import Record
from mm2_failover.rules.values import TP, Commit

TIMEOUT_S = 15.0
#: groups per DescribeConsumerGroups request. librdkafka 2.16 aborts the process (``rd_kafka_enq_once_del_source_return:
#: Assertion `eonce->refcnt > 0' failed``, librdkafka#4605) after a describe of 10k groups timed out; windows of 1000
#: never timed out on the bed (docs/performance.md, "The gate at 10k groups")
DESCRIBE_WINDOW = 1000

#: every bounded read's reset policy: a start below the log start is an error (librdkafka's default, ``largest``,
#: would move the read to the log END and return nothing, as if the partition had no record after the start)
BOUNDED_READ_CONF = {"auto.offset.reset": "error"}

#: how long one ``Consumer.consume(n, wait)`` of a bounded read waits. librdkafka returns a batch when it holds ``n``
#: messages or the wait is over - not when the partitions reach their end - so a read of fewer records than ``n``
#: cost the whole wait: 1.0 s for every small read (MM2's progress, the offset syncs, the proofs' records), measured
#: on the bed. The reads loop until done or their deadline, so a short wait only means more calls.
CONSUME_WAIT_S = 0.05


def _quiet_logger() -> logging.Logger:
    lg = logging.getLogger("mm2_failover.librdkafka")
    lg.setLevel(logging.ERROR)
    return lg


def check_conf(conf, what: str = "client settings") -> dict:
    """``conf`` must be a JSON object of librdkafka settings with ``bootstrap.servers`` (ValueError naming ``what``)."""
    if not isinstance(conf, dict):
        raise KafkaConfigError(
            f'{what}: must be a JSON object of librdkafka settings (e.g. {{"bootstrap.servers": '
            f'"host:9092"}}), not a {type(conf).__name__}'
        )
    if not conf.get("bootstrap.servers"):
        raise KafkaConfigError(f"{what}: 'bootstrap.servers' is missing")
    bad = sorted(
        str(k)
        for k, v in conf.items()
        if not isinstance(v, (str, int, float, bool)) and not callable(v) and k not in ("logger",)
    )
    if bad:
        raise KafkaConfigError(f"{what}: the value of {', '.join(bad)} must be a string, a number or a boolean")
    return conf


def _client_conf(conf: dict, errors: RecordedErrors | None) -> dict:
    c = dict(conf)
    c.setdefault("log_level", 3)
    c.setdefault("logger", _quiet_logger())
    if errors is not None:
        c.setdefault("error_cb", errors)
    return c


def _construct(factory, conf: dict, name: str):
    """Create a librdkafka client; an unknown property or a bad value is a :class:`KafkaConfigError` naming it."""
    try:
        return factory(conf)
    except KafkaException as e:
        raise KafkaConfigError(
            f"{name}: the client settings are not valid: {error_text(e.args[0])}. Check the connection's "
            "extra (or the config file) against librdkafka's CONFIGURATION.md"
        ) from None
    except (TypeError, ValueError) as e:
        raise KafkaConfigError(f"{name}: the client settings are not valid: {e}") from None


def admin(conf: dict, errors: RecordedErrors | None = None, name: str = "cluster"):
    c = _client_conf(conf, errors)
    c.setdefault("socket.connection.setup.timeout.ms", 10000)
    return _construct(confluent_kafka.admin.AdminClient, c, name)


def _result(
    fut: Future,
    conf: dict,
    what: str,
    timeout: float = TIMEOUT_S,
    errors: RecordedErrors | None = None,
    client=None,
    need=None,
):
    try:
        return fut.result(timeout=timeout)
    except TimeoutError:
        raise classify(
            conf, f"{what}: no answer within {timeout:.0f}s", KafkaError(KafkaError._TIMED_OUT), errors, client
        ) from None
    except KafkaException as e:
        err = e.args[0] if e.args else e
        c = error_code(err)
        if c in UNREACHABLE or c in LEADERSHIP or c in AUTH or c.endswith("_AUTHORIZATION_FAILED") or c == "_SSL":
            raise classify(conf, what, err, errors, client, need) from None
        raise


def _metadata(tp) -> str:
    """A commit's metadata as librdkafka read it; non-empty is only a sign that there is some (see commits_many)."""
    try:
        return tp.metadata or ""
    except UnicodeDecodeError:  # librdkafka read past the metadata (no NUL): there is some, read it again
        return "\ufffd"


def _queued_refusal(consumer):
    """An authorization refusal a consumer handle queued for the application (e.g. FindCoordinator refused for its
    group: ``committed()`` itself only times out), or None."""
    for _ in range(20):
        m = consumer.poll(0)
        if m is None:
            return None
        if m.error() is not None and error_code(m.error()).endswith("_AUTHORIZATION_FAILED"):
            return m.error()
    return None


class Cluster:
    """One Kafka cluster, seen through an AdminClient (kept alive while its futures resolve)."""

    def __init__(self, conf: dict, name: str = "cluster", timeout: float = TIMEOUT_S):
        self.conf = dict(check_conf(conf, f"{name} cluster"))
        self.name = name
        self.timeout = timeout
        self._admin = None
        self._admin_lock = threading.Lock()
        self.errors = RecordedErrors()

    def __repr__(self) -> str:
        return f"Cluster({self.name} at {describe_conf(self.conf)})"

    @property
    def admin(self):
        """Built on first use, once even when threads share the cluster: a second client, dropped, would take down
        the requests in flight on it (``_DESTROY``)."""
        if self._admin is None:
            with self._admin_lock:
                if self._admin is None:
                    self._admin = admin(self.conf, self.errors, self.name)
        return self._admin

    def _result(self, fut: Future, what: str, need=None):
        return _result(fut, self.conf, f"{self.name}: {what}", self.timeout, self.errors, self._admin, need)

    def _fail(self, what: str, e: Exception) -> Exception:
        err = e.args[0] if isinstance(e, KafkaException) and e.args else KafkaError(KafkaError._TIMED_OUT)
        return classify(self.conf, f"{self.name}: {what}", err, self.errors, self._admin)

    # -- the cluster ---------------------------------------------------------------------------------
    def probe(self) -> str:
        """Does the cluster answer, with these settings? Returns its cluster id; raises KafkaUnavailable,
        KafkaAuthError or KafkaConfigError."""
        self.topics()
        return self.cluster_id()

    def cluster_id(self) -> str:
        fut = self.admin.describe_cluster(request_timeout=self.timeout)
        return self._result(fut, "describe cluster").cluster_id

    # -- topics ------------------------------------------------------------------------------------
    def topics(self) -> dict[str, int]:
        """All topics -> partition count."""
        try:
            md = self.admin.list_topics(timeout=self.timeout)
        except KafkaConfigError:
            raise
        except Exception as e:  # noqa: BLE001 - classified below
            raise self._fail(f"list topics (within {self.timeout:.0f}s)", e) from None
        return {t: len(m.partitions) for t, m in md.topics.items() if m.error is None}

    def topic_id(self, topic: str) -> str:
        """The topic's id (a new one when the topic is deleted and created again)."""
        futs = self.admin.describe_topics(TopicCollection([topic]), request_timeout=self.timeout)
        return str(self._result(futs[topic], f"describe topic {topic}", phrase("Describe", "Topic", topic)).topic_id)

    def topic_config(self, topic: str) -> dict[str, str]:
        """The topic's effective configuration (name -> value)."""
        futs = self.admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)], request_timeout=self.timeout)
        res = self._result(
            next(iter(futs.values())), f"describe configs of topic {topic}", phrase("DescribeConfigs", "Topic", topic)
        )
        return {k: e.value for k, e in res.items()}

    def partitions(self, topics: Iterable[str]) -> list[TP]:
        existing = self.topics()
        topics = sorted(set(topics))
        missing = [t for t in topics if t not in existing]
        if missing:
            raise MissingTopics(self.name, missing)
        return [(t, p) for t in topics for p in range(existing[t])]

    def offsets(self, tps: Iterable[TP], spec: str = "latest") -> dict[TP, int]:
        """Log end (``latest``) or log start (``earliest``) offsets, in one request."""
        tps = list(tps)
        if not tps:
            return {}
        s = OffsetSpec.latest() if spec == "latest" else OffsetSpec.earliest()
        need = phrase("Describe", "Topic", {t for t, _p in tps})
        deadline, pause = time.monotonic() + self.timeout, 0.1
        while True:  # the read is idempotent: a leader moving (Kafka's retriable codes) is asked again
            futs = self.admin.list_offsets({TopicPartition(t, p): s for t, p in tps}, request_timeout=self.timeout)
            wait(futs.values(), timeout=self.timeout)
            moving = any(f.done() and is_leadership(f.exception()) for f in futs.values())
            if not moving or time.monotonic() + pause > deadline:
                return {
                    (tp.topic, tp.partition): self._result(f, f"list {spec} offsets", need).offset
                    for tp, f in futs.items()
                }
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def log_bounds(self, tps: Iterable[TP]) -> dict[TP, tuple[int, int]]:
        """(log start, log end) of each partition (the evidence stage's :class:`~mm2_failover.rules.evidence.RecordSource`)."""
        tps = list(tps)
        start, end = self.offsets(tps, "earliest"), self.offsets(tps)
        return {tp: (start[tp], end[tp]) for tp in tps}

    def offset_for_time(self, tp: TP, timestamp_ms: int) -> int | None:
        """The first offset of ``tp`` whose record timestamp is >= ``timestamp_ms`` (None: no such record)."""
        futs = self.admin.list_offsets(
            {TopicPartition(*tp): OffsetSpec.for_timestamp(timestamp_ms)}, request_timeout=self.timeout
        )
        off = self._result(
            next(iter(futs.values())),
            f"find the offset of time {timestamp_ms} in {tp}",
            phrase("Describe", "Topic", tp[0]),
        ).offset
        return None if off < 0 else off

    def create_topic(self, topic: str, partitions: int = 1, config: dict | None = None) -> None:
        futs = self.admin.create_topics(
            [NewTopic(topic, partitions, 1, config=config or {})], request_timeout=self.timeout
        )
        self._result(futs[topic], f"create topic {topic}")

    def delete_records(self, before: dict[TP, int]) -> None:
        futs = self.admin.delete_records(
            [TopicPartition(t, p, o) for (t, p), o in before.items()], request_timeout=self.timeout
        )
        for f in futs.values():
            self._result(f, "delete records")

    # -- groups ------------------------------------------------------------------------------------
    def groups(self) -> list[str]:
        """Every consumer group id. Fails (never an empty or partial list) when a broker did not answer."""
        return sorted(self.group_states())

    def group_states(self) -> dict[str, str]:
        """Every consumer group id and its state as its coordinator lists it (ListGroups, one request per broker):
        ``EMPTY``, ``STABLE``, ``DEAD``, ..., ``UNKNOWN`` where the broker does not say. Only the groups this principal
        may Describe are listed. Fails (never an empty or partial answer) when a broker did not answer."""
        fut = self.admin.list_consumer_groups(request_timeout=self.timeout)
        res = self._result(fut, "list consumer groups")
        if res.errors:
            raise classify(self.conf, f"{self.name}: list consumer groups", res.errors[0], self.errors, self._admin)
        return {
            g.group_id: (g.state.name if hasattr(g.state, "name") else str(g.state or "UNKNOWN")).upper()
            for g in res.valid
        }

    def describe_groups(self, groups: Iterable[str]) -> dict[str, "GroupState"]:
        """Each group's state and members as its coordinator describes them, ``DESCRIBE_WINDOW`` groups per request
        (GROUP_ID_NOT_FOUND: state ``UNKNOWN``). More than :data:`~.java_bridge.JAVA_BULK_GROUPS` groups are described
        by Kafka's Java client in one JVM (:func:`~.java_bridge.describe_with_java`): librdkafka sends one
        DescribeGroups request per group (2.6-4.4 s for 10k groups on the bed), the Java client one per coordinator for
        a whole window."""
        groups = sorted(set(groups))
        if len(groups) > java_bridge.JAVA_BULK_GROUPS:
            return java_bridge.describe_with_java(self, groups)
        out: dict[str, GroupState] = {}
        for i in range(0, len(groups), DESCRIBE_WINDOW):
            out.update(self._describe_window(groups[i : i + DESCRIBE_WINDOW]))
        return out

    def _describe_window(self, groups: list[str]) -> dict[str, "GroupState"]:
        out: dict[str, GroupState] = {}
        futs = self.admin.describe_consumer_groups(groups, request_timeout=self.timeout)
        for g, f in futs.items():
            try:
                d = self._result(f, f"describe group {g}", phrase("Describe", "Group", g))
            except KafkaException as e:
                if error_code(e.args[0]) == "GROUP_ID_NOT_FOUND":
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
        return {tp: c.offset for tp, c in self.commits(group).items()}

    def commits(self, group: str) -> dict[TP, Commit]:
        """The group's committed offsets with their metadata."""
        return self.commits_many([group])[group]

    def commits_many(self, groups: list[str], window: int = 32) -> dict[str, dict[TP, Commit]]:
        """Committed offsets and metadata of many groups, up to ``min(window, 64)`` groups at a time (a thread each).

        Each group's commits are read by a consumer handle of that group (``Consumer.committed`` over every partition
        the cluster's metadata lists), never with the admin API's ListConsumerGroupOffsets: librdkafka (2.16.1, and its
        master today: librdkafka#5040) dereferences the admin client's absent consumer-group object when that request
        meets NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE - the coordinator moving, a broker restarting - and the whole
        process dies of SIGSEGV in a librdkafka thread, with no Python traceback (CI's fault drill: the target broker
        restarted, its commits read at once). A consumer handle has that object: it looks the coordinator up again,
        and the read is retried here until ``timeout``. A handle per group costs ~5 ms of a 2-core machine per group,
        so more than :data:`~.java_bridge.JAVA_BULK_GROUPS` groups are read by Kafka's Java client in one JVM (a few
        seconds, then thousands of groups a second). librdkafka reads commit metadata as a C string (wrong for metadata
        without a NUL), so the groups whose commits carry any are read again, exactly, with the Java client."""
        groups = list(groups)
        if not groups:
            return {}
        if len(groups) > java_bridge.JAVA_BULK_GROUPS:
            return java_bridge.read_with_java(self, groups)
        parts = [(t, p) for t, n in sorted(self.topics().items()) for p in range(n)]
        if len(groups) == 1:
            out = {groups[0]: self._read_commits(groups[0], parts)}
        else:
            ex = ThreadPoolExecutor(max_workers=max(1, min(window, 64, len(groups))), thread_name_prefix="commits")
            try:
                futs = [ex.submit(self._read_commits, g, parts) for g in groups]
                out = {g: f.result() for g, f in zip(groups, futs)}
            finally:
                ex.shutdown(wait=True, cancel_futures=True)
        with_metadata = sorted(g for g, cs in out.items() if any(c.metadata for c in cs.values()))
        if with_metadata:
            out.update(java_bridge.read_with_java(self, with_metadata))
        return out

    def _read_commits(self, group: str, parts: list[TP]) -> dict[TP, Commit]:
        """One group's commits on ``parts``, read by a consumer handle whose group id is ``group`` (it never joins
        the group, subscribes or commits: FindCoordinator and OffsetFetch only, which need Describe on the group)."""
        if not parts:
            return {}
        what, need = f"{self.name}: committed offsets of {group}", phrase("Describe", "Group", group)
        errors = RecordedErrors()
        c = _construct(
            Consumer,
            _client_conf(
                {**self.conf, "group.id": group, "enable.auto.commit": False, "enable.auto.offset.store": False}, errors
            ),
            self.name,
        )
        try:
            deadline = time.monotonic() + self.timeout
            while True:
                left = deadline - time.monotonic()
                try:
                    res = c.committed([TopicPartition(t, p) for t, p in parts], timeout=max(0.1, min(1.0, left)))
                    break
                except KafkaException as e:
                    err = e.args[0] if e.args else KafkaError(KafkaError._FAIL)
                    refused = _queued_refusal(c)  # FindCoordinator refused: the consumer queues it, committed() waits
                    if refused is not None:
                        raise classify(self.conf, what, refused, errors, None, need) from None
                    if error_code(err) in UNREACHABLE | LEADERSHIP and time.monotonic() < deadline:
                        continue  # the coordinator is moving or loading, or the cluster is not up (yet)
                    if error_code(err) in UNREACHABLE | LEADERSHIP:
                        raise classify(
                            self.conf, f"{what}: no answer within {self.timeout:.0f}s", err, errors, c, need
                        ) from None
                    raise classify(self.conf, what, err, errors, c, need) from None
        finally:
            c.close()
        for tp in res:
            if tp.error is None or error_code(tp.error) == "UNKNOWN_TOPIC_OR_PART":  # (deleted since the metadata)
                continue
            need = phrase("Describe", "Topic", tp.topic)
            raise classify(self.conf, f"{what} ({tp.topic}[{tp.partition}])", tp.error, errors, None, need)
        return {
            (tp.topic, tp.partition): Commit(tp.offset, _metadata(tp))
            for tp in res
            if tp.error is None and tp.offset >= 0
        }

    @staticmethod
    def _request(group: str, offsets: dict[TP, "int | Commit"]):
        parts = []
        for (t, p), o in sorted(offsets.items()):
            c = o if isinstance(o, Commit) else Commit(int(o))
            parts.append(
                TopicPartition(t, p, c.offset, metadata=c.metadata) if c.metadata else TopicPartition(t, p, c.offset)
            )
        return ConsumerGroupTopicPartitions(group, parts)

    def alter_many(self, offsets: dict[str, dict[TP, "int | Commit"]], window: int = 32) -> dict[str, str | None]:
        """Commit many groups' offsets: one request per group, ``window`` in flight. Returns group -> error text (None
        = every partition committed). A refused group does not stop the others; an unreachable cluster or a refused
        permission stops them all. Groups whose commits carry metadata go through :meth:`alter_exact`."""
        exact = {g: o for g, o in offsets.items() if any(isinstance(c, Commit) and c.metadata for c in o.values())}
        out = self.alter_exact(exact) if exact else {}
        offsets = {g: o for g, o in offsets.items() if g not in exact}

        def submit(g):
            return self.admin.alter_consumer_group_offsets(
                [self._request(g, offsets[g])], request_timeout=self.timeout
            )[g]

        for g, fut in _windowed(sorted(offsets), submit, window):
            try:
                res = self._result(fut, f"alter offsets of {g}", self._commit_needs(g, offsets[g]))
            except (KafkaUnavailable, KafkaConfigError):
                raise
            except Exception as e:  # noqa: BLE001 - the broker refused the group (e.g. it has live members): named
                out[g] = f"{type(e).__name__}: {e}"
                continue
            self._raise_if_acl_refused(g, res.topic_partitions)
            bad = {f"{tp.topic}[{tp.partition}]": str(tp.error) for tp in res.topic_partitions if tp.error}
            out[g] = f"partition errors: {bad}" if bad else None
            faults.hit("alter.after_group")  # drills: a crash (or a broker lost) with some groups written
        return out

    @staticmethod
    def _commit_needs(group: str, offsets) -> dict[str, str]:
        return {"Group": phrase("Read", "Group", group), "Topic": phrase("Read", "Topic", {t for t, _p in offsets})}

    def _raise_if_acl_refused(self, group: str, parts) -> None:
        """A commit refused by an ACL comes back per partition (Read on the topic, or Read on the group on every
        partition): an error of configuration, never one group's refusal."""
        denied = sorted(
            {tp.topic for tp in parts if tp.error and error_code(tp.error).endswith("_AUTHORIZATION_FAILED")}
        )
        if denied:
            err = next(tp.error for tp in parts if tp.error and tp.topic == denied[0])
            raise classify(
                self.conf,
                f"{self.name}: alter offsets of {group}",
                err,
                self.errors,
                self._admin,
                {"Group": phrase("Read", "Group", group), "Topic": phrase("Read", "Topic", denied)},
            )

    def alter_exact(self, offsets: dict[str, dict[TP, "int | Commit"]]) -> dict[str, str | None]:
        """Commit offsets with their metadata byte for byte, through Kafka's Java AdminClient (``jvm/
        KafkaOffsets.java``): confluent-kafka would append a NUL byte to every metadata string. One request per
        group; returns group -> error text (None = committed)."""
        return java_bridge.commit_with_java(self, offsets)

    def alter_offsets(self, group: str, offsets: dict[TP, "int | Commit"]) -> dict[TP, str | None]:
        """Commit ``offsets`` for ``group`` in one request. Returns per-partition error text (None = ok).

        A group-level refusal (e.g. the group has live members) raises ``KafkaException``.
        """
        if any(isinstance(c, Commit) and c.metadata for c in offsets.values()):
            err = self.alter_exact({group: offsets}).get(group)
            if err:
                raise KafkaException(KafkaError(KafkaError._FAIL, err))
            return {tp: None for tp in offsets}
        futs = self.admin.alter_consumer_group_offsets([self._request(group, offsets)], request_timeout=self.timeout)
        res = self._result(futs[group], f"alter offsets of {group}", self._commit_needs(group, offsets))
        self._raise_if_acl_refused(group, res.topic_partitions)
        return {(tp.topic, tp.partition): (str(tp.error) if tp.error else None) for tp in res.topic_partitions}

    def delete_group(self, group: str, missing_ok: bool = False) -> None:
        """Delete an empty group and all its commits (confluent-kafka has no OffsetDelete; see stages.roll_back)."""
        futs = self.admin.delete_consumer_groups([group], request_timeout=self.timeout)
        try:
            self._result(futs[group], f"delete group {group}", phrase("Delete", "Group", group))
        except KafkaException as e:
            if not (missing_ok and error_code(e.args[0]) == "GROUP_ID_NOT_FOUND"):
                raise

    # -- records -------------------------------------------------------------------------------------
    def records(self, ranges: dict[TP, tuple[int, int]], timeout: float = 60.0) -> dict[TP, list[Record]]:
        """The records of each partition in [start, end) (with headers), in one consumer; a partition whose range
        holds no record (compaction, markers) gets an empty list."""
        out: dict[TP, list[Record]] = {tp: [] for tp in ranges}
        for m in self._bounded({tp: r for tp, r in ranges.items() if r[1] > r[0]}, timeout, stop_at_eof=True):
            out[(m.topic(), m.partition())].append(
                Record(m.offset(), m.key(), m.value(), m.timestamp()[1], tuple(m.headers() or ()))
            )
        return out

    def first_records(self, positions: dict[TP, int], scan: int = 1000) -> dict[TP, Record | None]:
        """The first record at or after each position (None: none within ``scan`` offsets before the log end)."""
        ends = self.offsets(list(positions))
        got = self.records({tp: (o, min(ends[tp], o + scan)) for tp, o in positions.items()})
        return {tp: (rs[0] if rs else None) for tp, rs in got.items()}

    def read(
        self,
        tps_end: dict[TP, int],
        start: dict[TP, int] | None = None,
        timeout: float = 60.0,
        extra: dict | None = None,
    ) -> Iterator[tuple[str, int, int, bytes | None, bytes | None, int]]:
        """Yield ``(topic, partition, offset, key, value, timestamp_ms)`` from start (default: log start) up to
        (excluding) the given end offsets. A bounded read: records past the end are never returned."""
        ranges = {
            tp: ((start or {}).get(tp, OFFSET_BEGINNING), end)
            for tp, end in tps_end.items()
            if end > (start or {}).get(tp, 0)
        }
        for m in self._bounded(ranges, timeout, extra):
            yield m.topic(), m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1]

    def read_ranges(
        self, ranges: dict[TP, set[tuple[int, int]]], budget: int = ev.DEFAULT_BUDGET, timeout: float = 60.0
    ) -> dict[tuple[TP, int, int], ev.Read]:
        """The evidence stage's reads (:class:`~mm2_failover.rules.evidence.RecordSource`): every asked range ``[lo, hi)``
        as a :class:`~mm2_failover.rules.evidence.Read` - complete (each record's offset and content digest, nothing
        else kept), below the log start, over ``budget`` records (not read), or failed (the partition's readable end
        fell short of ``hi``, or the read did not finish in time), each with its reason. Overlapping ranges of a
        partition are read once; several disjoint ones in turn, one consumer each round."""
        out: dict[tuple[TP, int, int], ev.Read] = {}
        rounds: list[dict[TP, tuple[int, int]]] = []
        members: dict[tuple[TP, int, int], list[tuple[int, int]]] = {}
        for tp, rs in ranges.items():
            todo = []
            for lo, hi in sorted(rs):
                if hi <= lo:
                    out[(tp, lo, hi)] = ev.Read(lo, hi, ev.COMPLETE)
                elif hi - lo > budget:
                    out[(tp, lo, hi)] = ev.Read(
                        lo, hi, ev.OVER_BUDGET, why=f"{hi - lo} records, over the read budget of {budget}"
                    )
                else:
                    todo.append((lo, hi))
            for i, (lo, hi, part) in enumerate(_merged(todo, budget)):
                if len(rounds) <= i:
                    rounds.append({})
                rounds[i][tp] = (lo, hi)
                members[(tp, lo, hi)] = part
        for rnd in rounds:
            for tp, (lo, hi, status, recs, why) in self._read_whole(rnd, timeout).items():
                seg = ev.Segment(tuple(recs)) if status == ev.COMPLETE else None  # one copy for the ranges in it
                for a, b in members[(tp, lo, hi)]:
                    out[(tp, a, b)] = ev.Read.within(seg, a, b) if seg else ev.Read(a, b, status, why=why)
        return out

    def _read_whole(self, ranges: dict[TP, tuple[int, int]], timeout: float) -> dict[TP, tuple]:
        """One consumer over ``[lo, hi)`` of each partition: ``tp -> (lo, hi, status, records, why)``."""
        out: dict[TP, tuple] = {}
        got: dict[TP, list[ev.Rec]] = {tp: [] for tp in ranges}
        todo = dict(ranges)
        errors = RecordedErrors()
        c = _construct(
            Consumer,
            _client_conf(
                {
                    **self.conf,
                    "group.id": "mm2-failover-reader",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    **BOUNDED_READ_CONF,
                },
                errors,
            ),
            self.name,
        )
        try:
            c.assign([TopicPartition(t, p, lo) for (t, p), (lo, _hi) in ranges.items()])
            deadline = time.monotonic() + timeout
            while todo:
                if time.monotonic() > deadline:
                    for tp, (lo, hi) in todo.items():
                        out[tp] = (lo, hi, ev.FAILED, (), f"not read to {hi} within {timeout:.0f} s")
                    break
                for m in c.consume(1000, CONSUME_WAIT_S):
                    tp = (m.topic(), m.partition())
                    err = m.error()
                    if err is not None:
                        code = err.code()
                        if m.topic() is None and code == KafkaError.GROUP_AUTHORIZATION_FAILED:
                            continue  # see _bounded
                        if m.topic() is None:  # the cluster, not a partition: unreachable, refused, misconfigured
                            raise classify(self.conf, f"{self.name}: read {sorted(todo)[:5]}", err, errors, c)
                        if tp not in todo:
                            continue
                        lo, hi = todo[tp]
                        if code == KafkaError._PARTITION_EOF:
                            del todo[tp]
                            out[tp] = (
                                (lo, hi, ev.COMPLETE, got[tp], "")
                                if m.offset() >= hi
                                else (
                                    lo,
                                    hi,
                                    ev.FAILED,
                                    (),
                                    f"readable only up to offset {m.offset()} (an open "
                                    "transaction, or the log was truncated)",
                                )
                            )
                        elif code == KafkaError._AUTO_OFFSET_RESET:
                            del todo[tp]
                            out[tp] = (lo, hi, ev.BELOW_START, (), f"offset {lo} is below the log start")
                        else:
                            raise classify(
                                self.conf,
                                f"{self.name}: read {tp}",
                                err,
                                errors,
                                c,
                                phrase("Read", "Topic", tp[0]) if m.topic() else None,
                            )
                        continue
                    if tp not in todo:
                        continue
                    lo, hi = todo[tp]
                    if m.offset() < hi:
                        got[tp].append(
                            ev.Rec(m.offset(), ev.content_of(m.key(), m.value(), m.timestamp()[1], m.headers() or ()))
                        )
                    if m.offset() + 1 >= hi:
                        del todo[tp]
                        out[tp] = (lo, hi, ev.COMPLETE, got[tp], "")
        finally:
            c.close()
        return out

    def _bounded(
        self, ranges: dict[TP, tuple[int, int]], timeout: float, extra: dict | None = None, stop_at_eof: bool = False
    ) -> Iterator:
        """The messages of each partition in [start, end), in one consumer that commits nothing. A partition is done
        at its end offset, or at the log end when ``stop_at_eof`` (ranges that end in a compaction or marker gap);
        without it, reaching the log end before the end offset waits (records not yet readable). A start below the
        log start raises :class:`OutOfRange` (``BOUNDED_READ_CONF``: never a silent jump to the log end)."""
        todo = {tp: e for tp, (_s, e) in ranges.items()}
        if not todo:
            return
        errors = RecordedErrors()
        c = _construct(
            Consumer,
            _client_conf(
                {
                    **self.conf,
                    "group.id": "mm2-failover-reader",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    **(extra or {}),
                    **BOUNDED_READ_CONF,
                },
                errors,
            ),
            self.name,
        )
        try:
            c.assign([TopicPartition(t, p, s) for (t, p), (s, _e) in ranges.items()])
            deadline = time.monotonic() + timeout
            while todo:
                if time.monotonic() > deadline:
                    raise classify(
                        self.conf,
                        f"{self.name}: reading {sorted(todo)[:5]} did not reach the end offsets within {timeout:.0f}s",
                        KafkaError(KafkaError._TIMED_OUT),
                        errors,
                        c,
                    )
                for m in c.consume(1000, CONSUME_WAIT_S):
                    tp = (m.topic(), m.partition())
                    if m.error():
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            if tp in todo and (stop_at_eof or m.offset() >= todo[tp]):
                                todo.pop(tp)
                            continue
                        if m.topic() is None and m.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                            continue  # librdkafka looks up the group's coordinator though this reader commits
                            # nothing (explicit offsets): the pipeline's principal needs no ACL on that group
                        if m.error().code() == KafkaError._AUTO_OFFSET_RESET:
                            raise OutOfRange(self.name, tp, m.offset(), m.error().str())
                        raise classify(
                            self.conf,
                            f"{self.name}: read {tp}",
                            m.error(),
                            errors,
                            c,
                            phrase("Read", "Topic", tp[0]) if m.topic() else None,
                        )
                    if tp not in todo:
                        continue
                    if m.offset() >= todo[tp]:
                        todo.pop(tp)
                        continue
                    yield m
                    if m.offset() + 1 >= todo[tp]:
                        todo.pop(tp)
        finally:
            c.close()


def _merged(ranges: list[tuple[int, int]], budget: int) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """Sorted ranges merged where they overlap or touch and the union stays within ``budget`` records: ``(lo, hi,
    the ranges it holds)``."""
    out: list[tuple[int, int, list[tuple[int, int]]]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] and max(hi, out[-1][1]) - out[-1][0] <= budget:
            a, b, part = out[-1]
            out[-1] = (a, max(b, hi), part + [(lo, hi)])
        else:
            out.append((lo, hi, [(lo, hi)]))
    return out


def _windowed(items, submit, window: int):
    """Yield ``(item, future)`` in order, keeping at most ``window`` requests outstanding."""
    pending: deque = deque()
    for it in items:
        pending.append((it, submit(it)))
        if len(pending) >= max(1, window):
            yield pending.popleft()  # the caller waits for this one before the next is sent
    while pending:
        yield pending.popleft()
