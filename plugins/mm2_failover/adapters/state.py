"""The latest-checkpoint state: what the scheduled refresh keeps so that a failover reads only the tail of MM2's
checkpoint topics (docs/architecture.md, "Failover in seconds").

A **state version** is an immutable folder under ``<archive>/latest-state/`` written by the latest-checkpoints job
in refresh mode (``--refresh-state``)::

    v-<covered, 15 digits>-<sha8>/
        buffers/      Parquet: per (source alias, raw key bytes) the job's aggregation buffers over every record of
                      the range covered: counts, the latest usable record (tombstones kept, with their position) and
                      the live record with the highest downstream offset (regressions)
        metadata/     Parquet: the commit metadata of the buffers' chosen records that carry some
        quarantine/   Parquet: every record of the range that is not a usable checkpoint (reason, key and value hex)
        answers/      Parquet: the answer of every usable key under the latest policy (the job's output columns,
                      commit metadata in place, plus the raw key): what a failover reuses for the keys its tail
                      did not touch (:mod:`mm2_failover.adapters.answers`)
        version.json  what it covers: per alias the topic, its topic id, the offset covered per partition, the log
                      start it was read from, and the record and answer counts

The job writes a version into ``.tmp-<name>-<pid>/``, fsyncs every file and folder of it (Spark's writers do not),
writes ``version.json`` with the size of every file, renames it into place (atomic, the parent folder fsynced), then
rewrites ``CURRENT.json`` (atomic and durable); a crash at any point leaves the previous versions intact and a retry
converges (the name is a function of what is covered). The newest :data:`KEEP` versions are kept. A version whose
files do not match its ``version.json`` (missing, another size, a Parquet footer that cannot be read: a disk that lost
it, a hand that truncated it) is skipped with a warning, and the choice falls back to an older version or a full
pass - never a failed failover.

Which version the failover-time job may start from, per source alias, is decided here (pure functions, unit-tested
in ``tests/unit/test_state.py`` rule by rule):

1. **No version** - read the whole range (a full pass), and say so.
2. **Same topic** - a version is usable for an alias only when it names the same checkpoints topic and the same
   topic id as now (a recreated topic restarts offsets: full pass).
3. **Not past the captured end** - every partition's covered offset must be <= the captured end offset; a newer
   version (written after the snapshot) is skipped for an older one; when none qualifies, full pass ("the end offset
   went backwards" when even the oldest version covers more).
4. **Nothing missing** - the captured log start must be <= the covered offset of every partition (else records
   between them were deleted and the tail cannot be read: full pass).
5. **The tail** - the job reads ``[covered, end)`` per partition (a partition the version does not know: from the
   captured start) and merges it into the version's buffers: the same answers as a full pass.

With the archive in an object store (issue 34) the state is kept there too, under ``<archive>/latest-state``, and
Spark works on a copy of it on the host that runs the job (``MM2_FAILOVER_STATE``, default ``var/state``):
:func:`pull` brings the copy up to the store's before a job (each version verified against its ``version.json``
before it is used), :func:`push` uploads what a refresh published (the files, then ``version.json``, then
``CURRENT.json``). A worker that never ran the refresh so reads the tail only, like the one that did.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from mm2_failover.adapters import faults, store
from mm2_failover.adapters.runfolder import fsync_path, fsync_tree, write_bytes, write_json

Offsets = dict[int, int]  # partition -> offset
KEEP = 3
STATE_DIR = "latest-state"


# ------------------------------------------------------------------------------------------ the rules (pure)


def version_name(covers: dict[str, dict[str, Offsets]]) -> str:
    """``v-<total offsets covered>-<sha8 of what is covered>``: sorts oldest first for one topic; the same coverage
    gives the same name (a retried refresh converges on the same folder)."""
    canon = json.dumps(
        {
            a: {
                "topic": v["topic"],
                "topic_id": v["topic_id"],
                "covers": {str(p): o for p, o in sorted(v["covers"].items())},
            }
            for a, v in sorted(covers.items())
        },
        sort_keys=True,
    )
    total = sum(o for v in covers.values() for o in v["covers"].values())
    return f"v-{total:015d}-{hashlib.sha256(canon.encode()).hexdigest()[:8]}"


@dataclass
class AliasChoice:
    alias: str
    topic: str
    version: str | None  # the version whose buffers answer for [start, covered); None: full pass
    reason: str
    read_from: Offsets  # where the tail starts, per partition

    def as_dict(self) -> dict:
        return {
            "version": self.version,
            "reason": self.reason,
            "read_from": {str(p): o for p, o in sorted(self.read_from.items())},
        }


def _alias_reason(v: dict, alias: str, topic: str, topic_id: str, start: Offsets, end: Offsets) -> str | None:
    """Why version ``v`` cannot answer for ``alias`` (rules 2-4), or None when it can."""
    mine = (v.get("aliases") or {}).get(alias)
    if not mine:
        return f"version {v['name']} does not cover alias {alias!r}"
    if mine["topic"] != topic or mine["topic_id"] != topic_id:  # rule 2
        return (
            f"version {v['name']} was built from {mine['topic']} (topic id {mine['topic_id']}), not "
            f"{topic} (topic id {topic_id}): the topic was recreated"
        )
    covers = {int(p): int(o) for p, o in mine["covers"].items()}
    past = sorted(p for p, o in covers.items() if o > end.get(p, 0))  # rule 3
    if past:
        return (
            f"version {v['name']} covers {topic}[{past[0]}] up to {covers[past[0]]}, past the captured end "
            f"offset {end.get(past[0], 0)}"
        )
    lost = sorted(p for p, o in covers.items() if start.get(p, 0) > o)  # rule 4
    if lost:
        return (
            f"version {v['name']} covers {topic}[{lost[0]}] up to {covers[lost[0]]} but the log now starts at "
            f"{start[lost[0]]}: the records in between were deleted"
        )
    return None


def choose(
    versions: list[dict],
    topics: dict[str, str],
    topic_ids: dict[str, str],
    start: dict[str, Offsets],
    end: dict[str, Offsets],
) -> list[AliasChoice]:
    """Per alias, the newest version that can answer for it and where its tail starts (rules 1-5). ``versions``: the
    ``version.json`` contents (with ``name``), any order; ``topics``: alias -> checkpoints topic; ``start``/``end``:
    per topic the captured log start and end offsets."""
    newest_first = sorted(versions, key=lambda v: v["name"], reverse=True)
    out = []
    for alias, topic in sorted(topics.items()):
        s, e = start.get(topic, {}), end.get(topic, {})
        full = dict(s) if s else {p: 0 for p in e}
        if not newest_first:  # rule 1
            out.append(AliasChoice(alias, topic, None, "no state version yet: full pass", full))
            continue
        reasons = []
        for v in newest_first:
            why = _alias_reason(v, alias, topic, topic_ids.get(topic, ""), s, e)
            if why is None:
                covers = {int(p): int(o) for p, o in v["aliases"][alias]["covers"].items()}
                frm = {p: covers.get(p, s.get(p, 0)) for p in e}  # rule 5
                behind = sum(e[p] - frm[p] for p in e)
                out.append(
                    AliasChoice(
                        alias, topic, v["name"], f"state version {v['name']} + a tail of {behind} offset(s)", frm
                    )
                )
                break
            reasons.append(why)
        else:
            went_back = all("past the captured end" in r for r in reasons)
            head = "the end offset went backwards (every version covers more): " if went_back else ""
            out.append(AliasChoice(alias, topic, None, f"full pass: {head}{reasons[0]}", full))
    return out


# ------------------------------------------------------------------------------------------ the folder


@dataclass
class StateRoot:
    """``<archive>/latest-state``: the versions, ``CURRENT.json``, and publishing a new version."""

    dir: Path
    keep: int = KEEP
    said: list[str] = field(default_factory=list)

    @property
    def current_path(self) -> Path:
        return self.dir / "CURRENT.json"

    def versions(self) -> list[dict]:
        """Every complete version (its ``version.json`` present), oldest first."""
        out = []
        if not self.dir.is_dir():
            return out
        for d in sorted(self.dir.glob("v-*")):
            meta = d / "version.json"
            if d.is_dir() and meta.is_file():
                try:
                    v = json.loads(meta.read_text())
                except ValueError:
                    self.said.append(f"WARNING: {meta} is not valid JSON: version {d.name} ignored")
                    continue
                bad = unreadable_files(d, v.get("files"))
                if bad:
                    self.said.append(
                        f"WARNING: state version {d.name} ignored, its files do not verify: "
                        f"{'; '.join(bad[:3])} (an older version or a full pass is used instead)"
                    )
                    continue
                out.append({**v, "name": d.name, "path": str(d)})
        return out

    def current(self) -> dict | None:
        if not self.current_path.exists():
            return None
        name = json.loads(self.current_path.read_text()).get("version")
        return next((v for v in self.versions() if v["name"] == name), None)

    def staging(self, name: str) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        return self.dir / f".tmp-{name}-{os.getpid()}"

    def publish(self, staging: Path, meta: dict) -> Path:
        """Complete ``staging`` with its ``version.json``, rename it into place, point ``CURRENT.json`` at it, and
        prune versions beyond the newest :attr:`keep` and staging folders left by crashed refreshes."""
        name = meta["name"]
        final = self.dir / name
        fsync_tree(staging)  # Spark's files on disk before anything names them
        meta = {**meta, "files": file_sizes(staging)}
        write_json(staging / "version.json", meta)
        faults.hit("state.before_publish")
        if final.exists():  # a retry of the same coverage: the version is already there (immutable)
            shutil.rmtree(staging)
        else:
            os.rename(staging, final)
            fsync_path(self.dir)
        faults.hit("state.before_current")
        self.point_at(name, meta)
        return final

    def point_at(self, name: str, meta: dict) -> None:
        """``CURRENT.json`` names version ``name`` (atomic and durable); older versions beyond :attr:`keep` go."""
        write_json(self.current_path, {"version": name, "published_at": meta.get("created_at")})
        self.prune(name)

    def prune(self, current: str) -> None:
        versions = [v["name"] for v in self.versions()]
        for name in versions[: -self.keep]:
            if name != current:
                shutil.rmtree(self.dir / name, ignore_errors=True)
        for d in self.dir.glob(".tmp-v-*"):
            pid = d.name.rsplit("-", 1)[-1]
            if not (pid.isdigit() and _alive(int(pid))):
                shutil.rmtree(d, ignore_errors=True)


def file_sizes(root: Path) -> dict[str, int]:
    """Every data file under ``root`` (relative path -> size); Spark's checksums and markers left out."""
    out = {}
    for p in sorted(Path(root).rglob("*")):
        if p.is_file() and not p.name.startswith((".", "_")) and p.name != "version.json":
            out[str(p.relative_to(root))] = p.stat().st_size
    return out


def unreadable_files(root: Path, files: dict[str, int] | None) -> list[str]:
    """Why the files of a version do not verify (empty: they do): each listed file present with its size, and every
    Parquet file's footer readable (a version written before the list existed: the footers only)."""
    import pyarrow.parquet as pq  # lazy: heavy (pyarrow)

    bad = []
    for rel, size in sorted((files or {}).items()):
        p = Path(root) / rel
        if not p.is_file():
            bad.append(f"{rel} is missing")
        elif p.stat().st_size != size:
            bad.append(f"{rel} has {p.stat().st_size} bytes, {size} were written")
    if bad:
        return bad
    for p in sorted(Path(root).rglob("*.parquet")):
        if p.is_file() and not p.name.startswith((".", "_")):
            try:
                pq.read_metadata(str(p))
            except Exception as e:  # noqa: BLE001 - any unreadable footer: the version is not used
                bad.append(f"{p.relative_to(root)}: {type(e).__name__}: {e}")
    return bad


# ------------------------------------------------------------------------------------------ in an object store


def pull(remote, local: Path) -> list[str]:
    """With the archive in an object store (``<archive>/latest-state`` there): bring this host's copy of the state
    (``local``, where Spark reads and writes it) up to the store's. Every complete version the copy lacks (its
    ``version.json`` present in the store) is downloaded into a staging folder, verified against its
    ``version.json`` (sizes and Parquet footers), then renamed into place; then ``CURRENT.json`` and
    ``last-refresh.json``. A version that does not verify is left out and said (the choice falls back to an older
    one or a full pass, as for a local version). Returns what it said."""
    said: list[str] = []
    local = Path(local)
    local.mkdir(parents=True, exist_ok=True)
    have = {d.name for d in local.glob("v-*") if (d / "version.json").is_file()}
    for name in store.names(remote):
        if not name.startswith("v-") or name in have:
            continue
        meta_path = store.as_path(remote) / name / "version.json"
        if not meta_path.exists():
            continue  # a refresh that died before naming its files: not a version
        try:
            meta = json.loads(meta_path.read_bytes())
            tmp = local / f".tmp-{name}-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            store.download_tree(store.as_path(remote) / name, tmp, meta.get("files") or {})
            (tmp / "version.json").write_bytes(meta_path.read_bytes())
        except (OSError, ValueError) as e:
            said.append(
                f"WARNING: state version {name} could not be read from {store.url_of(remote)} ({e}): left "
                "out (an older version or a full pass is used instead)"
            )
            continue
        bad = unreadable_files(tmp, meta.get("files"))
        if bad:
            shutil.rmtree(tmp, ignore_errors=True)
            said.append(
                f"WARNING: state version {name} in {store.url_of(remote)} does not verify: "
                f"{'; '.join(bad[:3])} (an older version or a full pass is used instead)"
            )
            continue
        os.rename(tmp, local / name)
    for pointer in ("CURRENT.json", "last-refresh.json"):
        p = store.as_path(remote) / pointer
        if p.exists():
            write_bytes(local / pointer, p.read_bytes())
    return said


def publish_in_store(remote, meta: dict, keep: int = KEEP) -> None:
    """The refresh through S3A (:func:`mm2_failover.adapters.spark.state_url`): Spark wrote version ``meta["name"]``'s tables
    into the store itself (``<remote>/<name>/``). Complete it with its ``version.json`` naming its files and their
    sizes (store rule 3: the files first, the name that makes them a version last; :func:`pull` and a failover read
    only what it names), then point ``CURRENT.json`` at it (:func:`point_in_store`)."""
    name = meta["name"]
    folder = store.as_path(remote) / name
    files = {
        n: size
        for n, size in store.listing(folder).items()
        if n != "version.json" and not any(p.startswith((".", "_")) for p in n.split("/"))
    }
    faults.hit("state.before_publish")
    store.write_bytes(folder / "version.json", json.dumps({**meta, "files": files}, sort_keys=True).encode())
    faults.hit("state.before_current")
    point_in_store(remote, name, meta, keep)


def point_in_store(remote, name: str, meta: dict, keep: int = KEEP) -> None:
    """``CURRENT.json`` in the store names version ``name``; the store's other versions beyond the newest ``keep``
    go, and so does any folder without a ``version.json`` (a killed refresh's: one writer, the scheduled refresh)."""
    base = store.as_path(remote)
    store.write_bytes(
        base / "CURRENT.json",
        json.dumps({"version": name, "published_at": meta.get("created_at")}, sort_keys=True).encode(),
    )
    names = [n for n in store.names(base) if n.startswith("v-")]
    complete = [n for n in names if store.exists(base / n / "version.json")]
    for n in names:
        if n != name and n not in complete[-keep:]:
            store.remove_tree(base / n)


def push(local: Path, remote) -> list[str]:
    """After a refresh on this host: every version of ``local`` the store lacks - its files, then its
    ``version.json`` (store rule 3) -, then ``last-refresh.json`` and ``CURRENT.json`` last; the store's versions
    that ``local`` pruned are removed. One writer: the scheduled refresh (``max_active_runs=1``). Returns the
    versions uploaded."""
    local = Path(local)
    root = StateRoot(local)
    versions = [v["name"] for v in root.versions()]
    there = set(store.names(remote))
    uploaded = []
    for name in versions:
        if name in there and (store.as_path(remote) / name / "version.json").exists():
            continue
        store.upload_tree(local / name, store.as_path(remote) / name, skip=("version.json",))  # the data files first
        store.write_bytes(store.as_path(remote) / name / "version.json", (local / name / "version.json").read_bytes())
        uploaded.append(name)
    for pointer in ("last-refresh.json", "CURRENT.json"):
        if (local / pointer).exists():
            store.write_bytes(store.as_path(remote) / pointer, (local / pointer).read_bytes())
    for name in sorted(there):
        if name.startswith("v-") and name not in versions:
            store.remove_tree(store.as_path(remote) / name)
    return uploaded


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
