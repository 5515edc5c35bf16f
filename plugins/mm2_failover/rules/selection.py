"""Which consumer groups a run moves: the one place this is decided (pure).

A group is selected when ``groups_regex`` matches its whole id and ``groups_exclude_regex`` (if any) does not, with
Python's ``re`` (``fullmatch``). Everything that enumerates groups - the drain check's scope, the snapshot's source
commits, the empty-group gate, the plan, the report - asks :class:`GroupSelection`; the Spark job does not select
(Java's regex dialect differs: ``\\w`` is ASCII-only there, ``$`` matches before a final line terminator, and
Python-only syntax such as ``(?P<name>...)`` would fail inside Spark).

An empty ``groups_regex`` is refused rather than read as "all" or "none": give ``.*`` to select every group.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field


def compile_pattern(pattern: str, what: str) -> re.Pattern:
    """``pattern`` compiled, or ValueError naming the parameter and Python's own complaint."""
    if not isinstance(pattern, str):
        raise ValueError(f"{what} must be a string (a Python regular expression), not {type(pattern).__name__}")
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ValueError(f"{what} {pattern!r} is not a valid (Python) regular expression: {e}") from None


@dataclass(frozen=True)
class GroupSelection:
    include: str = ".*"
    exclude: str = ""
    _inc: re.Pattern = field(init=False, repr=False, compare=False)
    _exc: re.Pattern | None = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.include == "":
            raise ValueError("groups_regex is empty: give '.*' to select every group, or a pattern for some")
        object.__setattr__(self, "_inc", compile_pattern(self.include, "groups_regex"))
        object.__setattr__(
            self, "_exc", compile_pattern(self.exclude, "groups_exclude_regex") if self.exclude else None
        )

    @classmethod
    def of(cls, params) -> "GroupSelection":
        """The selection of a run's parameters (anything with ``groups_regex``/``groups_exclude_regex``)."""
        return cls(params.groups_regex, params.groups_exclude_regex or "")

    def selects(self, group: str) -> bool:
        return self._inc.fullmatch(group) is not None and not (self._exc and self._exc.fullmatch(group))

    def select(self, groups: Iterable[str]) -> list[str]:
        """The selected groups among ``groups``, sorted, each once."""
        return sorted({g for g in groups if self.selects(g)})
