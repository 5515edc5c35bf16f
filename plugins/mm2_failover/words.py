"""How a message names many things (pure): the one way a long list is cut short, saying how many were left out."""

from __future__ import annotations

from collections.abc import Iterable

LIMIT = 20  # names a message lists before it says how many more


def listed(items: Iterable, limit: int = LIMIT, sep: str = ", ") -> str:
    """``a, b, c (+3 more)``: the first ``limit`` items (as strings) joined by ``sep``, and how many more there are."""
    items = [str(i) for i in items]
    return sep.join(items[:limit]) + (f" (+{len(items) - limit} more)" if len(items) > limit else "")
