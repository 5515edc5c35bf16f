"""Topic names under MirrorMaker 2's replication policies (pure).

* ``DefaultReplicationPolicy``: replica topic = ``<source-alias><separator><topic>`` (separator ``.``
  unless ``replication.policy.separator`` is set).
* ``IdentityReplicationPolicy``: replica topic = source topic.

The checkpoints topic lives on the target cluster and is ``<source-alias>.checkpoints.internal`` under both
policies with the default separator. With another separator MM2 (KIP-690,
``replication.policy.internal.topic.separator.enabled``, default true) uses it for its internal topics
too: separator ``_`` gives ``<alias>_checkpoints_internal``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CHECKPOINTS_RE = re.compile(r"^(?P<alias>.+)(?P<sep>.)checkpoints(?P=sep)internal$")


def checkpoints_topic(source_alias: str, separator: str = ".") -> str:
    """``DefaultReplicationPolicy.checkpointsTopic`` (and the identity policy's, which inherits it)."""
    return f"{source_alias}{separator}checkpoints{separator}internal"


def source_alias_of_checkpoints_topic(topic: str) -> str | None:
    m = _CHECKPOINTS_RE.match(topic)
    return m.group("alias") if m else None


def is_internal_topic(topic: str) -> bool:
    """Topics that are Kafka's or MM2's own and never failed over."""
    return (
        topic.startswith("__")
        or topic.startswith("mm2-")
        or topic.endswith(".internal")
        or _CHECKPOINTS_RE.match(topic) is not None
        or re.fullmatch(r".*[^A-Za-z0-9](replica|heartbeats)", topic) is not None  # any policy separator
        or topic == "heartbeats"
        or topic.startswith("connect-")
    )


@dataclass(frozen=True)
class ReplicationPolicy:
    source_alias: str
    kind: str = "default"  # "default" | "identity"
    separator: str = "."
    internal_topic_separator_enabled: bool = True  # MM2's replication.policy.internal.topic.separator.enabled

    def __post_init__(self):
        if self.kind not in ("default", "identity"):
            raise ValueError(f"unknown replication policy {self.kind!r}: use 'default' or 'identity'")
        if not self.source_alias:
            raise ValueError("source alias must not be empty")

    def replica_topic(self, source_topic: str) -> str:
        if self.kind == "identity":
            return source_topic
        return f"{self.source_alias}{self.separator}{source_topic}"

    def source_topic(self, replica_topic: str) -> str | None:
        """The source topic a replica topic mirrors, or None when it is not a replica of this alias."""
        if self.kind == "identity":
            return replica_topic
        prefix = f"{self.source_alias}{self.separator}"
        return replica_topic[len(prefix):] if replica_topic.startswith(prefix) else None

    @property
    def checkpoints_topic(self) -> str:
        return checkpoints_topic(self.source_alias, self.separator if self.internal_topic_separator_enabled else ".")


def compile_regex(pattern: str, what: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ValueError(f"{what} {pattern!r} is not a valid regular expression: {e}") from None


def group_selected(group: str, include: re.Pattern, exclude: re.Pattern | None) -> bool:
    """Full-match semantics, like MM2's ``groups`` / ``groups.exclude``."""
    return include.fullmatch(group) is not None and not (exclude and exclude.fullmatch(group))
