"""Topic names under MirrorMaker 2's replication policies (pure), following MM2 4.3's own code
(``DefaultReplicationPolicy``, ``IdentityReplicationPolicy`` and the ``ReplicationPolicy`` interface):

* default policy: replica topic = ``<source-alias><separator><topic>`` (``replication.policy.separator``, ``.``
  unless set; several characters are allowed);
* identity policy: replica topic = source topic, except topics whose name ends with ``heartbeats``, which it names
  like the default policy (``IdentityReplicationPolicy.looksLikeHeartbeat``);
* MM2's own topics use the separator too (KIP-690) unless ``replication.policy.internal.topic.separator.enabled``
  is false, then ``.``: checkpoints ``<alias><s>checkpoints<s>internal`` (on the target), offset syncs
  ``mm2-offset-syncs<s><target-alias><s>internal``;
* internal topics (never failed over): ``__*`` and ``.*`` (Kafka's), MM2's (``mm2*<s>internal`` and checkpoint
  topics), and heartbeats topics (``heartbeats`` after removing every replication hop). Nothing else: a topic named
  ``user-heartbeats`` or ``orders_replica`` is data.

MM2 in dedicated mode keeps its Connect offsets in ``mm2-offsets.<source-alias>.internal`` on the target (always
with dots: that name is the Connect worker's, not the replication policy's).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

HEARTBEATS = "heartbeats"


def checkpoints_topic(source_alias: str, separator: str = ".") -> str:
    """``DefaultReplicationPolicy.checkpointsTopic`` with ``separator`` as the internal separator."""
    return f"{source_alias}{separator}checkpoints{separator}internal"


def mm2_offsets_topic(source_alias: str) -> str:
    """Where MM2 in dedicated mode keeps the MirrorSourceConnector's progress, on the target."""
    return f"mm2-offsets.{source_alias}.internal"


_CHECKPOINTS = re.compile(r"^(?P<alias>.+?)(?P<sep>.+)checkpoints(?P=sep)internal$")


def checkpoint_topic_aliases(topics: Iterable[str]) -> dict[str, str]:
    """The topics that look like some MM2 flow's checkpoints topic, with the alias each names (any separator, one
    character or more): for error messages that list what exists. A run never parses an alias back out of a topic
    name: it derives the topic from the alias."""
    out = {}
    for t in topics:
        m = _CHECKPOINTS.match(t)
        if m:
            out[t] = m.group("alias")
    return out


_OFFSET_SYNCS = re.compile(r"^mm2-offset-syncs(?P<sep>.+?)(?P<target>.+)(?P=sep)internal$")


def offset_syncs_topics(topics: Iterable[str]) -> dict[str, str]:
    """The topics that look like MM2's offset-sync topics, with the target alias each names (any separator)."""
    out = {}
    for t in topics:
        m = _OFFSET_SYNCS.match(t)
        if m:
            out[t] = m.group("target")
    return out


@dataclass(frozen=True)
class ReplicationPolicy:
    source_alias: str
    kind: str = "default"  # "default" | "identity"
    separator: str = "."
    internal_topic_separator_enabled: bool = True  # MM2's replication.policy.internal.topic.separator.enabled
    # failing back: MM2's alias of the *target* cluster, where topics replicated from it came from. A topic on the
    # source named <home_alias><separator><topic> returns home to <topic> on the target (MM2's own
    # MirrorCheckpointTask.renameTopicPartition rule); every other topic is replicated as usual.
    home_alias: str | None = None

    def __post_init__(self):
        if self.kind not in ("default", "identity"):
            raise ValueError(f"unknown replication policy {self.kind!r}: use 'default' or 'identity'")
        if not self.source_alias:
            raise ValueError("source alias must not be empty")
        if not self.separator:
            raise ValueError("replication policy separator must not be empty")
        if self.home_alias is not None:
            if self.kind != "default":
                raise ValueError(
                    "failing back (home_alias) needs the default replication policy: with the identity "
                    "policy a topic does not say which cluster it came from"
                )
            if not self.home_alias or self.home_alias == self.source_alias:
                raise ValueError(
                    f"home_alias {self.home_alias!r} must name the target's alias, not be empty or the "
                    f"source alias {self.source_alias!r}"
                )

    # -- data topics ----------------------------------------------------------------------------------
    def _prefixed(self, source_topic: str) -> bool:
        return self.kind == "default" or source_topic.endswith(HEARTBEATS)

    def replica_topic(self, source_topic: str) -> str:
        home = self._home_prefix
        if home and source_topic.startswith(home) and len(source_topic) > len(home):
            return source_topic[len(home) :]  # came from the target: goes home (one hop)
        if not self._prefixed(source_topic):
            return source_topic
        return f"{self.source_alias}{self.separator}{source_topic}"

    def source_topic(self, replica_topic: str) -> str | None:
        """The source topic a replica topic mirrors, or None when it is not a replica of this alias."""
        if not self._prefixed(replica_topic):
            return replica_topic
        prefix = f"{self.source_alias}{self.separator}"
        if replica_topic.startswith(prefix) and len(replica_topic) > len(prefix):
            return replica_topic[len(prefix) :]
        if self.is_home_topic(replica_topic):
            return f"{self._home_prefix}{replica_topic}"
        return None

    @property
    def _home_prefix(self) -> str | None:
        return f"{self.home_alias}{self.separator}" if self.home_alias else None

    def is_home_topic(self, target_topic: str) -> bool:
        """Failing back: ``target_topic`` is a topic of the target whose records the source holds as
        ``<home_alias><separator><topic>`` - groups return to it from there, by the offset syncs of the
        ``home_alias`` flow read backwards (:meth:`mm2_failover.rules.translate.SyncIndex.back`), not by checkpoints."""
        prefix = f"{self.source_alias}{self.separator}"
        return (
            bool(self.home_alias) and not target_topic.startswith(prefix) and not self.is_internal_topic(target_topic)
        )

    # -- MM2's own topics -----------------------------------------------------------------------------
    @property
    def internal_separator(self) -> str:
        return self.separator if self.internal_topic_separator_enabled else "."

    @property
    def checkpoints_topic(self) -> str:
        return checkpoints_topic(self.source_alias, self.internal_separator)

    def offset_syncs_topic(self, target_alias: str) -> str:
        s = self.internal_separator
        return f"mm2-offset-syncs{s}{target_alias}{s}internal"

    @property
    def mm2_offsets_topic(self) -> str:
        return mm2_offsets_topic(self.source_alias)

    def _original_topic(self, topic: str) -> str:
        """``ReplicationPolicy.originalTopic``: remove every replication hop (default-policy naming)."""
        while True:
            parts = topic.split(self.separator, 1)
            if len(parts) < 2 or not parts[0] or not parts[1]:
                return topic
            topic = parts[1]

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self._original_topic(topic) == HEARTBEATS

    def is_checkpoints_topic(self, topic: str) -> bool:
        s = self.internal_separator
        return topic.endswith(f"{s}checkpoints{s}internal")

    def is_internal_topic(self, topic: str) -> bool:
        """MM2's ``isInternalTopic`` plus heartbeats: never a topic to fail groups over on."""
        # MM2's (mm2-offset-syncs, and the dedicated mode's Connect topics, which always use dots) and checkpoints
        mm2 = topic.startswith("mm2") and topic.endswith((f"{self.internal_separator}internal", ".internal"))
        return (
            topic.startswith(("__", ".")) or mm2 or self.is_checkpoints_topic(topic) or self.is_heartbeats_topic(topic)
        )

    def replica_topics(self, target_topics: Iterable[str]) -> list[str]:
        """The topics of ``target_topics`` that are replicas of this alias's data topics, sorted."""
        return sorted(t for t in target_topics if not self.is_internal_topic(t) and self.source_topic(t) is not None)
