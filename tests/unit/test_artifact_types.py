"""Every artifact of a run folder round-trips through its type (issue 32): saved by ``RunFolder.save_<x>``, read
back by ``RunFolder.load_<x>`` equal to what was saved - and a file of another version (a field missing, a field of
the wrong shape) is refused naming the file, never half-read."""

from __future__ import annotations

import json

import pytest

from mm2_failover.adapters.runfolder import RunFolder, RunFolderError, Snapshot, SourceState
from mm2_failover.rules import audit
from mm2_failover.rules import plan as planmod
from mm2_failover.rules.drain import DrainVerdict
from mm2_failover.rules.plan import Plan, PlanRecord, PlanRow
from mm2_failover.rules.rollback import Backup, BackupEntry
from mm2_failover.rules.values import Commit


def snapshot() -> Snapshot:
    return Snapshot(
        captured_at="2026-11-25T23:00:00+00:00",
        checkpoints_topics={"primary": "primary.checkpoints.internal"},
        checkpoints_end={("primary.checkpoints.internal", 0): 12},
        checkpoints_start={("primary.checkpoints.internal", 0): 3},
        replica_partitions={"primary.orders": 2},
        replica_start={("primary.orders", 0): 0, ("primary.orders", 1): 5},
        replica_end={("primary.orders", 0): 40, ("primary.orders", 1): 41},
        sources={
            "primary": SourceState("primary", True, {("orders", 0): 40}, {"app": {("orders", 0): Commit(7, "m")}}),
            "dc2": SourceState("dc2", False),
        },
        target_cluster_id="abc",
        syncs={"primary": {"topic": "mm2-offset-syncs.backup.internal", "end": {"0": 9}}},
    )


def drain() -> DrainVerdict:
    return DrainVerdict(
        True,
        True,
        rows=[{"alias": "primary", "topic": "orders", "partition": 0, "state": "drained"}],
        notes=["a note"],
        groups=["app"],
        topics=["orders"],
        rpo={"seconds": 3},
        disaster_aliases=["dc2"],
    )


def audited() -> audit.Audit:
    return audit.Audit(
        "/etc/mm2.properties",
        [
            audit.Finding("isolation", audit.WARNING, "reads uncommitted", "primary"),
            audit.Finding("rpo", audit.OK, "fine", "dc2"),
        ],
    )


def plan_record() -> PlanRecord:
    rows = [
        PlanRow(
            "primary",
            "app",
            "primary.orders",
            0,
            7,
            6,
            None,
            6,
            planmod.COMMIT,
            rule="exact_sync",
            source_position=7,
            exact_offset=6,
        ),
        PlanRow(
            "primary",
            "app",
            "primary.orders",
            1,
            None,
            None,
            3,
            None,
            planmod.SKIP,
            reason=planmod.NO_CHECKPOINT,
            position_at_least=4,
        ),
    ]
    return PlanRecord(
        Plan(rows),
        "2026-11-25T23:01:00+00:00",
        {"groups_regex": "app"},
        ["not proven: x"],
        "2026-11-25T23:00:00+00:00",
        60.5,
    )


def backup() -> Backup:
    return Backup(
        "2026-11-25T23:02:00+00:00",
        "127.0.0.1:9092",
        "abc",
        "mm2_failover",
        "r1",
        {
            "app": {
                ("primary.orders", 0): BackupEntry(None, Commit(6, "")),
                ("primary.orders", 1): BackupEntry(Commit(2, "x"), Commit(3, "")),
            }
        },
    )


def report():
    from mm2_failover.rules.report import build_report

    rec = plan_record()
    rep = build_report(
        dag_id="mm2_failover",
        run_id="r1",
        params={"groups_regex": "app"},
        plan=rec.plan,
        committed={"app": {("primary.orders", 0): 6}},
        log_end={("primary.orders", 0): 40},
        mismatches=[planmod.Mismatch("app", "primary.orders", 0, 6, 5)],
        warnings=["w"],
        snapshot={"captured_at": "2026-11-25T23:00:00+00:00", "age_seconds": 60.5},
    )
    rep.artifacts, rep.rpo, rep.moved_since = "/runs/r1", {"seconds_since_newest_replicated_record": 3}, {"g": ["x"]}
    return rep


def drill_report():
    from mm2_failover.rules import drill

    return drill.build_drill_report(
        dag_id="mm2_failover_drill",
        run_id="d1",
        params={"groups_regex": ".*"},
        snapshot=snapshot().as_dict(),
        plan_rows=plan_record().plan.as_dicts(),
        checkpoints=[],
        drain_rows=drain().rows,
        live_target_groups=["app"],
        source_commits={("app", "primary.orders", 0): 7},
        selected_source_groups=["app", "never"],
        writes={"prefix": "drill-", "applied": {}},
        finished_at="2026-11-25T23:03:00+00:00",
        source_aliases=["primary"],
    )


def approval_decision():
    from mm2_failover.rules import approval

    return approval.Decision(
        approval.APPROVED,
        approval.plan_hash(b"plan"),
        "2026-11-25T23:01:30+00:00",
        "2026-11-25T23:01:50+00:00",
        "admin",
        3600,
    )


CASES = {  # kind: (an instance, save, load, its path, a field it cannot do without)
    "snapshot": (snapshot, "save_snapshot", "load_snapshot", "snapshot", "replica_log_end"),
    "drain": (drain, "save_drain", "load_drain", "drain", "disaster_aliases"),
    "audit": (audited, "save_audit", "load_audit", "audit", "mm2_config"),
    "plan": (plan_record, "save_plan", "load_plan", "plan_json", "translation_notes"),
    "approval": (approval_decision, "save_approval", "load_approval", "approval", "status"),
    "backup": (backup, "save_backup", "load_backup", "backup", "groups"),
    "report": (report, "save_report", "load_report", "report_json", "moved_since"),
    "drill report": (drill_report, "save_drill", "load_drill", "drill_json", "source_alias"),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_an_artifact_read_back_equals_what_was_saved(tmp_path, kind):
    make, save, load, _path, _needed = CASES[kind]
    f = RunFolder(tmp_path)
    getattr(f, save)(make())
    assert getattr(f, load)() == make()


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_file_of_another_version_is_refused_naming_the_file(tmp_path, kind):
    make, save, load, path, needed = CASES[kind]
    f = RunFolder(tmp_path)
    getattr(f, save)(make())
    p = getattr(f, path)
    data = json.loads(p.read_text())
    del data[needed]
    p.write_text(json.dumps(data))
    with pytest.raises(RunFolderError) as e:
        getattr(f, load)()
    assert str(p) in str(e.value)


def test_the_plans_counts_and_rules_are_derived_from_its_rows_not_read_back(tmp_path):
    f = RunFolder(tmp_path)
    f.save_plan(plan_record())
    data = json.loads(f.plan_json.read_text())
    assert data["counts"] == {planmod.COMMIT: 1, planmod.CLAMP: 0, planmod.SKIP: 1} and data["rules"] == {
        "exact_sync": 1
    }
    data["counts"] = {"commit": 99}
    f.plan_json.write_text(json.dumps(data))
    assert f.load_plan().plan.counts()[planmod.COMMIT] == 1


def test_the_plans_rows_are_a_typed_parquet_file_that_plan_json_names_by_its_hash(tmp_path):
    """Issue 33 item 6: plan.json is the plan's summary (36 MB of JSON at 10k groups x 10 partitions before); its rows
    are plan_rows.parquet, written first, one explicit type per PlanRow field (None kept), and plan.json names the
    file, its row count and its SHA-256 - what the approval's hash of plan.json therefore covers."""
    import hashlib

    import pyarrow.parquet as pq

    f = RunFolder(tmp_path)
    f.save_plan(plan_record())
    data = json.loads(f.plan_json.read_text())
    assert "rows" not in data and data["rows_file"] == "plan_rows.parquet" and data["row_count"] == 2
    rows_file = tmp_path / "plan_rows.parquet"
    assert data["rows_sha256"] == hashlib.sha256(rows_file.read_bytes()).hexdigest()
    table = pq.read_table(rows_file)
    assert {c: str(t) for c, t in zip(table.schema.names, table.schema.types)} == planmod.ROW_TYPES
    assert table.to_pylist() == plan_record().plan.as_dicts()
    assert (tmp_path / "plan.csv").read_text() == "app,primary.orders,0,6\n"
    assert RunFolder(tmp_path).load_plan() == plan_record()


def test_every_plan_row_field_has_one_parquet_type():
    from dataclasses import fields

    assert list(planmod.ROW_TYPES) == [x.name for x in fields(PlanRow)]
    assert set(planmod.ROW_TYPES.values()) == {"int64", "string"}
    empty = Plan([])
    assert Plan.from_columns(empty.columns()) == empty


@pytest.mark.parametrize("damage", ["other rows", "truncated", "gone", "named elsewhere"])
def test_a_plan_whose_rows_are_not_the_file_plan_json_names_is_refused_naming_the_file(tmp_path, damage):
    """A plan is approved by the hash of plan.json, which names its rows by theirs: rows replaced, damaged or
    missing are never read as the plan (apply would write offsets nobody approved)."""
    f = RunFolder(tmp_path)
    f.save_plan(plan_record())
    rows_file = tmp_path / "plan_rows.parquet"
    if damage == "other rows":
        other = plan_record()
        other.plan.rows[0].planned_offset = 99
        RunFolder(tmp_path / "other").save_plan(other)
        rows_file.write_bytes((tmp_path / "other" / "plan_rows.parquet").read_bytes())
    elif damage == "truncated":
        rows_file.write_bytes(rows_file.read_bytes()[:40])
    elif damage == "named elsewhere":  # plan.json pointing at a file outside the folder, with that file's hash
        import hashlib

        outside = tmp_path.parent / f"{tmp_path.name}-rows.parquet"
        outside.write_bytes(rows_file.read_bytes())
        data = json.loads(f.plan_json.read_text())
        data["rows_file"] = f"../{outside.name}"
        data["rows_sha256"] = hashlib.sha256(outside.read_bytes()).hexdigest()
        f.plan_json.write_text(json.dumps(data))
        rows_file = f.plan_json
    else:
        rows_file.unlink()
    with pytest.raises(RunFolderError) as e:
        RunFolder(tmp_path).load_plan()
    assert str(rows_file) in str(e.value) and "start a new run folder" in str(e.value)


def test_absent_optional_artifacts_are_none_and_a_missing_plan_says_which_step_makes_it(tmp_path):
    f = RunFolder(tmp_path)
    assert all(
        load() is None
        for load in (f.load_drain, f.load_audit, f.load_backup, f.load_report, f.load_drill, f.load_approval)
    )
    with pytest.raises(RunFolderError, match="plan.json"):
        f.load_plan()


def test_the_reports_rows_per_partition_are_a_typed_parquet_file_named_by_report_json(tmp_path):
    """Issue 33 item 6: report.json keeps the totals, the groups and the warnings; its rows per partition (65-83 MB of
    JSON at 10k groups x 10 partitions) are report_partitions.parquet, written first, with one explicit type per
    column (report.PARTITION_COLUMNS: every key of a row, no other), and read back equal - None, False and 0 kept."""
    import pyarrow.parquet as pq

    from mm2_failover.adapters.runfolder import REPORT_PARTITIONS, REPORT_STALE
    from mm2_failover.rules.report import PARTITION_COLUMNS, STALE_COLUMNS

    rep = report()
    assert all(set(p) == set(PARTITION_COLUMNS) for p in rep.partitions) and rep.partitions
    rep.stale_checkpoints = [
        {"group": "app", "topic": "primary.orders", "partition": 0, "source_committed": 9, "checkpoint_upstream": 7}
    ]
    f = RunFolder(tmp_path)
    f.save_report(rep)
    data = json.loads(f.report_json.read_text())
    assert data["partitions"] == REPORT_PARTITIONS and data["totals"] == rep.totals
    assert data["stale_checkpoints"] == REPORT_STALE and pq.read_schema(tmp_path / REPORT_STALE).names == list(
        STALE_COLUMNS
    )
    assert f.load_report().stale_checkpoints == rep.stale_checkpoints
    schema = pq.read_schema(tmp_path / REPORT_PARTITIONS)
    assert {n: str(schema.field(n).type) for n in schema.names} == {
        n: {"string": "string", "int64": "int64", "bool": "bool"}[t] for n, t in PARTITION_COLUMNS.items()
    }
    assert f.load_report().partitions == rep.partitions
    assert [p["verified"] for p in f.load_report().partitions] == [False, None]
    assert f.load_report(partitions=False).partitions == [] and f.load_report(partitions=False).groups == rep.groups
    assert f.parquet_rows(REPORT_PARTITIONS, "", limit=1) == rep.partitions[:1]


def test_a_report_whose_rows_are_gone_or_damaged_is_refused_naming_the_file(tmp_path):
    from mm2_failover.adapters.runfolder import REPORT_PARTITIONS

    f = RunFolder(tmp_path)
    f.save_report(report())
    (tmp_path / REPORT_PARTITIONS).write_bytes(b"PAR1 not parquet")
    with pytest.raises(
        RunFolderError, match=f"{REPORT_PARTITIONS}.*its rows are gone or damaged; clear verify_group_offsets"
    ):
        f.load_report()
    (tmp_path / REPORT_PARTITIONS).unlink()
    with pytest.raises(RunFolderError, match=REPORT_PARTITIONS):
        f.load_report()
    assert f.load_report(partitions=False).totals == report().totals  # the summary alone is still read


def test_a_long_report_is_logged_and_printed_by_its_head_and_says_where_the_rest_is(tmp_path):
    from mm2_failover.adapters.runfolder import head_text

    p = tmp_path / "report.md"
    p.write_text("".join(f"line {i}\n" for i in range(1000)))
    text = head_text(p, 300)
    assert text.startswith("line 0\n") and "line 299\n" in text and "line 300\n" not in text
    assert text.endswith(f"... 700 more line(s) in {p}\n")
    p.write_text("short\n")
    assert head_text(p, 300) == "short\n"


def test_a_folder_parses_its_local_plan_once_and_again_when_the_file_changes(tmp_path):
    """load_plan remembers the plan it read (100k rows at 10k groups x 10 partitions, read twice by verify) as long
    as plan.json and its rows are the same files; another plan written to the path - by this folder or by another
    process - is read again."""
    import os

    folder = RunFolder(tmp_path)
    written = plan_record()
    folder.save_plan(written)
    assert folder.load_plan() is written  # what this folder has just written is what the file holds
    first = RunFolder(tmp_path).load_plan()
    assert first == written and first is not written
    folder = RunFolder(tmp_path)
    first = folder.load_plan()
    assert folder.load_plan() is first
    other = plan_record()
    other.translation_notes = ["written by another process"]
    RunFolder(tmp_path).save_plan(other)  # a new file at the same path (atomic rename: another inode)
    again = folder.load_plan()
    assert again is not first and again.translation_notes == ["written by another process"]
    assert folder.load_plan() is again
    st = folder.plan_json.stat()
    text = folder.plan_json.read_text().replace("written by another process", "written by another process!")
    folder.plan_json.write_text(text)  # rewritten in place: the size changes
    os.utime(folder.plan_json, ns=(st.st_atime_ns, st.st_mtime_ns))  # even with the old modification time
    assert folder.load_plan().translation_notes == ["written by another process!"]
    folder.save_plan(first)
    assert folder.load_plan().translation_notes == first.translation_notes


def test_json_artifacts_are_indented_when_small_and_compact_when_large(tmp_path, monkeypatch):
    """``indent`` sends Python's json to its pure-Python encoder (plan.json at 10k groups x 10 partitions: 1.33 s
    against 0.39 s): artifacts above INDENT_UP_TO_BYTES are written compact; both forms read back the same."""
    import json

    from mm2_failover.adapters import runfolder

    monkeypatch.setattr(runfolder, "INDENT_UP_TO_BYTES", 200)
    small, big = {"b": 1, "a": [1, 2]}, {"rows": [{"group": f"g{i}", "offset": i} for i in range(50)]}
    runfolder.write_json(tmp_path / "small.json", small)
    runfolder.write_json(tmp_path / "big.json", big)
    runfolder.write_json(tmp_path / "asked.json", small, compact=True)
    assert (tmp_path / "small.json").read_text() == json.dumps(small, sort_keys=True, indent=2)
    assert (tmp_path / "big.json").read_text() == json.dumps(big, sort_keys=True, separators=(",", ":"))
    assert "\n" not in (tmp_path / "asked.json").read_text()
    assert json.loads((tmp_path / "big.json").read_text()) == big


def test_a_folder_parses_its_local_snapshot_once_and_again_when_the_file_changes(tmp_path):
    """The snapshot (10 MB and ~0.5 s at 10k groups, read by the plan and again by its preview report) is
    remembered like the plan: the one just written, or the one parsed, while the file is the same."""
    import dataclasses

    folder = RunFolder(tmp_path)
    snap = snapshot()
    folder.save_snapshot(snap)
    assert folder.load_snapshot() is snap
    parsed = RunFolder(tmp_path).load_snapshot()
    assert parsed == snap and parsed is not snap
    RunFolder(tmp_path).save_snapshot(dataclasses.replace(snap, captured_at="2026-11-26T00:00:00+00:00"))
    again = folder.load_snapshot()
    assert again.captured_at == "2026-11-26T00:00:00+00:00" and folder.load_snapshot() is again
