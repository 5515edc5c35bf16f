"""How a failed Kafka call is told apart, because a failover decides differently on each: the exceptions and the
classification of librdkafka's (and Kafka's Java client's) errors.

* :class:`KafkaUnavailable` - the cluster did not answer (connection refused, timed out, all brokers down);
* :class:`KafkaAuthError` - it answered and refused us: authentication failed, or an ACL denies an operation
  (the message names the operation and the resource);
* :class:`KafkaConfigError` - our client settings are wrong: an unknown librdkafka property, a bad value, a TLS
  handshake with a plaintext listener or an untrusted certificate;
* :class:`OutOfRange` and :class:`MissingTopics` - a read below a partition's log start, topics that do not exist.

librdkafka reports authentication and TLS failures through its error callback, not through the call that timed
out: every client records those errors (:class:`RecordedErrors`), and :func:`classify` consults them before it says
"unreachable". A Java client's error message is classified the same way, by its exception name (:class:`JavaError`).
Only a client config's ``bootstrap.servers`` is ever put in an error message (:func:`describe_conf`).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable

from mm2_failover.rules.reachability import SourceUnreachable
from mm2_failover.rules.values import TP


class KafkaUnavailable(SourceUnreachable):
    """A cluster could not be reached or did not answer in time."""


class KafkaConfigError(ValueError):
    """The client settings of a cluster are not valid (named property or TLS problem); retrying will not help."""


class KafkaAuthError(KafkaConfigError):
    """The cluster refused us: authentication failed or an ACL denies the operation; retrying will not help."""


class OutOfRange(RuntimeError):
    """A bounded read started below a partition's log start: Kafka answered OFFSET_OUT_OF_RANGE. Never a silent jump
    to the log end (librdkafka's default reset, which reads nothing and reports the end)."""

    def __init__(self, cluster: str, tp: TP, offset: int, detail: str = ""):
        self.tp, self.offset = tp, offset
        super().__init__(
            f"{cluster}: {tp[0]}[{tp[1]}] holds no record at offset {offset} any more (below its log "
            f"start: retention or DeleteRecords){': ' + detail if detail else ''}"
        )


class MissingTopics(LookupError):
    """Topics that should exist do not."""

    def __init__(self, cluster: str, topics: Iterable[str]):
        self.topics = sorted(topics)
        super().__init__(
            f"{cluster}: topic(s) not found: {', '.join(self.topics)} (on a cluster with ACLs, Kafka "
            "also leaves out the topics the principal may not Describe)"
        )


# a cluster that did not answer (or a coordinator not found or loading): unreachable, for now
UNREACHABLE = {
    "_TRANSPORT",
    "_TIMED_OUT",
    "_ALL_BROKERS_DOWN",
    "_RESOLVE",
    "_DESTROY",
    "_MSG_TIMED_OUT",
    "REQUEST_TIMED_OUT",
    "NETWORK_EXCEPTION",
    "COORDINATOR_NOT_AVAILABLE",
    "NOT_COORDINATOR",
    "COORDINATOR_LOAD_IN_PROGRESS",
}
# a partition's leadership moving (an election, a topic just created): Kafka names these retriable
LEADERSHIP = {
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_FOR_PARTITION",
    "UNKNOWN_LEADER_EPOCH",
    "FENCED_LEADER_EPOCH",
    "OFFSET_NOT_AVAILABLE",
    "REPLICA_NOT_AVAILABLE",
}
# authentication failed
AUTH = {"_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED", "ILLEGAL_SASL_STATE", "UNSUPPORTED_SASL_MECHANISM"}


def is_leadership(exc) -> bool:
    """Whether ``exc`` (a KafkaException) is a partition's leadership moving."""
    return bool(getattr(exc, "args", None)) and error_code(exc.args[0]) in LEADERSHIP


def error_code(err) -> str:
    """A librdkafka error's code name (``KafkaError.name()``, a :class:`JavaError`'s too); "" for anything else."""
    return getattr(err, "name", lambda: "")() or ""


def error_text(err) -> str:
    """A librdkafka error's message (``KafkaError.str()``, a :class:`JavaError`'s too), or ``str(err)``."""
    return str(getattr(err, "str", lambda: err)())


def describe_conf(conf: dict) -> str:
    """What may be said about a client config in logs: its bootstrap servers, nothing else."""
    return str(conf.get("bootstrap.servers", "?"))


class RecordedErrors:
    """The errors librdkafka reported through ``error_cb`` (authentication and TLS failures arrive only there)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.recent: deque = deque(maxlen=20)

    def __call__(self, err) -> None:
        with self._lock:
            self.recent.append((error_code(err), error_text(err)))

    def worst(self) -> tuple[str, str] | None:
        with self._lock:
            items = list(self.recent)
        for code, text in reversed(items):
            if code in AUTH:
                return code, text
        for code, text in reversed(items):
            if code == "_SSL" or "SSL handshake failed" in text or "certificate" in text.lower():
                return code, text
        for code, text in reversed(items):
            if code != "_ALL_BROKERS_DOWN":
                return code, text
        return items[-1] if items else None


def classify(
    conf: dict,
    what: str,
    err,
    errors: RecordedErrors | None = None,
    client=None,
    need: "str | dict[str, str] | None" = None,
) -> Exception:
    """The exception for a failed call: authentication/ACL and TLS problems are errors of configuration, never
    'unreachable'; for a timeout or a transport failure, the client's recorded errors say which it was. ``need``:
    the permission the call needs (:func:`mm2_failover.rules.acls.phrase`), or one per resource type
    (``{"Group": ..., "Topic": ...}``) when the refusal's code says which was missing."""
    code, text = error_code(err), error_text(err)
    where = describe_conf(conf)
    if code.endswith("_AUTHORIZATION_FAILED"):
        if isinstance(need, dict):
            need = need.get(code.split("_", 1)[0].capitalize())
        lacks = f"needs {need}" if need else "lacks a permission"
        return KafkaAuthError(
            f"{what}: not authorized at {where} ({code}: {text}). The connection's principal "
            f"{lacks}: grant it (docs/reference.md, 'Least-privilege ACLs', lists what the pipeline "
            "needs), then retry."
        )
    if code in AUTH:
        return KafkaAuthError(
            f"{what}: authentication failed at {where} ({text}). Check the connection's sasl.* "
            "settings (mechanism, user name, password)."
        )
    if code in LEADERSHIP:
        return KafkaUnavailable(
            f"{what}: a partition's leader is moving at {where} ({code}: {text}). Kafka elects "
            "one within seconds: retry (a task's retries do). If it persists, check the brokers' "
            "controller and the topic's under-replicated partitions."
        )
    if code in UNREACHABLE or code == "" or code == "_SSL":
        if client is not None:
            try:
                client.poll(0)  # serve error_cb: authentication/TLS failures are reported there
            except Exception:  # noqa: BLE001 - best effort
                pass
        seen = errors.worst() if errors else None
        if seen and seen[0] in AUTH:
            return KafkaAuthError(
                f"{what}: authentication failed at {where} ({seen[1]}). Check the connection's "
                "sasl.* settings (mechanism, user name, password)."
            )
        if code == "_SSL" or (
            seen and (seen[0] == "_SSL" or "SSL handshake failed" in seen[1] or "certificate" in seen[1].lower())
        ):
            detail = seen[1] if seen else text
            return KafkaConfigError(
                f"{what}: TLS with {where} failed ({detail}). Check security.protocol and the "
                "ssl.* settings (CA file, listener type)."
            )
        detail = seen[1] if seen else f"{code}: {text}"
        return KafkaUnavailable(
            f"{what}: cannot reach {where} ({detail}). Check that the brokers are up and "
            "reachable, and the connection's bootstrap servers."
        )
    return RuntimeError(f"{what}: {code}: {text}")


class JavaError:
    """A Java client's error message, classified like librdkafka's by its exception name."""

    def __init__(self, message: str):
        self.message = message

    def name(self) -> str:
        m = self.message
        if "Authorization" in m:
            return "GROUP_AUTHORIZATION_FAILED"
        if "Authentication" in m or "SaslAuthentication" in m:
            return "_AUTHENTICATION"
        if "Timeout" in m:
            return "_TIMED_OUT"
        return "_FAIL"

    def str(self) -> str:
        return self.message
