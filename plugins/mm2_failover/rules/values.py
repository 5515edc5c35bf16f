"""The value types every layer shares: a partition (``TP``) and a committed offset (``Commit``), and their JSON
forms in the run folder's artifacts, and a time's age. One definition each (issue 51): the rules, the adapters and the stages import
them from here."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, NamedTuple

TP = tuple[str, int]  # (topic, partition)


class Commit(NamedTuple):
    """A committed offset and its metadata (Kafka Streams keeps state there; plain consumers leave it empty)."""

    offset: int
    metadata: str = ""

    def same_as(self, other: "Commit | int | None") -> bool:
        """The same offset and metadata (a bare offset: metadata not read, the offset alone)."""
        if other is None:
            return False
        if not isinstance(other, Commit):
            return other == self.offset
        return other.offset == self.offset and (other.metadata or "") == (self.metadata or "")


def tp_map_to_json(m: dict[TP, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for (t, p), o in sorted(m.items()):
        out.setdefault(t, {})[str(p)] = o
    return out


def tp_map_from_json(d: dict[str, dict[str, Any]] | None) -> dict[TP, Any]:
    return {(t, int(p)): o for t, parts in (d or {}).items() for p, o in parts.items()}


def commit_to_json(c: Commit | None) -> dict | None:
    return None if c is None else {"offset": c.offset, "metadata": c.metadata}


def commit_from_json(d) -> Commit | None:
    return None if d is None else Commit(int(d["offset"]), d.get("metadata") or "")


def to_ms(ts: Any) -> int | None:
    """Epoch milliseconds of ``ts`` (epoch ms, an ISO time or a datetime; naive means UTC), None when unknown."""
    if ts is None:
        return None
    if isinstance(ts, str):
        ts = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    if isinstance(ts, datetime):
        return int((ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)).timestamp() * 1000)
    return int(ts)


def age_seconds(ts: Any, now_ms: int) -> float | None:
    """Seconds since ``ts`` (see :func:`to_ms`) at ``now_ms``, None when unknown; never negative (clocks differ):
    readiness's ages (its rule 4), the plan's snapshot age, the archive's age."""
    ms = to_ms(ts)
    return None if ms is None else round(max(0, now_ms - ms) / 1000, 1)
