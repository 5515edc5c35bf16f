"""The writer lock kept in the target cluster itself (``MM2_FAILOVER_LOCK=kafka``): every writer - an Airflow worker
on any host, the CLI on an operator's laptop - reaches the target, so every writer can see who holds it. The rules
(claim, renew, release, when a holder must stop) are :mod:`mm2_failover.rules.lease`'s; this module reads and writes the
records, renews the lease in a thread and stops the writes of a holder that lost it.

The topic (``MM2_FAILOVER_LOCK_TOPIC``, default ``mm2-failover.locks``): one partition, the broker's time on every
record (``message.timestamp.type=LogAppendTime``), kept 7 days (``cleanup.policy=delete``). It is created on first
use when the principal may (Create on the topic), else an operator creates it (docs/reference.md, least-privilege ACLs: Read
and Write on it, Describe of its configuration). A topic that stamps the clients' time, is compacted or keeps its
records for less than the longest hold plus a lease is refused, naming the setting (:func:`lease.topic_problems`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid

import confluent_kafka.admin
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, NewTopic

from mm2_failover.adapters.kafka.cluster import CONSUME_WAIT_S
from mm2_failover.adapters.kafka.kafka_errors import KafkaConfigError
from mm2_failover.adapters.locks import Locked
from mm2_failover.adapters.runfolder import now_iso
from mm2_failover.rules import lease

log = logging.getLogger(__name__)

TOPIC_CONFIG = {
    "cleanup.policy": "delete",
    "retention.ms": str(7 * 24 * 3600 * 1000),
    "retention.bytes": "-1",
    "message.timestamp.type": "LogAppendTime",
    "segment.ms": str(3600 * 1000),
}


class LockLost(RuntimeError):
    """This writer's lease on the target ran out or was taken: it must not write any more (nothing after this was
    written). The message says why and what to do."""


class KafkaLease:
    """Hold the lease of target ``name`` (its cluster id) in ``topic`` of the cluster ``conf`` points at.

    ``lease_s``: how long a granted record holds it; ``margin_s``: how long before that the holder stops writing (rule
    4: more than one write's timeout); ``renew_s``: how often it renews."""

    def __init__(
        self,
        conf: dict,
        topic: str,
        name: str,
        owner: dict,
        lease_s: float = 60.0,
        margin_s: float = 20.0,
        renew_s: float = 10.0,
        write_timeout_s: float = 15.0,
        poll_s: float = 1.0,
    ):
        lease.check_timing(lease_s, margin_s, renew_s, write_timeout_s)
        self.conf, self.topic, self.name = dict(conf), topic, name
        self.who = {**owner, "host": socket.gethostname(), "pid": os.getpid(), "since": now_iso()}
        self.lease_ms, self.margin_s, self.renew_s, self.poll_s = int(lease_s * 1000), margin_s, renew_s, poll_s
        self.holder = uuid.uuid4().hex
        self.token = -1
        self._valid_until = 0.0
        self._sent = 0.0  # when the newest granted record was sent (monotonic)
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer = None
        self._consumer = None
        self._recs: list[lease.Record] = []
        self._pos = -1

    # -- the records ---------------------------------------------------------------------------------------------
    def _client_conf(self) -> dict:
        return {k: v for k, v in self.conf.items() if not k.startswith(("group.", "enable.", "auto."))}

    def ensure_topic(self) -> None:
        """Create the topic if it is missing; refuse one whose records carry the clients' time."""
        admin = confluent_kafka.admin.AdminClient(self._client_conf())
        md = admin.list_topics(timeout=15)
        if self.topic not in md.topics:
            brokers = len(md.brokers)
            fut = admin.create_topics([NewTopic(self.topic, 1, min(3, brokers), config=TOPIC_CONFIG)])[self.topic]
            try:
                fut.result(30)
                log.info("created the writer-lock topic %s (%s)", self.topic, TOPIC_CONFIG)
            except KafkaException as e:
                if "TOPIC_ALREADY_EXISTS" not in str(e):
                    raise KafkaConfigError(
                        f"the writer-lock topic {self.topic} does not exist and could not be created ({e}): create it "
                        "(docs/architecture.md, 'One writer across hosts') or let the principal create it"
                    ) from None
        cfg = self._topic_config(admin, ConfigResource(ConfigResource.Type.TOPIC, self.topic))
        problems = lease.topic_problems(
            {k: "" if e.value is None else str(e.value) for k, e in cfg.items()}, self.lease_ms
        )
        if problems:
            raise KafkaConfigError(
                f"the writer-lock topic {self.topic} cannot keep the lease safely: "
                + "; ".join(problems)
                + f". Set it with kafka-configs --alter --entity-type topics --entity-name {self.topic} --add-config "
                "<setting>=<value>, or point MM2_FAILOVER_LOCK_TOPIC at a topic of its own"
            )

    def _topic_config(self, admin, res, within_s: float = 30.0) -> dict:
        """The topic's configuration. A topic just created (here or by a writer on another host) may be unknown for
        a moment to the broker asked - its metadata reaches the broker after the controller created the topic - so
        UNKNOWN_TOPIC_OR_PART is asked again for up to ``within_s``; any other error is the caller's."""
        deadline = time.monotonic() + within_s
        while True:
            try:
                return admin.describe_configs([res])[res].result(within_s)
            except KafkaException as e:
                err = e.args[0] if e.args else None
                if not isinstance(err, KafkaError) or err.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise
                if time.monotonic() >= deadline:
                    raise KafkaConfigError(
                        f"the writer-lock topic {self.topic} is not known to the target's brokers {within_s:.0f} s "
                        f"after it was created or listed ({err.str()}: UNKNOWN_TOPIC_OR_PART): check the target "
                        "cluster's controller and brokers (kafka-topics --describe --topic "
                        f"{self.topic}), then re-run"
                    ) from None
            time.sleep(0.25)

    def _produce(self, op: str) -> None:
        if self._producer is None:
            self._producer = Producer(
                {**self._client_conf(), "acks": "all", "enable.idempotence": True, "linger.ms": 0}
            )
        errors: list = []
        value = json.dumps({"op": op, "holder": self.holder, "lease_ms": self.lease_ms, "who": self.who})
        self._producer.produce(
            self.topic,
            key=self.name.encode(),
            value=value.encode(),
            partition=0,
            on_delivery=lambda err, _m: errors.append(err) if err else None,
        )
        left = self._producer.flush(15)
        if left or errors:
            raise OSError(f"the {op} of the writer lock was not written to {self.topic}: {errors or 'timed out'}")

    def records(self) -> list[lease.Record]:
        """This lock's records, in log order, up to the end of the log now (read on from where the last call ended:
        one consumer per lease, so a renewal reads only what is new)."""
        tp = TopicPartition(self.topic, 0)
        if self._consumer is None:
            self._consumer = Consumer(
                {
                    **self._client_conf(),
                    "group.id": f"mm2-failover-lock-reader-{self.holder}",
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                }
            )
        c = self._consumer
        lo, hi = c.get_watermark_offsets(tp, timeout=15, cached=False)
        if self._pos < lo or self._pos < 0:  # the first read, or retention removed what was read (rule 6)
            self._recs, self._pos = [], lo
            c.assign([TopicPartition(self.topic, 0, lo)])
        deadline = time.monotonic() + 30
        while self._pos < hi:
            if time.monotonic() > deadline:
                raise OSError(f"reading the writer-lock topic {self.topic} to offset {hi} timed out at {self._pos}")
            for m in c.consume(500, CONSUME_WAIT_S):  # (cluster.py: a short wait, more calls)
                if m.error():
                    continue
                self._pos = m.offset() + 1
                if m.key() != self.name.encode():
                    continue
                try:
                    v = json.loads(m.value())
                    self._recs.append(
                        lease.Record(
                            str(v["op"]),
                            str(v["holder"]),
                            int(m.timestamp()[1]),
                            int(v.get("lease_ms") or 0),
                            m.offset(),
                            v.get("who"),
                        )
                    )
                except (ValueError, KeyError, TypeError):
                    log.warning("writer-lock record %s@%d is not a lock record: ignored", self.topic, m.offset())
        return list(self._recs)

    def state(self) -> tuple[lease.State, dict[int, bool], list[lease.Record]]:
        recs = self.records()
        s, granted = lease.replay(recs)
        return s, granted, recs

    def _mine_granted(self) -> tuple[bool, lease.State]:
        """Whether this writer's newest record (the one just written) was granted, and the state after all."""
        s, granted, recs = self.state()
        mine = [r for r in recs if r.holder == self.holder]
        return bool(mine and granted.get(mine[-1].offset)), s

    # -- the lease ------------------------------------------------------------------------------------------------
    def acquire(self, wait_s: float) -> dict:
        """Claim until granted (then renew in a thread) or ``wait_s`` passed (:class:`Locked` naming the holder)."""
        self.ensure_topic()
        deadline = time.monotonic() + max(0.0, wait_s)
        said = False
        while True:
            sent = time.monotonic()  # a claim every poll: the replay, not this host's clock, decides (rule 1)
            self._produce(lease.CLAIM)
            ok, s = self._mine_granted()
            if ok:
                self.token, self._sent = s.token, sent
                self._valid_until = lease.valid_until(sent, self.lease_ms, self.margin_s)
                self._thread = threading.Thread(target=self._renew_loop, name="mm2-lock-renew", daemon=True)
                self._thread.start()
                log.info(
                    "writer lock of target %s taken (lease %d ms, token %d, topic %s)",
                    self.name,
                    self.lease_ms,
                    self.token,
                    self.topic,
                )
                return {**self.who, "token": self.token}
            if time.monotonic() >= deadline:
                raise Locked(
                    f"another writer holds the lock of target cluster {self.name} (topic {self.topic}): "
                    f"{s.who}, its lease until {s.expires_ms} (broker time, ms). Waited {wait_s:.0f} s. "
                    "Let it finish (or stop it: its lease then runs out by itself), then retry."
                )
            if not said:
                log.warning(
                    "waiting up to %.0f s for the writer lock of target %s held by %s", wait_s, self.name, s.who
                )
                said = True
            time.sleep(self.poll_s)

    def _renew_loop(self) -> None:
        while not self._stop.wait(max(0.0, self._sent + self.renew_s - time.monotonic())):
            sent = self._sent = time.monotonic()
            try:
                self._produce(lease.RENEW)
                ok, s = self._mine_granted()
            except Exception as e:  # noqa: BLE001 - not renewed: the lease runs out on its own (rule 4)
                log.warning(
                    "writer lock of target %s not renewed (%s): it runs out in %.1f s unless a renewal succeeds",
                    self.name,
                    e,
                    self._valid_until - time.monotonic(),
                )
                continue
            if not ok:
                self._lost = (
                    f"its renewal was not granted: the lease had run out and {s.who} holds it now"
                    if s.holder
                    else "its renewal was not granted: the lease had run out"
                )
                log.error("writer lock of target %s LOST: %s", self.name, self._lost)
                return
            self._valid_until = lease.valid_until(sent, self.lease_ms, self.margin_s)

    def check(self) -> None:
        """Before every write: :class:`LockLost` once this writer may no longer write (rule 4)."""
        left = self._valid_until - time.monotonic()
        if self._lost or left <= 0:
            why = self._lost or (
                f"its lease ran out {-left:.1f} s ago without a renewal (the broker unreachable, or "
                "this process paused)"
            )
            raise LockLost(
                f"this writer no longer holds the lock of target cluster {self.name}: {why}. Nothing more "
                "was written; another writer may be writing now. Re-run the task: it converges to the plan "
                "(apply writes only what differs)."
            )

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        try:
            if not self._lost:
                self._produce(lease.RELEASE)
        except Exception as e:  # noqa: BLE001 - not released: it runs out by itself
            log.warning(
                "writer lock of target %s not released (%s): it runs out within %d ms", self.name, e, self.lease_ms
            )
        finally:
            if self._producer is not None:
                self._producer.flush(5)
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None
