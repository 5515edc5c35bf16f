"""MM2's offset syncs and checkpoints: read them from their topics, and keep them in an archive on the target side.

The offset-sync topic (``mm2-offset-syncs.<target-alias>.internal``) is compacted by source partition, so the history
exact translation needs survives only until its segment rolls (7 days by default, often less), and it lives on the
SOURCE cluster unless MM2 runs with ``offset-syncs.topic.location=target`` - the cluster that is gone in a disaster.
The archive keeps every sync record on the target side (a folder beside the run artifacts by default; any shared
filesystem), appended incrementally:

``<archive>/<alias>/offset-syncs/`` (and ``<archive>/<alias>/checkpoints/`` for the checkpoint records, laid out
the same way: the checkpoint topic is compacted too, and its history is what a later refresh of the latest
checkpoints builds on)
    ``manifest.json`` - the topic (name, id, cluster id, where), and per partition of the sync topic the offset archived up to,
    the archived ranges, and the gaps (records gone before they were archived: the topic was recreated, or its log
    start passed the archived offset);
    ``<topic-id>-p<partition>-<from>-<to>.parquet`` - immutable files of decoded records (:data:`COLUMNS`,
    :data:`CHECKPOINT_COLUMNS`).

A run appends [archived up to, current end) per partition: it writes the file (atomically and durably: the data, the
rename and the folder fsynced), then the manifest (likewise). A crash in between leaves an orphan file the manifest
does not name (never read, replaced by the next run); a retry never duplicates or skips a record. One writer per
archive at a time (the 5-minute DAG, a failover's capture, the CLI): each holds the archive's lock (``.writer.lock``,
the same kind as the target's writer lock) from reading the manifest to writing it, so none rewrites it from a
stale copy. In an object store (``MM2_FAILOVER_ARCHIVE=s3://...``; no rename, no lock there) the manifest is
``manifests/<generation, 12 digits>.json`` instead, each generation created once with a conditional write after the
files it names (:func:`mm2_failover.adapters.store.create`): a writer that loses the race reads the winner's manifest and
appends from it; readers take the newest generation. The archive is read with pyarrow (no Spark needed at failover); a file that cannot be read is named
(:class:`ArchiveRead`), never a failed failover: the failover then uses MM2's checkpoints for that alias, failing back
uses the syncs that could be read (its floor only gets more conservative).

Why plain Python and not Spark here: the sync topic carries one record per ``offset.lag.max`` records replicated, so
even a busy cluster adds thousands of syncs a minute; a bounded read of that with confluent-kafka takes well under a
second, where any Spark job pays ~15 s of start-up for every scheduled run.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import weakref
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mm2_failover.adapters import faults, store
from mm2_failover.adapters.kafka.cluster import Cluster
from mm2_failover.adapters.locks import file_lock
from mm2_failover.adapters.runfolder import RunFolderError, now_iso, read_json, write_json
from mm2_failover.rules import checkpoints as cpf
from mm2_failover.rules.translate import MalformedSync, Sync, decode_sync
from mm2_failover.rules.values import TP

log = logging.getLogger(__name__)

MANIFESTS = "manifests"  # in an object store: manifests/<generation>.json, each created once (no rename, no lock)
KEEP_MANIFESTS = 10  # older generations are removed after a new one is created
CONFLICT_TRIES = 5

COLUMNS = ("sync_partition", "sync_offset", "timestamp_ms", "topic", "partition", "upstream", "downstream")
CHECKPOINT_COLUMNS = (
    "record_partition",
    "record_offset",
    "timestamp_ms",
    "group",
    "topic",
    "partition",
    "upstream",
    "downstream",
    "metadata",
    "tombstone",
)


def _read_decoded(
    cluster: Cluster, topic: str, start: dict[int, int], end: dict[int, int], decode, malformed: type[Exception]
) -> tuple[list[dict], int]:
    """``decode(partition, offset, key, value, timestamp)`` of every record of ``topic`` in [start, end) per
    partition, and how many raised ``malformed`` (skipped, counted)."""
    rows, bad = [], 0
    rng = {(topic, p): e for p, e in end.items() if e > start.get(p, 0)}
    if not rng:
        return rows, bad
    for _t, p, o, k, v, ts in cluster.read(rng, start={(topic, q): s for q, s in start.items()}, timeout=120):
        try:
            rows.append(decode(p, o, k, v, ts))
        except malformed:
            bad += 1
    return rows, bad


def _sync_row(p: int, o: int, k, v, ts: int) -> dict:
    src_topic, src_p, s = decode_sync(k, v)
    return {
        "sync_partition": p,
        "sync_offset": o,
        "timestamp_ms": ts,
        "topic": src_topic,
        "partition": src_p,
        "upstream": s.upstream,
        "downstream": s.downstream,
    }


def _checkpoint_row(p: int, o: int, k, v, ts: int) -> dict:
    rec = cpf.decode(k, v)
    tomb = isinstance(rec, cpf.CheckpointKey)
    return {
        "record_partition": p,
        "record_offset": o,
        "timestamp_ms": ts,
        "group": rec.group,
        "topic": rec.topic,
        "partition": rec.partition,
        "upstream": None if tomb else rec.upstream_offset,
        "downstream": None if tomb else rec.downstream_offset,
        "metadata": None if tomb else rec.metadata,
        "tombstone": tomb,
    }


def read_syncs(cluster: Cluster, topic: str, start: dict[int, int], end: dict[int, int]) -> tuple[list[dict], int]:
    """The sync records of ``topic`` in [start, end) per partition, decoded (rows of :data:`COLUMNS`), and how many
    records were not syncs (skipped, counted)."""
    return _read_decoded(cluster, topic, start, end, _sync_row, MalformedSync)


def read_checkpoint_records(
    cluster: Cluster, topic: str, start: dict[int, int], end: dict[int, int]
) -> tuple[list[dict], int]:
    """The checkpoint records of ``topic`` in [start, end) per partition, decoded (rows of
    :data:`CHECKPOINT_COLUMNS`; a tombstone keeps its key and position, offsets None), and how many records were not
    checkpoints (skipped, counted; the Spark job quarantines and reports them)."""
    return _read_decoded(cluster, topic, start, end, _checkpoint_row, cpf.MalformedCheckpoint)


def index_rows(rows: Iterable[dict]) -> dict[TP, list[Sync]]:
    """(source topic, partition) -> its syncs."""
    out: dict[TP, list[Sync]] = defaultdict(list)
    for r in rows:
        out[(r["topic"], int(r["partition"]))].append(Sync(int(r["upstream"]), int(r["downstream"])))
    return dict(out)


@dataclass
class ArchiveResult:
    alias: str
    topic: str
    appended: int = 0  # sync records archived by this run
    files: list[str] = field(default_factory=list)
    gaps: list[dict] = field(default_factory=list)  # ranges lost before they could be archived (said loudly)
    new_topic: bool = False  # the topic id changed: a new segment of history starts

    def as_dict(self) -> dict:
        return self.__dict__.copy()


@dataclass
class ArchiveRead:
    rows: list[dict] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # "<file>: <why>" for each file that could not be read


class TopicArchive:
    """The archive of one alias's records of one MM2 topic (see the module docstring); subclasses say which."""

    kind = ""  # the folder under the alias, and what the log calls the records
    partition_column = ""

    @staticmethod
    def reader(cluster: Cluster, topic: str, start: dict[int, int], end: dict[int, int]) -> tuple[list[dict], int]:
        raise NotImplementedError

    def __init__(self, root, alias: str):
        self.dir = store.as_path(root) / alias / self.kind
        self.alias = alias
        self.remote = store.is_remote(self.dir)

    def _generations(self) -> list[str]:
        """In an object store: the manifests' names, oldest first (``manifests/<generation, 12 digits>.json``)."""
        return [n for n in store.names(self.dir / MANIFESTS) if n.endswith(".json") and n[:-5].isdigit()]

    @property
    def manifest_path(self):
        """The manifest in force: ``manifest.json`` in a local folder; in an object store the newest generation."""
        if not self.remote:
            return self.dir / "manifest.json"
        gens = self._generations()
        return self.dir / MANIFESTS / (gens[-1] if gens else f"{0:012d}.json")

    def manifest(self) -> dict:
        p = self.manifest_path
        return read_json(p, "sync archive manifest") if p.exists() else {}

    def append(self, cluster: Cluster, topic: str, location: str, lock_wait_s: float = 300.0) -> ArchiveResult:
        """Archive the records of ``topic`` (on ``cluster``) past what is archived, up to its current end. In a local
        folder: holding the archive's writer lock from reading the manifest to writing it. In an object store (no
        lock there): the next generation of the manifest is created exclusively (store rule 4) - a writer that lost
        the race to another reads the winner's manifest and appends again from it (at most ``CONFLICT_TRIES``)."""
        if self.remote:
            for _ in range(CONFLICT_TRIES):
                p = self.manifest_path
                m = read_json(p, "sync archive manifest") if p.exists() else {}
                nxt = self.dir / MANIFESTS / f"{int(p.name[:-5]) + 1:012d}.json"
                res = self._append(
                    cluster,
                    topic,
                    location,
                    m,
                    lambda data, nxt=nxt: store.create(nxt, json.dumps(data, sort_keys=True, indent=2).encode()),
                )
                if res is not None:
                    for old in self._generations()[:-KEEP_MANIFESTS]:
                        store.remove_tree(self.dir / MANIFESTS / old)
                    return res
                log.warning(
                    "%s archive of alias %s: another writer archived at the same time (%s was taken): "
                    "appending again from its manifest",
                    self.kind,
                    self.alias,
                    store.url_of(nxt),
                )
            raise RunFolderError(
                f"the {self.kind} archive of alias {self.alias} ({store.url_of(self.dir)}) kept "
                f"changing under this writer ({CONFLICT_TRIES} tries): another archive writer runs "
                "in a loop; retry later"
            )
        self.dir.mkdir(parents=True, exist_ok=True)
        with file_lock(
            self.dir / ".writer.lock",
            f"the {self.kind} archive of alias {self.alias}",
            {"writer": "archive append"},
            lock_wait_s,
        ):

            def save(data: dict) -> bool:
                write_json(self.manifest_path, data)
                return True

            return self._append(cluster, topic, location, self.manifest(), save)

    def _append(self, cluster: Cluster, topic: str, location: str, m: dict, save) -> ArchiveResult | None:
        """Append past manifest ``m``; ``save(new manifest)`` writes it last and says whether it could (None: not
        saved - another writer took that generation)."""
        import pyarrow as pa  # lazy: heavy (pyarrow)

        res = ArchiveResult(self.alias, topic)
        topic_id = cluster.topic_id(topic)
        cluster_id = cluster.cluster_id()
        if m and (m.get("topic_id"), m.get("cluster_id")) != (topic_id, cluster_id):
            res.new_topic = True
            log.warning(
                "%s topic %s is not the one archived (topic id %s on cluster %s, was %s on %s): it "
                "was recreated, or the alias now names another cluster. A new segment of history starts; the "
                "old one is kept but no longer used",
                self.kind,
                topic,
                topic_id,
                cluster_id,
                m.get("topic_id"),
                m.get("cluster_id"),
            )
            m = {
                "segments": [
                    *m.get("segments", []),
                    {k: m[k] for k in ("topic_id", "cluster_id", "partitions") if k in m},
                ]
            }
        parts = {p for (_t, p) in cluster.partitions([topic])}
        lo = cluster.offsets([(topic, p) for p in parts], "earliest")
        hi = cluster.offsets([(topic, p) for p in parts], "latest")
        state = {int(p): v for p, v in (m.get("partitions") or {}).items()}
        start = {}
        for p in sorted(parts):
            done = state.get(p, {}).get("archived_to", 0)
            log_start = lo[(topic, p)]
            if log_start > done:  # retention or compaction of the head took records never archived
                gap = {"partition": p, "from": done, "to": log_start, "noticed_at": now_iso()}
                res.gaps.append(gap)
                state.setdefault(p, {}).setdefault("gaps", []).append(gap)
                log.warning(
                    "%s %s[%d] [%d, %d) were gone before they could be archived: the archive has no "
                    "history for that range",
                    self.kind,
                    topic,
                    p,
                    done,
                    log_start,
                )
                done = log_start
            start[p] = done
        end = {p: hi[(topic, p)] for p in parts}
        rows, bad = self.reader(cluster, topic, start, end)
        if rows:
            by_part: dict[int, list[dict]] = defaultdict(list)
            for r in rows:
                by_part[r[self.partition_column]].append(r)
            for p, prow in sorted(by_part.items()):
                safe_id = "".join(c if c.isalnum() else "_" for c in topic_id)  # base64: '/' and '+' too
                name = f"{safe_id}-p{p}-{start[p]}-{end[p]}.parquet"
                store.write_bytes(self.dir / name, store.parquet_bytes(pa.Table.from_pylist(prow)))  # whole, durable
                state.setdefault(p, {}).setdefault("files", []).append(name)
                res.files.append(name)
        faults.hit("archive.after_files")  # a crash here leaves files the manifest does not name: never read
        for p in parts:
            s = state.setdefault(p, {})
            if end[p] > start[p]:
                s.setdefault("ranges", []).append([start[p], end[p]])
            s["archived_to"] = max(end[p], s.get("archived_to", 0))
        res.appended = len(rows)
        saved = save(
            {
                **m,
                "alias": self.alias,
                "topic": topic,
                "topic_id": topic_id,
                "cluster_id": cluster_id,
                "location": location,
                "updated_at": now_iso(),
                "undecodable": bad + int(m.get("undecodable") or 0),
                "partitions": {str(p): v for p, v in sorted(state.items())},
            }
        )
        return res if saved else None

    def read(self) -> "ArchiveRead":
        """Every archived record of the current segment (the topic and cluster archived now; older segments are kept
        for the record but describe another topic's offsets), and the files that could not be read (named, with why:
        never an exception - the caller decides what to fall back to)."""
        import pyarrow.parquet as pq  # lazy: heavy (pyarrow)

        out = ArchiveRead()
        try:
            m = self.manifest()
        except RunFolderError as e:
            out.unreadable.append(f"{self.manifest_path}: {e}")
            return out
        names = [f for v in (m.get("partitions") or {}).values() for f in v.get("files", [])]
        for n in names:
            try:
                key, fs = store.parquet_args(self.dir / n)
                out.rows += pq.read_table(key, filesystem=fs).to_pylist()
            except Exception as e:  # noqa: BLE001 - a truncated or missing file: named, never a failed failover
                out.unreadable.append(f"{self.dir / n}: {type(e).__name__}: {e}")
        for u in out.unreadable:
            log.warning("%s archive of alias %s: cannot read %s", self.kind, self.alias, u)
        return out

    def rows(self) -> list[dict]:
        """Every archived record that could be read (see :meth:`read`)."""
        return self.read().rows

    def files(self) -> tuple[list[Path], list[str]]:
        """The files the manifest names (current segment), and why it could not be read (empty: it could)."""
        try:
            m = self.manifest()
        except RunFolderError as e:
            return [], [f"{self.manifest_path}: {e}"]
        return [self.dir / f for v in (m.get("partitions") or {}).values() for f in v.get("files", [])], []

    def archived_to(self) -> dict[int, int]:
        return {int(p): int(v.get("archived_to", 0)) for p, v in (self.manifest().get("partitions") or {}).items()}


SPILL_ROWS = 4_000_000  # archived syncs above which the columns read are spilled per partition (64 MB in memory)


class SyncArchive(TopicArchive):
    """MM2's offset syncs of one alias (``mm2-offset-syncs.<target>.internal``, on the source by default)."""

    kind = "offset-syncs"
    partition_column = "sync_partition"
    reader = staticmethod(read_syncs)

    def partition_syncs(
        self,
        wanted: Iterable[TP] | None = None,
        end: dict[int, int] | None = None,
        batch_rows: int = 1 << 20,
        spill_rows: int = SPILL_ROWS,
    ) -> tuple["SyncColumns", list[str]]:
        """The syncs of each wanted source partition (all: ``None``) as two int64 arrays ``(upstream, downstream)``,
        from the records below ``end`` per sync-topic partition (when given), and the files that could not be read.
        Columnar and streaming: each file is read a batch of ``batch_rows`` rows at a time, six columns, and only the
        wanted partitions' two offsets are kept (16 bytes a sync; no Python object per sync) - in memory, or, for an
        archive of more than ``spill_rows`` records, in a spill file per partition, read back when its index is built
        (:class:`SyncColumns`: memory bounded by a batch and the partitions proven at a time)."""
        import pyarrow.parquet as pq  # lazy: heavy (pyarrow)

        files, bad = self.files()
        want = None if wanted is None else set(wanted)
        total = sum(self.archived_to().values()) if not bad else 0
        out = SyncColumns(spill=total > spill_rows)
        cols = ["sync_partition", "sync_offset", "topic", "partition", "upstream", "downstream"]
        for path in files:
            try:
                with store.as_path(path).open("rb") as fh:
                    for b in pq.ParquetFile(fh).iter_batches(batch_size=batch_rows, columns=cols):
                        _keep_batch(b, want, end, out, np)
            except Exception as e:  # noqa: BLE001 - a truncated or missing file: named, never a failed failover
                bad.append(f"{path}: {type(e).__name__}: {e}")
        for u in bad:
            log.warning("%s archive of alias %s: cannot read %s", self.kind, self.alias, u)
        return out, bad


class SyncColumns:
    """(source topic, partition) -> its syncs' (upstream, downstream) int64 arrays, appended batch by batch, held in
    memory or in one spill file per partition (raw int64 pairs in a private temporary folder, removed with the object
    or when the last partition was taken). :meth:`pop` hands a partition's arrays over once."""

    def __init__(self, spill: bool = False):
        self._mem: dict[TP, list] = defaultdict(list)
        self._files: dict[TP, Path] = {}
        self._rows: dict[TP, int] = defaultdict(int)
        self._dir = Path(tempfile.mkdtemp(prefix="mm2-failover-syncs-")) if spill else None
        if self._dir is not None:
            self._cleanup = weakref.finalize(self, _remove_tree, self._dir)

    def rows(self, tp: TP) -> int:
        """How many syncs ``tp`` holds (not yet popped)."""
        return self._rows.get(tp, 0)

    def append(self, tp: TP, up, down) -> None:
        self._rows[tp] += len(up)
        if self._dir is None:
            self._mem[tp].append((up, down))
            return
        path = self._files.setdefault(tp, self._dir / f"p{len(self._files)}.bin")
        with open(path, "ab") as f:
            f.write(np.column_stack((up, down)).astype(np.int64).tobytes())

    def __contains__(self, tp) -> bool:
        return tp in self._mem or tp in self._files

    def __iter__(self):
        return iter(sorted(set(self._mem) | set(self._files)))

    def __len__(self) -> int:
        return len(set(self._mem) | set(self._files))

    def pop(self, tp: TP, default=None):
        self._rows.pop(tp, None)
        if tp in self._mem:
            cs = self._mem.pop(tp)
            return np.concatenate([c[0] for c in cs]), np.concatenate([c[1] for c in cs])
        if tp in self._files:
            path = self._files.pop(tp)
            pairs = np.fromfile(path, dtype=np.int64).reshape(-1, 2)
            path.unlink()
            if not self._files and self._dir is not None:
                self._cleanup()
            return pairs[:, 0].copy(), pairs[:, 1].copy()
        return default


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _keep_batch(b, want, end, out: SyncColumns, np) -> None:
    """Append to ``out`` the (upstream, downstream) of the batch's rows of wanted partitions below ``end``."""
    import pyarrow.compute as pc  # lazy: heavy (pyarrow)

    sp = b.column("sync_partition").to_numpy(zero_copy_only=False)
    keep = np.ones(len(sp), dtype=bool)
    if end is not None:
        ends = np.array([end.get(int(q), 0) for q in range(int(sp.max()) + 1)] if len(sp) else [], dtype=np.int64)
        keep &= b.column("sync_offset").to_numpy(zero_copy_only=False) < ends[sp]
    topics = pc.dictionary_encode(b.column("topic"))
    names = topics.dictionary.to_pylist()
    t_idx = topics.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    part = b.column("partition").to_numpy(zero_copy_only=False).astype(np.int64)
    width = int(part.max()) + 1 if len(part) else 1
    key = t_idx * width + part
    if want is not None:
        ok = np.array([(names[k // width], int(k % width)) in want for k in range(len(names) * width)], dtype=bool)
        keep &= ok[key]
    if not keep.any():
        return
    key, up, down = (
        key[keep],
        b.column("upstream").to_numpy(zero_copy_only=False)[keep],
        b.column("downstream").to_numpy(zero_copy_only=False)[keep],
    )
    order = np.argsort(key, kind="stable")
    key, up, down = key[order], up[order], down[order]
    keys, starts = np.unique(key, return_index=True)
    bounds = list(starts) + [len(key)]
    for i, k in enumerate(keys):
        a, z = bounds[i], bounds[i + 1]
        out.append((names[int(k) // width], int(k) % width), up[a:z].astype(np.int64), down[a:z].astype(np.int64))


class CheckpointArchive(TopicArchive):
    """MM2's checkpoint records of one alias (``<alias>.checkpoints.internal`` on the target)."""

    kind = "checkpoints"
    partition_column = "record_partition"
    reader = staticmethod(read_checkpoint_records)
