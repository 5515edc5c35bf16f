"""One run's folder: the name of every artifact, and typed load/save.

``$MM2_FAILOVER_ARTIFACTS/<dag_id>/<run_id>/`` (the CLI: ``--run-dir``) holds everything a run decided and did,
so that any task - or a retry, or the CLI on the same folder - continues from it instead of deciding again:

==============================  =======================================================================
``run.json``                    the run's parameters and the source-reachability decision (written first)
``audit.json``                  the pre-flight audit's findings (:class:`mm2_failover.rules.audit.Audit`)
``drain.json``                  the last drain observation (:class:`mm2_failover.rules.drain.DrainVerdict`)
``snapshot.json``               end offsets captured once (:class:`Snapshot`)
``latest_checkpoints.parquet``  the Spark job's answers (read through :mod:`mm2_failover.adapters.answers`; + ``.summary.json``,
                                ``_quarantine``, ``_regressions``)
``plan.json`` / ``plan.csv``    the plan, built once (:class:`mm2_failover.rules.plan.PlanRecord`): its summary, naming its
                                rows in ``plan_rows.parquet`` by their SHA-256 (columnar: 68 KB at 10k groups x 10
                                partitions in the RTO bench, where JSON was 36 MB); CSV for ``kafka-consumer-groups
                                --from-file``
``approval.json``               what was asked of the approver, and decided, for which plan (its hash:
                                :class:`mm2_failover.rules.approval.Decision`)
``backup.json``                 what apply is about to overwrite, saved before its first write (:class:`Backup`)
``apply.json``                  what apply did
``report.json`` / ``report.md`` the verified report; ``summary.json`` its one-line summary for the UI's index
``announcements.json``          the Asset events of the verified moved groups, sent in parts (:mod:`mm2_failover.rules.assets`)
``announcements-part-N.json``   one part's events (each part reads only its own)
``drill.*``                     the drill's findings, writes and plan refusal
``readiness.json``              one readiness interval's answer (:mod:`mm2_failover.rules.readiness`): its summary; its rows
                                per group and per (group, partition) in ``readiness_groups.parquet`` and
                                ``readiness_partitions.parquet`` (columnar: ~2 MB at 10k groups x 10 partitions, where
                                JSON would be ~35 MB)
``rollback.json``                a rollback run's result (its journals live per backup, beside the writer locks:
                                :func:`mm2_failover.rules.rollback.journal_dir`)
==============================  =======================================================================

The folder is local or a prefix of an object store (``MM2_FAILOVER_ARTIFACTS=s3://...``; :mod:`mm2_failover.adapters.store`).
Every file is written whole and durably (locally: temporary file, fsync, rename, fsync of the folder; in a store: one
PUT): after a host crash a file is either the old one or the new one, never empty - ``backup.json`` is the only undo
record.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mm2_failover.adapters import store
from mm2_failover.adapters.store import fsync_path
from mm2_failover.rules.approval import Decision, plan_hash
from mm2_failover.rules.audit import Audit
from mm2_failover.rules.drain import DrainVerdict
from mm2_failover.rules.drill import DrillReport
from mm2_failover.rules.plan import ROW_TYPES, Plan, PlanRecord
from mm2_failover.rules.readiness import GROUP_COLUMNS, PARTITION_COLUMNS, Readiness
from mm2_failover.rules.report import ROW_COLUMNS, Report
from mm2_failover.rules.rollback import Backup
from mm2_failover.rules.values import TP, Commit, commit_from_json, commit_to_json, tp_map_from_json, tp_map_to_json

if TYPE_CHECKING:  # drain needs the evidence rules (numpy): imported where a drain file is read, not by every reader
    from mm2_failover.rules.drain import DrainVerdict

RUN = "run.json"
DRAIN = "drain.json"
SNAPSHOT = "snapshot.json"
CHECKPOINTS = "latest_checkpoints.parquet"
CHECKPOINTS_SUMMARY = "latest_checkpoints.summary.json"
PLAN_JSON = "plan.json"
PLAN_CSV = "plan.csv"
PLAN_ROWS = "plan_rows.parquet"
#: the other files an artifact's content is read from (what :meth:`RunFolder._recall` checks besides the artifact)
PARTS = {PLAN_JSON: (PLAN_ROWS,)}
APPROVAL = "approval.json"
BACKUP = "backup.json"
APPLY = "apply.json"
REPORT_JSON = "report.json"
REPORT_MD = "report.md"
REPORT_PARTITIONS = "report_partitions.parquet"
REPORT_STALE = "report_stale_checkpoints.parquet"
REPORT_ROW_FILES = {"partitions": REPORT_PARTITIONS, "stale_checkpoints": REPORT_STALE}  # report.ROW_COLUMNS
REPORT_FIX = "clear verify_group_offsets (or run the CLI's verify) to write the report again"
SUMMARY = "summary.json"
ANNOUNCEMENTS = "announcements.json"


def announcement_part_name(arg: dict) -> str:
    """The file of one part's Asset events (``announcements.json``'s slice, written with it), ``arg``: the part's
    mapped argument (:func:`mm2_failover.rules.assets.parts`)."""
    return f"announcements-part-{int(arg['index']):05d}.json"


DRILL_JSON = "drill.json"
DRILL_MD = "drill.md"
DRILL_WRITES = "drill_writes.json"
PLAN_REFUSAL = "plan_refusal.json"
ROLLBACK = "rollback.json"
AUDIT = "audit.json"
READINESS = "readiness.json"
READINESS_PARTITIONS = "readiness_partitions.parquet"
READINESS_GROUPS = "readiness_groups.parquet"


class RunFolderError(ValueError):
    """An artifact is missing, unreadable or does not belong to this run; the message names the file."""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def private_dir() -> Path:
    """``<tmp>/mm2-failover-<uid>``: where credentials go for the processes the pipeline starts (the Spark job's options,
    Kafka's Java client's settings) - 0700, owned by this user, not a symlink (refused otherwise)."""
    d = Path(tempfile.gettempdir()) / f"mm2-failover-{os.getuid()}"
    d.mkdir(mode=0o700, exist_ok=True)
    st = d.lstat()
    if st.st_uid != os.getuid() or (st.st_mode & 0o077) or not d.is_dir() or d.is_symlink():
        raise PermissionError(f"{d} must be a folder owned by this user with mode 0700; remove it and retry")
    return d


def durable_rename(tmp: Path, final: Path) -> None:
    """Move a fully written local ``tmp`` to ``final`` durably: the data on disk first, then the rename, then the folder
    (a manifest written after this never names a file a host crash could leave empty)."""
    fsync_path(tmp)
    os.replace(tmp, final)
    fsync_path(final.parent)


def fsync_tree(root: Path) -> None:
    """Every file under the local ``root``, then every folder, deepest first (files another process wrote, e.g.
    Spark's)."""
    for d, _dirs, files in sorted(os.walk(root), key=lambda x: -x[0].count(os.sep)):
        for f in files:
            fsync_path(Path(d) / f)
        fsync_path(Path(d))


def write_bytes(path, data: bytes) -> None:
    """Whole and durable, in a local folder or an object store (:func:`mm2_failover.adapters.store.write_bytes`): a crash
    leaves the old file or the new one, never a partial or empty one."""
    store.write_bytes(path, data)


def write_text(path, text: str) -> None:
    write_bytes(path, text.encode())


#: a JSON artifact larger than this, compact, is written compact: ``indent`` makes Python's ``json`` use its pure-
#: Python encoder (1.33 s for plan.json at 10k groups x 10 partitions, against 0.39 s compact, and 52 MB against 36)
INDENT_UP_TO_BYTES = 1 << 20


def json_text(data, compact: bool = False) -> str:
    """``data`` as JSON, keys sorted: indented for people when small, compact when ``compact`` or larger than
    :data:`INDENT_UP_TO_BYTES` (the run's big artifacts: the plan, the backup, the snapshot)."""
    text = json.dumps(data, sort_keys=True, default=str, separators=(",", ":"))
    if not compact and len(text) <= INDENT_UP_TO_BYTES:
        text = json.dumps(data, sort_keys=True, default=str, indent=2)
    return text


def write_json(path, data, compact: bool = False) -> None:
    """:func:`json_text` of ``data`` into ``path``, whole and durable."""
    write_text(path, json_text(data, compact))


def typed_table(columns: dict[str, list], types: dict[str, str]):
    """``columns`` (name -> values) as a pyarrow Table with the explicit schema ``types`` (name -> Arrow type name:
    ``int64``, ``string``, ``bool``...), in its order: an all-empty column keeps its type and a value of another
    type is an error."""
    import pyarrow as pa  # lazy: heavy (pyarrow)

    return pa.table({c: columns[c] for c in types}, schema=typed_schema(types))


def typed_schema(types: dict[str, str]):
    """The Arrow schema of ``types`` (name -> Arrow type name), in its order."""
    import pyarrow as pa  # lazy: heavy (pyarrow)

    return pa.schema([(c, pa.type_for_alias(t)) for c, t in types.items()])


def write_rows_parquet(path, rows: list[dict], columns: list[str] | dict[str, str]) -> None:
    """``rows`` as a Parquet file, whole and durable (:func:`write_bytes`). ``columns``: their names (types
    inferred), or name -> Arrow type name (:func:`typed_table`)."""
    import pyarrow as pa  # lazy: heavy (pyarrow)

    if isinstance(columns, dict):  # Arrow reads the rows itself: 0.27 s against 0.73 s for the report's 100k rows
        table = pa.Table.from_pylist(rows, schema=typed_schema(columns))
    else:
        table = pa.table({c: [r.get(c) for r in rows] for c in columns})
    write_bytes(path, store.parquet_bytes(table))


HEAD_LINES = 300


def head_text(path, max_lines: int = HEAD_LINES) -> str:
    """The first ``max_lines`` lines of a report for a task log or a terminal, and where the rest is (a report of 10k
    groups is megabytes of Markdown: the whole file stays on disk and on the report pages)."""
    out: list[str] = []
    extra = 0
    with store.as_path(path).open("r", errors="replace") as fh:
        for line in fh:
            if len(out) < max_lines:
                out.append(line)
            else:
                extra += 1
    text = "".join(out)
    return text if not extra else text + f"\n... {extra} more line(s) in {path}\n"


def read_json(path, what: str = "") -> Any:
    """The JSON in ``path`` (local or in the store); RunFolderError naming the file when it is missing or not JSON."""
    try:
        return json.loads(store.as_path(path).read_text())
    except FileNotFoundError:
        raise RunFolderError(f"{what or 'file'} {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise RunFolderError(f"cannot read {what or 'file'} {path}: {e}") from None
    except ValueError as e:
        raise RunFolderError(f"{what or 'file'} {path} is not valid JSON ({e})") from None


# ------------------------------------------------------------------------------------------ typed artifacts


@dataclass
class SourceState:
    """What the snapshot knows of one source alias's cluster (nothing in disaster mode)."""

    alias: str
    reachable: bool
    end_offsets: dict[TP, int] | None = None  # source topics the alias replicates
    group_commits: dict[str, dict[TP, Commit]] | None = None  # the selected groups' commits (source topic names)
    # a lost source: the archive's newest reading of the selected groups' commits, and when it was read
    # ({"read_from", "read_to", "cluster_id"}; plan rule 1a decides where they are the groups' positions)
    archived_commits: dict[str, dict[TP, Commit]] | None = None
    archived_read: dict | None = None

    def as_dict(self) -> dict:
        return {
            "alias": self.alias,
            "reachable": self.reachable,
            "end_offsets": None if self.end_offsets is None else tp_map_to_json(self.end_offsets),
            "group_commits": commits_to_json(self.group_commits),
            "archived_commits": commits_to_json(self.archived_commits),
            "archived_read": self.archived_read,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "SourceState":
        return cls(
            d["alias"],
            bool(d["reachable"]),
            None if d.get("end_offsets") is None else tp_map_from_json(d["end_offsets"]),
            commits_from_json(d.get("group_commits")),
            commits_from_json(d.get("archived_commits")),
            d.get("archived_read"),
        )


def commits_to_json(commits: dict[str, dict[TP, Commit]] | None) -> dict | None:
    return (
        None
        if commits is None
        else {g: tp_map_to_json({tp: commit_to_json(c) for tp, c in cs.items()}) for g, cs in commits.items()}
    )


def commits_from_json(d: dict | None) -> dict[str, dict[TP, Commit]] | None:
    return (
        None
        if d is None
        else {g: {tp: commit_from_json(c) for tp, c in tp_map_from_json(cs).items()} for g, cs in d.items()}
    )


@dataclass
class Snapshot:
    """End offsets and positions captured once per run, at capture time (see :func:`mm2_failover.stages.snapshot.capture_snapshot`)."""

    captured_at: str
    checkpoints_topics: dict[str, str]  # source alias -> its checkpoints topic
    checkpoints_end: dict[TP, int]
    checkpoints_start: dict[TP, int]
    replica_partitions: dict[str, int]
    replica_start: dict[TP, int]
    replica_end: dict[TP, int]
    sources: dict[str, SourceState]
    target_cluster_id: str = ""
    # per alias: MM2's offset-sync topic - {"topic", "location", "end": {partition: offset}, "archived": bool,
    # "why": ...} (captured with the rest; the syncs themselves are in the archive)
    syncs: dict[str, dict] = field(default_factory=dict)

    @property
    def aliases(self) -> list[str]:
        return list(self.checkpoints_topics)

    @property
    def disaster_aliases(self) -> list[str]:
        return [a for a, s in self.sources.items() if not s.reachable]

    def as_dict(self) -> dict:
        return {
            "captured_at": self.captured_at,
            "checkpoints_topics": self.checkpoints_topics,
            "checkpoints_end_offsets": tp_map_to_json(self.checkpoints_end),
            "checkpoints_log_start": tp_map_to_json(self.checkpoints_start),
            "replica_partitions": self.replica_partitions,
            "replica_log_start": tp_map_to_json(self.replica_start),
            "replica_log_end": tp_map_to_json(self.replica_end),
            "sources": {a: s.as_dict() for a, s in self.sources.items()},
            "disaster_aliases": self.disaster_aliases,
            "target_cluster_id": self.target_cluster_id,
            "syncs": self.syncs,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Snapshot":
        return cls(
            d["captured_at"],
            dict(d["checkpoints_topics"]),
            tp_map_from_json(d["checkpoints_end_offsets"]),
            tp_map_from_json(d.get("checkpoints_log_start")),
            dict(d["replica_partitions"]),
            tp_map_from_json(d["replica_log_start"]),
            tp_map_from_json(d["replica_log_end"]),
            {a: SourceState.from_dict(s) for a, s in d["sources"].items()},
            d.get("target_cluster_id", ""),
            d.get("syncs") or {},
        )


@dataclass
class CheckpointsSummary:
    """The Spark job's summary (``--summary``): counts, outputs, phases."""

    raw: dict

    @property
    def quarantined(self) -> int:
        return int(self.raw.get("quarantined") or 0)

    def __getitem__(self, k):
        return self.raw[k]

    def get(self, k, default=None):
        return self.raw.get(k, default)


# ------------------------------------------------------------------------------------------ the folder


class RunFolder:
    """The files of one run, in a local folder or under a prefix of an object store (:mod:`mm2_failover.adapters.store`)."""

    def __init__(self, path):
        self.dir = store.as_path(path)
        self._memo: dict[str, tuple] = {}  # name -> (the local file's identity, what it holds): see _recall

    def __repr__(self) -> str:
        return f"RunFolder({self.dir})"

    def path(self, name: str) -> Path:
        return self.dir / name

    # the artifacts, by name
    run = property(lambda self: self.dir / RUN)
    drain = property(lambda self: self.dir / DRAIN)
    snapshot = property(lambda self: self.dir / SNAPSHOT)
    checkpoints = property(lambda self: self.dir / CHECKPOINTS)
    checkpoints_summary = property(lambda self: self.dir / CHECKPOINTS_SUMMARY)
    plan_json = property(lambda self: self.dir / PLAN_JSON)
    plan_csv = property(lambda self: self.dir / PLAN_CSV)
    approval = property(lambda self: self.dir / APPROVAL)
    backup = property(lambda self: self.dir / BACKUP)
    apply_result = property(lambda self: self.dir / APPLY)
    report_json = property(lambda self: self.dir / REPORT_JSON)
    report_md = property(lambda self: self.dir / REPORT_MD)
    summary = property(lambda self: self.dir / SUMMARY)
    drill_json = property(lambda self: self.dir / DRILL_JSON)
    drill_md = property(lambda self: self.dir / DRILL_MD)
    drill_writes = property(lambda self: self.dir / DRILL_WRITES)
    plan_refusal = property(lambda self: self.dir / PLAN_REFUSAL)
    rollback = property(lambda self: self.dir / ROLLBACK)
    audit = property(lambda self: self.dir / AUDIT)
    readiness = property(lambda self: self.dir / READINESS)

    # -- generic ---------------------------------------------------------------------------------------
    def save(self, name: str, data) -> Path:
        p = self.dir / name
        write_json(p, data)
        return p

    def load(self, name: str, default: Any = ...) -> Any:
        p = self.dir / name
        if not p.exists() and default is not ...:
            return default
        return read_json(p, name)

    # -- run.json: the run's parameters and decisions ----------------------------------------------------
    def record(self) -> dict:
        return self.load(RUN, {})

    def bind_params(self, kind: str, params: dict, compare: list[str]) -> None:
        """The first call records ``params``; a later call with different values of any ``compare`` key fails
        naming them (a plan built with other flags is never reused silently)."""
        rec = self.record()
        if not rec:
            self.save(RUN, {"kind": kind, "created_at": now_iso(), "params": params})
            return
        old = rec.get("params", {})
        diff = [k for k in compare if k in old and old.get(k) != params.get(k)]
        if diff:
            raise RunFolderError(
                f"the run folder {self.dir} was started with other parameters: "
                + ", ".join(f"{k}={old.get(k)!r} (now {params.get(k)!r})" for k in diff)
                + ". Use the same values to continue this run, or a new run folder for a new run."
            )

    def save_decision(self, key: str, value: dict) -> None:
        rec = self.record() or {"created_at": now_iso()}
        rec.setdefault("decisions", {})[key] = value
        self.save(RUN, rec)

    def decision(self, key: str) -> dict | None:
        return (self.record().get("decisions") or {}).get(key)

    # -- typed -----------------------------------------------------------------------------------------
    # -- remembered artifacts: the plan and the snapshot, each written once per run and read by several steps of a
    # task (at 10k groups x 10 partitions, the plan's rows are 100k, snapshot.json is 10 MB and ~0.5 s to parse)
    def _identity(self, name: str) -> tuple | None:
        """The local files' size, modification time and inode of artifact ``name`` and of its :data:`PARTS` (None:
        in an object store, or one absent: never remembered)."""
        ids = tuple(self._file_identity(n) for n in (name, *PARTS.get(name, ())))
        return None if None in ids else ids

    def _file_identity(self, name: str) -> tuple | None:
        path = self.dir / name
        if store.is_remote(path):
            return None
        try:
            st = path.stat()
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev

    def _remember(self, name: str, obj) -> None:
        """``obj`` as what the local file ``name`` holds now (just written from it: the round trip is exact, as
        ``tests/unit/test_artifact_types.py`` checks for every artifact)."""
        ident = self._identity(name)
        if ident is None:
            self._memo.pop(name, None)
        else:
            self._memo[name] = (ident, obj)

    def _recall(self, name: str, load):
        """What the local file ``name`` holds: remembered while it is the same file (size, modification time,
        inode - artifacts are replaced by an atomic rename, never rewritten in place), else ``load()``."""
        ident = self._identity(name)
        got = self._memo.get(name)
        if ident is not None and got is not None and got[0] == ident:
            return got[1]
        obj = load()
        self._remember(name, obj)
        return obj

    def save_snapshot(self, snap: Snapshot) -> None:
        self.save(SNAPSHOT, snap.as_dict())
        self._remember(SNAPSHOT, snap)

    def load_snapshot(self) -> Snapshot:
        if not self.snapshot.exists():
            raise RunFolderError(f"no end-offset snapshot at {self.snapshot}: capture_end_offsets must run first")

        def load() -> Snapshot:
            try:
                return Snapshot.from_dict(self.load(SNAPSHOT))
            except (KeyError, TypeError) as e:
                raise RunFolderError(
                    f"{self.snapshot} is not a snapshot of this version ({e}): start a new run"
                ) from None

        return self._recall(SNAPSHOT, load)

    def load_summary(self) -> CheckpointsSummary | None:
        return CheckpointsSummary(self.load(CHECKPOINTS_SUMMARY)) if self.checkpoints_summary.exists() else None

    def save_backup(self, backup: Backup) -> None:
        self.save(BACKUP, backup.as_dict())

    def load_backup(self) -> Backup | None:
        return load_backup(self.backup) if self.backup.exists() else None

    def save_drain(self, verdict: DrainVerdict) -> None:
        self.save(DRAIN, verdict.as_dict())

    def load_drain(self) -> DrainVerdict | None:
        """The last drain observation (None: no drain check ran in this folder)."""
        return self._typed(DRAIN, DrainVerdict.from_dict, "drain observation")

    def save_audit(self, result: Audit) -> None:
        self.save(AUDIT, result.as_dict())

    def load_audit(self) -> Audit | None:
        """The pre-flight audit (None: it did not run in this folder)."""
        return self._typed(AUDIT, Audit.from_dict, "pre-flight audit")

    def save_plan(self, record: PlanRecord) -> None:
        """The rows first (``plan_rows.parquet``), then ``plan.csv``, then ``plan.json`` naming the rows' file and
        its SHA-256: a folder with ``plan.json`` has the rest (a crash before it leaves no plan: the step builds it
        again)."""
        data = store.parquet_bytes(typed_table(record.plan.columns(), ROW_TYPES))
        write_bytes(self.dir / PLAN_ROWS, data)
        write_text(self.plan_csv, record.plan.to_reset_csv())
        text = json_text(record.summary(PLAN_ROWS, hashlib.sha256(data).hexdigest())).encode()
        write_bytes(self.plan_json, text)
        record.plan_hash = plan_hash(text)
        self._remember(PLAN_JSON, record)

    def has_plan(self) -> bool:
        """Whether the plan step has written this run's plan (``plan.json``: written last, after the rows it names)."""
        return self.plan_json.exists()

    def load_plan(self) -> PlanRecord:
        """The plan: ``plan.json`` and the rows it names, refused unless they are the file it names by its hash
        (remembered while both are the same local files: :meth:`_recall`)."""
        if not self.has_plan():
            raise RunFolderError(f"no plan at {self.plan_json}: the plan step (compute the plan) must run first")
        return self._recall(PLAN_JSON, self._read_plan)

    def _read_plan(self) -> PlanRecord:
        """``plan.json`` read once: the record parsed from those bytes, and their hash (approval rule 2) - never a
        second read, which a plan replaced in between would answer."""
        p = self.plan_json
        try:
            data = store.read_bytes(p)
            d = json.loads(data)
        except OSError as e:
            raise RunFolderError(f"cannot read plan {p}: {e}") from None
        except ValueError as e:
            raise RunFolderError(f"plan {p} is not valid JSON ({e})") from None
        try:
            record = self._plan_from_summary(d)
        except RunFolderError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise RunFolderError(
                f"{p} is not a plan of this version ({type(e).__name__}: {e}): start a new run folder"
            ) from None
        record.plan_hash = plan_hash(data)
        return record

    def _plan_from_summary(self, d: dict) -> PlanRecord:
        import pyarrow as pa  # lazy: heavy (pyarrow)
        import pyarrow.parquet as pq

        fix = (
            "the plan cannot be trusted: start a new run folder (or delete plan.json to build the plan again in "
            "this one; a plan built again needs its own approval)"
        )
        if d["rows_file"] != PLAN_ROWS:  # the rows are this folder's file, never a path plan.json points elsewhere
            raise RunFolderError(f"{self.plan_json} names its rows {d['rows_file']!r}, not {PLAN_ROWS}; {fix}")
        p = self.dir / PLAN_ROWS
        try:
            data = store.read_bytes(p)
        except OSError as e:
            raise RunFolderError(f"{p}, the rows {self.plan_json} names, cannot be read ({e}); {fix}") from None
        if hashlib.sha256(data).hexdigest() != d["rows_sha256"]:
            raise RunFolderError(
                f"{p} is not the rows {self.plan_json} names (another SHA-256): it was changed or "
                f"damaged after the plan was written; {fix}"
            )
        try:
            cols = pq.read_table(pa.BufferReader(data)).to_pydict()
        except (OSError, ValueError) as e:
            raise RunFolderError(f"{p} cannot be read as Parquet ({e}); {fix}") from None
        return PlanRecord.from_summary(d, Plan.from_columns(cols))

    def save_approval(self, decision: Decision) -> None:
        self.save(APPROVAL, decision.as_dict())

    def load_approval(self) -> Decision | None:
        """What was asked and decided about this run's plan (None: nothing was asked yet)."""
        return self._typed(APPROVAL, Decision.from_dict, "approval")

    def save_report(self, report: "Report | dict", rows: bool = True) -> None:
        """The rows per partition first (``report_partitions.parquet``, ``report_stale_checkpoints.parquet``), then
        ``report.json`` naming each file in its field: a reader that finds the summary finds its rows. ``rows``
        false: ``report.json`` only, its rows being the ones already written (``report`` loaded without them).
        ``report``: a :class:`Report` or its published form (:meth:`Report.as_dict`)."""
        d = report if isinstance(report, dict) else report.view()
        if rows:
            for key, name in REPORT_ROW_FILES.items():
                write_rows_parquet(self.dir / name, d[key], ROW_COLUMNS[key])
        else:
            missing = [name for name in REPORT_ROW_FILES.values() if not (self.dir / name).exists()]
            if missing:
                raise RunFolderError(
                    f"{self.dir}: the report's rows ({', '.join(missing)}) are not there to keep; {REPORT_FIX}"
                )
        self.save(REPORT_JSON, {**d, **REPORT_ROW_FILES})

    def load_report(self, partitions: bool = True) -> Report | None:
        """The verified report (None: verify did not run in this folder); ``partitions`` false leaves its rows
        per partition out (read from the Parquet files that report.json names)."""

        def load(d: dict) -> Report:
            rows = {
                k: (self.parquet_rows(d[k], REPORT_FIX) if partitions else [])
                for k in REPORT_ROW_FILES
                if isinstance(d[k], str)
            }
            return Report.from_dict({**d, **rows})

        return self._typed(REPORT_JSON, load, "report")

    def parquet_rows(self, name: str, fix: str, limit: int | None = None) -> list[dict]:
        """The rows of one of this folder's Parquet files (the first ``limit`` of them); RunFolderError naming the
        file and ``fix`` (what writes them again) when it is gone or unreadable."""
        import pyarrow.parquet as pq  # lazy: heavy (pyarrow)

        p = self.dir / name
        try:
            if limit is None:
                key, fs = store.parquet_args(p)
                return pq.read_table(key, filesystem=fs).to_pylist()
            out: list[dict] = []
            with p.open("rb") as fh:
                for batch in pq.ParquetFile(fh).iter_batches(batch_size=max(1, min(limit, 65536))):
                    out.extend(batch.to_pylist()[: limit - len(out)])
                    if len(out) >= limit:
                        break
            return out
        except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid (not Parquet, truncated) is a ValueError
            raise RunFolderError(f"{p} cannot be read ({e}): its rows are gone or damaged; {fix}") from None

    def save_drill(self, report: DrillReport) -> None:
        self.save(DRILL_JSON, report.as_dict())

    def load_drill(self) -> DrillReport | None:
        """The drill's findings (None: the drill report did not run in this folder)."""
        return self._typed(DRILL_JSON, DrillReport.from_dict, "drill report")

    def save_readiness(self, r: Readiness) -> None:
        """The rows first (Parquet, per partition and per group), then the summary (compact JSON, naming them)."""
        write_rows_parquet(self.dir / READINESS_PARTITIONS, r.partitions, list(PARTITION_COLUMNS))
        write_rows_parquet(
            self.dir / READINESS_GROUPS,
            [{**g, "rules": json.dumps(g["rules"], sort_keys=True)} for g in r.groups],
            list(GROUP_COLUMNS),
        )
        write_json(
            self.dir / READINESS,
            {**r.as_dict(), "partitions": READINESS_PARTITIONS, "groups": READINESS_GROUPS},
            compact=True,
        )

    def load_readiness(self, groups: bool = True, partitions: bool = True) -> Readiness | None:
        """One readiness interval's answer (None: not assessed in this folder); ``groups``/``partitions`` false leave
        those rows out (the page reads the groups only; the history, neither)."""

        def rows(name: str) -> list[dict]:
            return self.parquet_rows(name, "the next readiness interval writes new ones")

        def load(d: dict) -> Readiness:
            gs = [{**g, "rules": json.loads(g["rules"])} for g in rows(d["groups"])] if groups else []
            return Readiness.from_dict({**d, "groups": gs, "partitions": rows(d["partitions"]) if partitions else []})

        return self._typed(READINESS, load, "readiness assessment")

    def _typed(self, name: str, from_dict, what: str):
        """An artifact through its type (None when absent); a file of another version is refused naming it."""
        p = self.dir / name
        if not p.exists():
            return None
        try:
            return from_dict(self.load(name))
        except RunFolderError:
            raise  # names its own file (a Parquet file of the artifact's rows)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise RunFolderError(
                f"{p} is not a {what} of this version ({type(e).__name__}: {e}): start a new run folder"
            ) from None


def load_backup(path) -> Backup:
    path = store.as_path(path)
    if not path.exists():
        raise RunFolderError(
            f"no backup at {path}: apply_group_offsets writes it before its first write; a run that "
            "never reached that point changed nothing"
        )
    try:
        return Backup.from_dict(read_json(path, "backup"), path)
    except ValueError as e:
        raise RunFolderError(str(e)) from None
