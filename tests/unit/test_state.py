"""mm2_failover.adapters.state: which state version a run starts from, rule by rule (the module docstring numbers them), and
the folder's crash-safe publishing."""

from __future__ import annotations

import json

from mm2_failover.adapters import state as st

TOPICS = {"primary": "primary.checkpoints.internal"}
T = TOPICS["primary"]
IDS = {T: "id-1"}


def version(covers: dict[int, int], topic_id: str = "id-1", topic: str = T, alias: str = "primary") -> dict:
    aliases = {alias: {"topic": topic, "topic_id": topic_id, "covers": covers}}
    return {
        "name": st.version_name(aliases),
        "aliases": {a: {**v, "covers": {str(p): o for p, o in v["covers"].items()}} for a, v in aliases.items()},
    }


def choose(versions, start, end):
    (c,) = st.choose(versions, TOPICS, IDS, {T: start}, {T: end})
    return c


# rule 1: no version


def test_rule1_no_version_is_a_full_pass_from_the_captured_start():
    c = choose([], {0: 5}, {0: 100})
    assert c.version is None and c.read_from == {0: 5} and "full pass" in c.reason


# rule 2: the same topic


def test_rule2_a_recreated_topic_is_a_full_pass_naming_both_ids():
    c = choose([version({0: 50}, topic_id="id-0")], {0: 0}, {0: 100})
    assert c.version is None and "id-0" in c.reason and "id-1" in c.reason and "recreated" in c.reason


def test_rule2_a_version_of_another_alias_does_not_answer():
    c = choose([version({0: 50}, alias="east")], {0: 0}, {0: 100})
    assert c.version is None and "does not cover alias 'primary'" in c.reason


# rule 3: not past the captured end


def test_rule3_a_version_newer_than_the_snapshot_is_skipped_for_an_older_one():
    old, new = version({0: 40}), version({0: 120})
    c = choose([new, old], {0: 0}, {0: 100})
    assert c.version == old["name"] and c.read_from == {0: 40}


def test_rule3_every_version_past_the_end_says_the_end_went_backwards():
    c = choose([version({0: 120}), version({0: 130})], {0: 0}, {0: 100})
    assert c.version is None and "went backwards" in c.reason


# rule 4: nothing missing


def test_rule4_log_start_past_the_covered_offset_is_a_full_pass():
    c = choose([version({0: 40})], {0: 60}, {0: 100})
    assert c.version is None and "deleted" in c.reason and c.read_from == {0: 60}


def test_rule4_log_start_at_the_covered_offset_is_fine():
    c = choose([version({0: 40})], {0: 40}, {0: 100})
    assert c.version is not None and c.read_from == {0: 40}


# rule 5: the tail


def test_rule5_the_newest_usable_version_and_its_tail_a_new_partition_from_the_start():
    v1, v2 = version({0: 10}), version({0: 70})
    c = choose([v1, v2], {0: 0, 1: 3}, {0: 100, 1: 9})
    assert c.version == v2["name"] and c.read_from == {0: 70, 1: 3} and "tail of 36" in c.reason


def test_version_names_sort_by_coverage_and_are_a_function_of_it():
    a, b = version({0: 9}), version({0: 10})
    assert a["name"] < b["name"] and version({0: 9})["name"] == a["name"]
    assert version({0: 9}, topic_id="x")["name"] != a["name"]


# the folder


def test_publish_is_atomic_converges_on_retry_and_keeps_the_newest(tmp_path):
    root = st.StateRoot(tmp_path / "latest-state", keep=2)
    names = []
    for covered in (10, 20, 30):
        v = version({0: covered})
        stg = root.staging(v["name"])
        (stg / "buffers").mkdir(parents=True)
        root.publish(stg, {"name": v["name"], "aliases": v["aliases"]})
        names.append(v["name"])
    assert [v["name"] for v in root.versions()] == names[1:]
    assert root.current()["name"] == names[-1]
    # a retry of the last coverage (a crashed refresh after the rename): the version stays, the staging goes
    stg = root.staging(names[-1])
    (stg / "buffers").mkdir(parents=True)
    root.publish(stg, {"name": names[-1], "aliases": {}})
    assert not stg.exists() and root.current()["name"] == names[-1]


def test_staging_folders_of_dead_refreshes_are_ignored_and_pruned(tmp_path):
    root = st.StateRoot(tmp_path / "s")
    dead = root.dir / ".tmp-v-000000000000001-deadbeef-999999999"
    dead.mkdir(parents=True)
    half = root.dir / "v-000000000000002-cafebabe"  # renamed without its version.json: never read
    half.mkdir()
    assert root.versions() == [] and root.current() is None
    v = version({0: 5})
    stg = root.staging(v["name"])
    stg.mkdir()
    root.publish(stg, {"name": v["name"], "aliases": v["aliases"]})
    assert not dead.exists() and [x["name"] for x in root.versions()] == [v["name"]]


def test_a_corrupt_version_json_is_said_and_ignored(tmp_path):
    root = st.StateRoot(tmp_path / "s")
    d = root.dir / "v-000000000000003-00000000"
    d.mkdir(parents=True)
    (d / "version.json").write_text("{not json")
    assert root.versions() == [] and "not valid JSON" in root.said[0]


def test_current_names_a_version(tmp_path):
    root = st.StateRoot(tmp_path / "s")
    v = version({0: 5})
    stg = root.staging(v["name"])
    stg.mkdir()
    root.publish(stg, {"name": v["name"], "aliases": v["aliases"], "created_at": "t"})
    assert json.loads((root.dir / "CURRENT.json").read_text()) == {"version": v["name"], "published_at": "t"}


# the folder survives a host crash and a hand (issue 31 item 9)


def _publish_with_parquet(root, covered: int) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    v = version({0: covered})
    stg = root.staging(v["name"])
    (stg / "buffers").mkdir(parents=True)
    pq.write_table(pa.table({"k": list(range(100)), "v": [covered] * 100}), str(stg / "buffers" / "part-0.parquet"))
    (stg / "buffers" / "_SUCCESS").write_text("")
    root.publish(stg, {"name": v["name"], "aliases": v["aliases"]})
    return v["name"]


def test_a_version_whose_files_do_not_verify_is_skipped_for_the_older_one(tmp_path):
    """Issue 31 item 9: one truncated file of the newest version made the failover-time job fail; now that version
    is skipped with a warning and the choice falls back to the older version (or a full pass)."""
    root = st.StateRoot(tmp_path / "s")
    older, newer = _publish_with_parquet(root, 10), _publish_with_parquet(root, 20)
    assert json.loads((root.dir / newer / "version.json").read_text())["files"] == {
        "buffers/part-0.parquet": (root.dir / newer / "buffers" / "part-0.parquet").stat().st_size
    }
    part = root.dir / newer / "buffers" / "part-0.parquet"
    part.write_bytes(part.read_bytes()[:-40])  # truncated
    assert [v["name"] for v in root.versions()] == [older]
    assert "WARNING: state version" in root.said[-1] and "buffers/part-0.parquet" in root.said[-1]
    assert choose(root.versions(), {0: 0}, {0: 30}).version == older
    part.unlink()  # missing
    assert [v["name"] for v in st.StateRoot(root.dir).versions()] == [older]


def test_a_version_without_a_file_list_is_checked_by_its_parquet_footers(tmp_path):
    root = st.StateRoot(tmp_path / "s")
    name = _publish_with_parquet(root, 10)
    meta = root.dir / name / "version.json"
    meta.write_text(json.dumps({k: v for k, v in json.loads(meta.read_text()).items() if k != "files"}))
    assert [v["name"] for v in root.versions()] == [name]
    part = root.dir / name / "buffers" / "part-0.parquet"
    part.write_bytes(b"PAR1" + b"\0" * 10)
    assert root.versions() == [] and "part-0.parquet" in root.said[-1]


def test_every_file_of_a_version_is_on_disk_before_version_json_names_it(tmp_path, monkeypatch):
    import os

    synced, events = set(), []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd):
        path = os.readlink(f"/proc/self/fd/{fd}")
        synced.add(path)
        if path.endswith("version.json.tmp"):
            events.append(("version.json", set(synced)))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", lambda a, b: (events.append(("rename", set(synced))), real_rename(a, b))[1])
    root = st.StateRoot(tmp_path / "s")
    name = _publish_with_parquet(root, 10)
    staging_part = [p for p in synced if p.endswith("buffers/part-0.parquet")]
    assert staging_part, synced
    [(_e, at_meta)] = [e for e in events if e[0] == "version.json"]
    assert set(staging_part) <= at_meta and any(p.endswith("/buffers") for p in at_meta)  # files and folder first
    assert (root.dir / name).is_dir()


# ------------------------------------------------------------------------------------------ in an object store


def test_a_refresh_pushes_its_versions_to_the_store_and_another_host_pulls_them_verified(tmp_path):
    """Issue 34: the state kept in the object store beside the archive. The refreshing host pushes every version
    (the files, then version.json, then CURRENT.json); another host, with an empty copy, pulls them and chooses
    the same version; versions the refresh pruned leave the store too; a version whose file in the store is
    damaged is left out of the copy, said, and the choice falls back to the older one."""
    import uuid

    from mm2_failover.adapters import store

    remote = store.as_path(f"memory://state-{uuid.uuid4().hex[:8]}/archive/latest-state")
    here = st.StateRoot(tmp_path / "here", keep=2)
    names = [_publish_with_parquet(here, n) for n in (10, 20)]
    assert st.push(here.dir, remote) == names
    assert st.push(here.dir, remote) == []  # nothing new: nothing uploaded again
    listed = store.listing(remote)
    assert f"{names[1]}/version.json" in listed and "CURRENT.json" in listed
    assert f"{names[1]}/buffers/part-0.parquet" in listed and not any("_SUCCESS" in k for k in listed)

    there = st.StateRoot(tmp_path / "there")
    assert st.pull(remote, there.dir) == []
    assert [v["name"] for v in there.versions()] == names and there.current()["name"] == names[1]
    assert not list(there.dir.glob(".tmp-*"))

    third = _publish_with_parquet(here, 30)  # keep=2: the oldest goes, here and then in the store
    assert st.push(here.dir, remote) == [third]
    assert not any(k.startswith(names[0] + "/") for k in store.listing(remote))

    part = remote / third / "buffers" / "part-0.parquet"
    store.write_bytes(part, store.read_bytes(part)[:-40])  # damaged in the store
    fresh = st.StateRoot(tmp_path / "fresh")
    said = st.pull(remote, fresh.dir)
    assert len(said) == 1 and third in said[0] and "does not verify" in said[0]
    assert [v["name"] for v in fresh.versions()] == [names[1]]
    assert fresh.current() is None  # CURRENT names the damaged version: the job chooses among versions() (rules)
