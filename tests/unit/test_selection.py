"""Group selection (mm2_failover.rules.selection): the one place that decides which groups a run moves."""

from __future__ import annotations

import pytest

from mm2_failover.rules.selection import GroupSelection, compile_pattern


def test_selection_uses_full_match():
    s = GroupSelection("orders")
    assert s.selects("orders")
    assert not s.selects("orders-app")  # not a prefix match
    assert not s.selects("my-orders")  # not a search
    assert GroupSelection(".*").selects("anything") and GroupSelection(".*").selects("")
    ab = GroupSelection("a|b")
    assert ab.selects("a") and ab.selects("b") and not ab.selects("ab")


def test_selection_with_exclude():
    s = GroupSelection(".*", "test")
    assert not s.selects("test")
    assert s.selects("test-1")  # exclude is a full match too
    assert s.selects("my-test")
    s = GroupSelection(".*", "test-.*|tmp")
    assert not s.selects("test-1") and not s.selects("tmp") and s.selects("tmp2")
    assert not GroupSelection("orders.*", "test-.*|tmp").selects("other")  # not included at all


def test_python_semantics_not_java():
    s = GroupSelection(r"\w+-app")
    assert s.selects("caf\u00e9-app")  # Java's \w is ASCII-only
    assert not GroupSelection("app-.*").selects("app-x\n")  # Java's $ matches before a final newline
    assert GroupSelection(r"(?P<name>orders)-\d+").selects("orders-12")  # Python-only syntax


def test_select_sorts_and_dedups():
    assert GroupSelection("a.*").select(["ab", "b", "aa", "ab"]) == ["aa", "ab"]


@pytest.mark.parametrize(
    "inc, exc, what",
    [("", "", "groups_regex is empty"), ("(", "", "groups_regex"), (".*", "[", "groups_exclude_regex")],
)
def test_bad_patterns_name_the_parameter(inc, exc, what):
    with pytest.raises(ValueError, match=what):
        GroupSelection(inc, exc)


def test_of_params():
    from mm2_failover.rules.run_params import RunParams

    s = GroupSelection.of(RunParams(groups_regex="a.*", groups_exclude_regex="ab"))
    assert s.select(["a", "ab", "ac"]) == ["a", "ac"]


def test_a_pattern_that_does_not_compile_is_named_with_pythons_own_complaint():
    assert compile_pattern("orders-.*", "groups_regex").fullmatch("orders-app")
    with pytest.raises(ValueError) as e:
        compile_pattern("orders-(", "groups_regex")
    msg = str(e.value)
    assert msg.startswith("groups_regex 'orders-(' is not a valid (Python) regular expression: ")
    assert "missing )" in msg
    assert e.value.__cause__ is None and e.value.__suppress_context__
