"""What the command line prints (``-o table|json|csv``) and the plan per partition it prints (pure)."""

import csv
import io
import json

import pytest

from mm2_failover.rules.listing import Listing, render, table
from mm2_failover.rules.report import PLAN_LINE_COLUMNS, PLAN_LINE_DATA, plan_lines

COLS = [("group", "GROUP"), ("partition", "PARTITION"), ("offset", "NEW-OFFSET")]
ROWS = [{"group": f"g{i:02}", "partition": i % 3, "offset": None if i == 4 else 100 * i} for i in range(25)]


def test_a_table_is_aligned_under_upper_case_headers_and_cut_naming_where_the_rest_is():
    lines = table(COLS, ROWS, limit=20, more_in="plan.json")
    assert lines[0].split() == ["GROUP", "PARTITION", "NEW-OFFSET"]
    assert len(lines) == 1 + 20 + 1 and lines[-1] == "... 5 more in plan.json"
    assert lines[5].split() == ["g04", "1", "-"]  # none shown as '-'
    # numbers to the right, text to the left: every row's columns start and end where the header's do
    assert {len(line) for line in lines[1:21]} == {len(lines[0])}
    assert table(COLS, ROWS, limit=None)[-1].split() == ["g24", "0", "2400"]


def test_json_and_csv_keep_every_row_and_the_summary():
    shown = Listing(COLS, ROWS, ["plan: 25 rows"], {"groups": 25}, more_in="plan.json")
    data = json.loads(render(shown, "json"))
    assert data["groups"] == 25 and data["rows"] == ROWS
    got = list(csv.DictReader(io.StringIO(render(shown, "csv"))))
    assert len(got) == 25 and got[4] == {"group": "g04", "partition": "1", "offset": ""}
    text = render(shown, "table")
    assert text.startswith("plan: 25 rows\n\nGROUP") and "... 5 more in plan.json" in text


def test_a_result_without_rows_prints_its_summary():
    shown = Listing([], lines=["snapshot: /x (captured t)"], summary={"snapshot": "/x", "lost": ["a"]})
    assert render(shown, "table") == "snapshot: /x (captured t)\n"
    assert list(csv.reader(io.StringIO(render(shown, "csv")))) == [
        ["key", "value"],
        ["snapshot", "/x"],
        ["lost", '["a"]'],
    ]
    with pytest.raises(ValueError, match="expected one of table, json, csv"):
        render(shown, "yaml")


def row(p, planned, rule="exact_sync", action="commit", reason="", checkpoint=5):
    return {
        "group": "g",
        "topic": "backup.t",
        "partition": p,
        "planned_offset": planned,
        "downstream_offset": checkpoint,
        "rule": rule,
        "action": action,
        "reason": reason,
    }


def test_plan_lines_say_how_each_re_read_figure_is_known():
    rows = [
        row(3, 40),
        row(0, 10),
        row(1, 20, rule="checkpoint"),
        row(2, 30, rule="sync_floor"),
        row(4, None, action="skip", reason="no_checkpoint", checkpoint=None),
        row(5, 50, rule="checkpoint"),
    ]
    reread = [
        {"group": "g", "topic": "backup.t", "partition": 0, "reread": 0, "exact": True},
        {"group": "g", "topic": "backup.t", "partition": 1, "reread": 7, "exact": False},
        {"group": "g", "topic": "backup.t", "partition": 2, "reread": None, "reread_at_least": 3, "exact": False},
        {"group": "g", "topic": "backup.t", "partition": 3, "reread": 4, "exact": True},
        {"group": "g", "topic": "backup.t", "partition": 5, "reread": None, "exact": False},
    ]
    lines = plan_lines(rows, reread)
    assert [x["partition"] for x in lines] == [0, 1, 2, 3, 4, 5]  # kafka-consumer-groups' order
    assert [x["re_read"] for x in lines] == ["0", "~7", ">=3", "4", "-", "?"]
    assert [x["new_offset"] for x in lines] == [10, 20, 30, 40, None, 50]
    assert lines[4]["rule"] == "skip: no_checkpoint" and lines[4]["reread"] is None
    assert [x["reread_exact"] for x in lines] == [True, False, False, True, False, False]
    assert {k for k, _h in PLAN_LINE_COLUMNS} <= set(lines[0]) and set(PLAN_LINE_DATA) <= set(lines[0])
