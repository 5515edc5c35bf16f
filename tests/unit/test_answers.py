"""The answers folder's layouts and their one reader (mm2_failover.adapters.answers), rule by rule, on small Parquet files
written here with pyarrow (no Spark: the job's side is tests/spark/test_state_vs_full_pass.py)."""

from __future__ import annotations

import errno
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mm2_failover.adapters import answers as am

COLUMNS = ("source_alias", "group", "topic", "partition", "downstream_offset", "regressed")


def table(rows: list[tuple], with_key: bool = True) -> pa.Table:
    """(alias, key, group, partition, offset) rows as answers."""
    data = {
        "source_alias": pa.array([r[0] for r in rows], pa.string()),
        "group": pa.array([r[2] for r in rows], pa.string()),
        "topic": pa.array(["primary.orders"] * len(rows), pa.string()),
        "partition": pa.array([r[3] for r in rows], pa.int32()),
        "downstream_offset": pa.array([r[4] for r in rows], pa.int64()),
        "regressed": pa.array([False] * len(rows), pa.bool_()),
    }
    if with_key:
        data["key"] = pa.array([r[1] for r in rows], pa.binary())
    return pa.table(data)


def write(folder, t: pa.Table, name: str = "part-00000.parquet"):
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(t, str(folder / name))
    return folder


def delta_folder(tmp_path, base_rows, touched, delta_rows, answers=None, aliases=("a",)):
    """A state version's answers (``base_rows``) and an output in the state + delta layout over it."""
    version = write(tmp_path / "state" / "v-1" / "answers", table(base_rows))
    (tmp_path / "state" / "v-1" / "answers" / "_SUCCESS").write_text("")
    out = tmp_path / "out"
    write(
        out / "touched",
        pa.table(
            {
                "source_alias": pa.array([t[0] for t in touched], pa.string()),
                "key": pa.array([t[1] for t in touched], pa.binary()),
            }
        ),
    )
    write(out / "delta", table(delta_rows))
    how = am.link_tree(version, out / "base" / "0")
    counts = answers or {a: sum(1 for r in base_rows if r[0] == a) for a in aliases}
    am.write_manifest(
        out,
        {
            "layout": am.DELTA,
            "bases": [{"dir": "base/0", "version": "v-1", "answers": counts}],
            "touched": len(touched),
            "delta": len(delta_rows),
        },
    )
    return out, version, how


def offsets(t: pa.Table) -> dict:
    return {(r["source_alias"], r["group"], r["partition"]): r["downstream_offset"] for r in t.to_pylist()}


# ------------------------------------------------------------------------------------------ rule 1: full layout


def test_a_folder_without_manifest_is_read_as_a_plain_dataset_and_missing_columns_are_left_out(tmp_path):
    out = write(tmp_path / "out", table([("a", b"k1", "g", 0, 5), ("a", b"k2", "g", 1, 7)], with_key=False))
    t = am.read_table(out, ["group", "partition", "downstream_offset", "metadata"])
    assert t.column_names == ["group", "partition", "downstream_offset"] and t.num_rows == 2
    assert am.count_groups(out) == 1 and am.manifest_of(out) is None


# ------------------------------------------------------------------------------------------ rule 2: state + delta


def test_the_answers_are_the_untouched_base_rows_plus_the_delta(tmp_path):
    base = [("a", b"k1", "g1", 0, 10), ("a", b"k2", "g1", 1, 20), ("a", b"k3", "g2", 0, 30), ("a", b"k4", "g3", 0, 1)]
    # k2 moved on, k3 ended in a tombstone (touched, no answer), k5 is new; k1 and k4 untouched
    out, _, _ = delta_folder(
        tmp_path,
        base,
        [("a", b"k2"), ("a", b"k3"), ("a", b"k5")],
        [("a", b"k2", "g1", 1, 25), ("a", b"k5", "g4", 2, 50)],
    )
    got = am.read_table(out, list(COLUMNS))
    assert offsets(got) == {("a", "g1", 0): 10, ("a", "g1", 1): 25, ("a", "g3", 0): 1, ("a", "g4", 2): 50}
    assert "key" not in got.column_names and got.column_names == list(COLUMNS)
    assert am.count_groups(out) == 3
    assert [r["group"] for r in am.checkpoint_rows(out, ["group"])].count("g1") == 2


def test_a_base_answers_only_for_the_aliases_its_version_answers_for(tmp_path):
    """A version covers aliases a and b; this run takes only a from it (b came from a full pass: all in the delta)."""
    base = [("a", b"k1", "g1", 0, 10), ("b", b"k1", "g1", 0, 99)]
    out, _, _ = delta_folder(tmp_path, base, [("b", b"k1")], [("b", b"k1", "g1", 0, 100)], answers={"a": 1})
    assert offsets(am.read_table(out)) == {("a", "g1", 0): 10, ("b", "g1", 0): 100}


def test_the_same_key_bytes_under_another_alias_are_another_key(tmp_path):
    base = [("a", b"k1", "g1", 0, 10), ("b", b"k1", "g1", 0, 11)]
    out, _, _ = delta_folder(tmp_path, base, [("a", b"k1")], [("a", b"k1", "g1", 0, 12)], aliases=("a", "b"))
    assert offsets(am.read_table(out)) == {("a", "g1", 0): 12, ("b", "g1", 0): 11}


def test_the_run_keeps_its_base_answers_when_the_refresh_prunes_the_version(tmp_path):
    import shutil

    out, version, how = delta_folder(tmp_path, [("a", b"k1", "g1", 0, 10)], [], [])
    assert how == "hard links"
    (linked,) = (out / "base" / "0").iterdir()
    assert linked.name == "part-00000.parquet" and os.stat(linked).st_ino == os.stat(version / linked.name).st_ino
    shutil.rmtree(tmp_path / "state")  # StateRoot.prune
    assert offsets(am.read_table(out)) == {("a", "g1", 0): 10}


def test_where_the_filesystem_refuses_a_hard_link_the_files_are_copied(tmp_path, monkeypatch):
    def cross_device(src, dst):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(am.os, "link", cross_device)
    out, version, how = delta_folder(tmp_path, [("a", b"k1", "g1", 0, 10)], [], [])
    assert how == "copies" and sorted(p.name for p in (out / "base" / "0").iterdir()) == ["part-00000.parquet"]
    assert offsets(am.read_table(out)) == {("a", "g1", 0): 10}


# ------------------------------------------------------------------------------------------ rule 3: counted


def test_a_missing_base_file_fails_the_read_naming_the_part_and_what_to_do(tmp_path):
    out, _, _ = delta_folder(tmp_path, [("a", b"k1", "g1", 0, 10), ("a", b"k2", "g1", 1, 20)], [], [])
    write(out / "base" / "0", table([("a", b"k1", "g1", 0, 10)]))  # one answer instead of two
    with pytest.raises(am.AnswersError) as e:
        am.read_table(out)
    assert str(out / "base/0") in str(e.value) and "compute_latest_checkpoints again" in str(e.value)
    assert "{'a': 1}" in str(e.value) and "{'a': 2}" in str(e.value)


def test_a_delta_of_another_size_than_the_manifest_says_fails_the_read(tmp_path):
    out, _, _ = delta_folder(tmp_path, [("a", b"k1", "g1", 0, 10)], [("a", b"k2")], [("a", b"k2", "g2", 0, 1)])
    write(out / "delta", table([("a", b"k2", "g2", 0, 1)]), "part-00001.parquet")
    with pytest.raises(am.AnswersError, match=r"delta holds 2 rows, the manifest says 1"):
        am.read_table(out)


def test_a_damaged_manifest_is_named(tmp_path):
    out, _, _ = delta_folder(tmp_path, [("a", b"k1", "g1", 0, 10)], [], [])
    (out / am.MANIFEST).write_text("{not json")
    with pytest.raises(am.AnswersError, match="answers' manifest"):
        am.read_table(out)


# ------------------------------------------------------------------------------------------ rule 4: not a plain dataset


def test_a_reader_that_does_not_know_the_layout_fails_instead_of_reading_a_part(tmp_path):
    out, _, _ = delta_folder(tmp_path, [("a", b"k1", "g1", 0, 10)], [("a", b"k1")], [("a", b"k1", "g1", 0, 11)])
    with pytest.raises(pa.ArrowInvalid):
        pq.read_table(str(out))


# ------------------------------------------------------------------------------------------ rule 6: named parts


def test_in_a_store_the_parts_must_be_those_the_summary_names_with_their_sizes():
    from mm2_failover.adapters.answers import is_part, parts_problems

    named = {"part-0.parquet": 10, "delta/part-0.parquet": 5}
    assert parts_problems({**named, "_SUCCESS": 0, "_temporary/0/part-9.parquet": 3}, named) == []
    assert parts_problems({"part-0.parquet": 10}, named) == ["delta/part-0.parquet: missing"]
    assert parts_problems({**named, "part-0.parquet": 4}, named) == ["part-0.parquet: 4 bytes, the summary says 10"]
    assert parts_problems({**named, "part-7.parquet": 4}, named) == [
        "part-7.parquet: not named by the summary (left by another try?)"
    ]
    assert [
        n
        for n in ("a.parquet", "_x/a.parquet", ".a.parquet.crc", "b/.a.parquet", "answers.manifest.json")
        if is_part(n)
    ] == ["a.parquet"]


# ------------------------------------------------------------------------------------------ which layout


V = {
    "/s/v-1": {"name": "v-1", "aliases": {"a": {"answers": 3}, "b": {"answers": 0}}},
    "/s/v-0": {"name": "v-0", "aliases": {"a": {}}},
}


@pytest.mark.parametrize(
    "policy,output,state_dir,used,layout,why",
    [
        ("latest", "/r/out", "/s", {"/s/v-1": ["a", "b"]}, am.DELTA, "touched"),
        ("latest", "/r/out", "/s", {}, am.FULL, "full pass"),
        ("max", "/r/out", "/s", {"/s/v-1": ["a"]}, am.FULL, "--policy max"),
        ("latest", "s3a://bucket/out", "/s", {"/s/v-1": ["a"]}, am.FULL, "not a local"),
        ("latest", "/r/out", "hdfs://nn/s", {"/s/v-1": ["a"]}, am.FULL, "not a local"),
        ("latest", "file:/r/out", "/s", {"/s/v-1": ["a"]}, am.DELTA, "touched"),
        ("latest", "/r/out", "/s", {"/s/v-0": ["a"]}, am.FULL, "state version v-0 holds no answers for ['a']"),
    ],
)
def test_the_layout_is_decided_by_the_policy_the_paths_and_the_versions(policy, output, state_dir, used, layout, why):
    got, reason = am.layout_for(policy, output, state_dir, used, V)
    assert got == layout and why in reason, reason
