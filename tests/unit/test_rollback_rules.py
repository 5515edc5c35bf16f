"""Rollback rules (mm2_failover.rules.rollback, pure), grouped by rule."""

from __future__ import annotations

from mm2_failover.rules import rollback as rb
from mm2_failover.rules.rollback import Backup, BackupEntry
from mm2_failover.rules.values import Commit
from mm2_failover.stages.roll_back import pending_elsewhere

T = "primary.t"


def backup(**groups) -> Backup:
    return Backup("t", "h:1", "cid", "mm2_failover", "r", {g: dict(p) for g, p in groups.items()})


B = backup(
    a={(T, 0): BackupEntry(Commit(5), Commit(40)), (T, 1): BackupEntry(None, Commit(41))},
    b={(T, 0): BackupEntry(None, Commit(10, "m"))},
)


# ------------------------------------------------------------------------------------------ rule 3: nothing moved since


def test_commits_as_the_failover_left_them_have_not_moved():
    now = {"a": {(T, 0): Commit(40), (T, 1): Commit(41)}, "b": {(T, 0): Commit(10, "m")}}
    assert rb.moved_since_failover(B, now) == []


def test_already_rolled_back_partitions_have_not_moved_either():
    assert rb.moved_since_failover(B, {"a": {(T, 0): Commit(5)}}) == []


def test_a_consumer_commit_since_the_failover_is_named():
    moved = rb.moved_since_failover(B, {"a": {(T, 0): Commit(40), (T, 1): Commit(60)}, "b": {(T, 0): Commit(10)}})
    assert [(g, tp, got) for g, tp, _e, got in moved] == [("a", (T, 1), Commit(60)), ("b", (T, 0), Commit(10))]
    text = rb.describe_moved(moved)
    assert "a primary.t[1]: the failover wrote 41, now 60 (before the failover: no commit)" in text
    assert "b primary.t[0]: the failover wrote 10 ('m'), now 10" in text  # metadata differs


def test_groups_resuming_from_a_journal_are_not_checked():
    assert rb.moved_since_failover(B, {}, skip={"a", "b"}) == []


# ------------------------------------------------------------------------------------------ rule 4: restore


def test_restores_offsets_and_removes_commits_that_did_not_exist():
    acts = rb.actions(B, {"a": {(T, 0): Commit(40), (T, 1): Commit(41)}, "b": {(T, 0): Commit(10, "m")}})
    assert (acts["a"].restore, acts["a"].remove, acts["a"].needs_delete) == ({(T, 0): Commit(5)}, [(T, 1)], True)
    assert (acts["b"].restore, acts["b"].remove) == ({}, [(T, 0)])


def test_nothing_to_do_when_the_target_already_holds_the_backup():
    assert rb.actions(B, {"a": {(T, 0): Commit(5)}}) == {}
    assert rb.remaining(B, {"a": {(T, 0): Commit(5)}}) == []


def test_commits_outside_the_backup_are_kept_when_the_group_must_be_deleted():
    current = {(T, 0): Commit(40), (T, 1): Commit(41), ("other", 0): Commit(777, "keep")}
    assert rb.recommit_after_delete(B, "a", current) == {("other", 0): Commit(777, "keep"), (T, 0): Commit(5)}


# ------------------------------------------------------------------------------------------ rule 5: journal names


def test_journal_names_are_hashes_of_the_group_id():
    names = {rb.journal_name(g) for g in ("../../backup", "a" * 300, "a", "b")}
    assert len(names) == 4
    assert all("/" not in n and len(n) < 100 and n.endswith(".json") for n in names)


# ------------------------------------------------------------------------------------------ rule 6: one journal per backup


def test_one_journal_folder_per_backup_whoever_reads_it(tmp_path):
    a = backup()
    same = Backup.from_dict(a.as_dict(), "a copy read from another path")
    assert rb.journal_dir(tmp_path, a) == rb.journal_dir(tmp_path, same)
    other = Backup(a.taken_at, a.cluster, a.cluster_id, a.dag_id, "another-run", a.groups)
    assert rb.journal_dir(tmp_path, other) != rb.journal_dir(tmp_path, a)
    assert rb.journal_dir(tmp_path, a).parent.name == a.cluster_id  # per target cluster


def test_another_backups_pending_journal_is_found_an_empty_one_is_not(tmp_path):
    import json

    a, b = backup(), Backup("t2", "c", "cid", "d", "r2", {})
    assert pending_elsewhere(tmp_path, a) == []
    jb = rb.journal_dir(tmp_path, b)
    jb.mkdir(parents=True)
    (jb / rb.POINTER).write_text(json.dumps({"backup_path": "/runs/b/backup.json"}))
    assert pending_elsewhere(tmp_path, a) == []  # a pointer alone: nothing pending
    (jb / rb.journal_name("g")).write_text("{}")
    assert pending_elsewhere(tmp_path, a) == [{"backup_path": "/runs/b/backup.json", "journal": str(jb), "groups": 1}]
    assert pending_elsewhere(tmp_path, b) == []  # its own journal is resumed, not refused
