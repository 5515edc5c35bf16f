"""How a message names many things and how long things took (pure): the one way a long list is cut short, saying how
many were left out, and the one way a duration is said."""

from __future__ import annotations

from collections.abc import Iterable

LIMIT = 20  # names a message lists before it says how many more


def listed(items: Iterable, limit: int = LIMIT, sep: str = ", ") -> str:
    """``a, b, c (+3 more)``: the first ``limit`` items (as strings) joined by ``sep``, and how many more there are."""
    items = [str(i) for i in items]
    return sep.join(items[:limit]) + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def duration(seconds: float) -> str:
    """``30`` -> "30 s", ``95`` -> "1 min 35 s", ``3600`` -> "1 h", ``7300`` -> "2 h 1 min": how long, as people say
    it (seconds rounded; hours and minutes only past an hour)."""
    if seconds != seconds or seconds in (float("inf"), float("-inf")):  # NaN or infinite: not a duration
        return "unknown"
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        m, r = divmod(s, 60)
        return f"{m} min" + (f" {r} s" if r else "")
    h, m = divmod(s // 60, 60)
    return f"{h} h" + (f" {m} min" if m else "")
