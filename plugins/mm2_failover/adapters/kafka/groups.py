"""A consumer group as its coordinator describes it: its state and members (:class:`GroupState`, :class:`Member`), what
the empty-group gate decides on (:attr:`GroupState.is_safe_to_move`). Read by
:meth:`~mm2_failover.adapters.kafka.cluster.Cluster.describe_groups` (librdkafka, or Kafka's Java client for many
groups: :func:`~mm2_failover.adapters.kafka.java_bridge.describe_with_java`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
        return (
            f"{self.group}: state {self.state}, {len(self.members)} member(s) "
            f"[{'; '.join(m.describe() for m in self.members)}] on hosts {hosts}"
        )
