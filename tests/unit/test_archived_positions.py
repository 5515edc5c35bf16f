"""The archive's reading of the groups' source commits (plan rule 1a's input, `stages/archive.py`): a damaged or
foreign file is named in a warning and never used - MM2's checkpoints answer - never a traceback."""

from __future__ import annotations

import json
import logging

import pytest

from mm2_failover.stages import archive as arc

GOOD = {
    "read_from": "2026-11-28T10:00:00.000+00:00",
    "read_to": "2026-11-28T10:00:01.000+00:00",
    "cluster_id": "src-1",
    "groups": {"app": {"orders": {"0": {"offset": 7, "metadata": ""}}}},
}


@pytest.fixture
def archive(tmp_path, monkeypatch):
    monkeypatch.setenv("MM2_FAILOVER_ARCHIVE", str(tmp_path / "archive"))
    (tmp_path / "archive" / "primary").mkdir(parents=True)
    return tmp_path / "archive"


def write(archive, data):
    (archive / "primary" / arc.POSITIONS).write_text(data if isinstance(data, str) else json.dumps(data))


def test_a_good_reading_is_read(archive):
    write(archive, GOOD)
    when, commits = arc.archived_positions("primary")
    assert when["read_from"] == GOOD["read_from"] and commits["app"][("orders", 0)].offset == 7


def test_no_reading_is_none(archive):
    assert arc.archived_positions("primary") is None


@pytest.mark.parametrize(
    "damage, what",
    [
        ({"groups": None}, "groups is NoneType"),
        ({"read_from": "yesterday"}, "Invalid isoformat"),
        ({"read_to": None}, "read_to None"),
        ({"read_from": "2026-11-28T10:00:00"}, "is not a time with its zone"),
        ({"groups": {"app": {"orders": {"x": {"offset": 1}}}}}, "ValueError"),
    ],
)
def test_a_damaged_reading_is_named_and_never_used(archive, caplog, damage, what):
    write(archive, {**GOOD, **damage})
    with caplog.at_level(logging.WARNING):
        assert arc.archived_positions("primary") is None
    assert what in caplog.text and "positions.json" in caplog.text and "MM2's checkpoints" in caplog.text


def test_a_file_that_is_not_json_is_named_and_never_used(archive, caplog):
    write(archive, "{not json")
    with caplog.at_level(logging.WARNING):
        assert arc.archived_positions("primary") is None
    assert "not valid JSON" in caplog.text


def test_a_reading_of_another_cluster_than_the_archived_syncs_source_is_never_used(archive, caplog):
    sync_dir = archive / "primary" / "offset-syncs"
    sync_dir.mkdir()
    (sync_dir / "manifest.json").write_text(
        json.dumps({"topic": "mm2-offset-syncs.backup.internal", "cluster_id": "src-2", "location": "source"})
    )
    write(archive, GOOD)
    with caplog.at_level(logging.WARNING):
        assert arc.archived_positions("primary") is None
    assert "src-1" in caplog.text and "src-2" in caplog.text
