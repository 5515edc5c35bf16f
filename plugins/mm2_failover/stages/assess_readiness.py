"""Readiness, the I/O side (DAG ``mm2_failover_readiness``): after the interval's drain
observation, snapshot and latest checkpoints, build the plan a failover would build now (read-only), read the age of
the oldest record MM2 has not copied yet, and keep the answer (the rules: :mod:`mm2_failover.rules.readiness`).

What is kept, under ``$MM2_FAILOVER_ARTIFACTS/mm2_failover_readiness/``:

* ``<run>/readiness.json`` - the interval's answer: a summary, one row per group and per (group, partition);
* ``history.jsonl`` - one line per interval (the summary only: the Readiness page's trends); a torn last line (a
  crash mid-append) is skipped by readers and ended by the next append;
* ``latest.json`` - which run folder holds the newest answer, and the one before it (written last, atomically: the
  page and the next interval's comparison read it; a retried interval compares with the one before it again, and
  appends no second history line).

The run folders of older intervals keep ``readiness.json`` (the summary, ~1 KB) and their small files only: their
plan, checkpoints and snapshot are deleted once :data:`KEEP_FULL` newer intervals exist (at 10k groups they weigh
~100 MB each), their rows per group and partition (~2 MB at 10k groups x 10 partitions) once :data:`KEEP_ROWS` do.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from mm2_failover.adapters import store
from mm2_failover.adapters.answers import checkpoint_rows
from mm2_failover.adapters.config import artifacts_root
from mm2_failover.adapters.runfolder import (
    CHECKPOINTS,
    DRAIN,
    PLAN_CSV,
    PLAN_JSON,
    PLAN_REFUSAL,
    PLAN_ROWS,
    SNAPSHOT,
    RunFolder,
    fsync_path,
    read_json,
    write_json,
)
from mm2_failover.rules import readiness as rules
from mm2_failover.rules.audit import SETUP_RULES
from mm2_failover.rules.report import estimate_reread
from mm2_failover.stages.archive import archived_positions, failures, last_scheduled
from mm2_failover.stages.drill_report import plan_read_only
from mm2_failover.stages.snapshot import source_positions

log = logging.getLogger(__name__)

DAG_ID = "mm2_failover_readiness"
HISTORY = "history.jsonl"
LATEST = "latest.json"
KEEP_FULL = 3
HISTORY_TAIL_BYTES = 8 << 20  # what the page and the comparison read of the history: weeks of intervals
READ_AHEAD = 100  # records read per partition behind to find the oldest one not replicated
KEEP_ROWS = 12  # intervals (an hour) whose rows per group and partition are kept
ROWS = ("readiness_groups.parquet", "readiness_partitions.parquet")
HEAVY = (PLAN_JSON, PLAN_ROWS, PLAN_CSV, CHECKPOINTS, SNAPSHOT, DRAIN)


def root() -> Path:
    return artifacts_root() / DAG_ID


def oldest_unreplicated_ms(ctx, drain_rows: list[dict]) -> dict[tuple[str, int], int]:
    """(replica topic, partition) -> the timestamp of the first record after MM2's last replicated offset (or after
    the replica's end, where MM2's progress is unknown), read from the source for the partitions behind."""
    want: dict[str, dict[tuple[str, int], int]] = {}
    for d in drain_rows:
        n = rules.not_replicated(d)
        if not n:
            continue
        first = d["replicated"] + 1 if d.get("replicated") is not None else d.get("replica_end")
        if first is None:
            continue
        want.setdefault(d.get("alias") or ctx.aliases[0], {})[(d["topic"], int(d["partition"]))] = (
            first,
            d.get("source_end"),
            d.get("replica_topic"),
        )
    out: dict[tuple[str, int], int] = {}
    for alias, parts in want.items():
        src = ctx.source(alias)
        if src is None:
            continue
        try:
            starts = src.offsets(list(parts), "earliest")
            begin = {tp: max(first, starts.get(tp, 0)) for tp, (first, _e, _rt) in parts.items()}
            # a few records from there: the first one may be a transaction marker, which is never read
            ends = {tp: min(parts[tp][1], o + READ_AHEAD) for tp, o in begin.items() if parts[tp][1] > o}
            for t, p, _o, _k, _v, ts in src.read(ends, start={tp: begin[tp] for tp in ends}):
                out.setdefault((parts[(t, p)][2], p), ts)
        except Exception as e:  # noqa: BLE001 - the exposure in records stands; its age is then unknown
            log.warning(
                "alias %s: could not read the oldest record not yet replicated (%s: %s): its age is unknown",
                alias,
                type(e).__name__,
                e,
            )
    return out


def findings_of(folder: RunFolder, refusal: str | None) -> list[dict]:
    """The audit's warnings and the plan's refusal, each with the key the next interval compares by; a finding of
    the setup (:data:`mm2_failover.rules.audit.SETUP_RULES`) once, whatever the aliases, marked ``setup``."""
    out = []
    audit = folder.load_audit()
    for f in audit.warnings() if audit else []:
        if f.rule in SETUP_RULES:
            if not any(x["key"] == f"setup:{f.rule}" for x in out):
                out.append({"key": f"setup:{f.rule}", "text": f"setup: {f.message}", "setup": True})
            continue
        out.append({"key": f"audit:{f.alias}:{f.rule}", "text": f"audit {f.alias} {f.rule}: {f.message}"})
    if refusal:
        out.append({"key": "plan_refused", "text": f"a real failover would refuse its plan now: {refusal}"})
    return out


def previous(folder_name: str, base: Path | None = None) -> tuple[rules.Readiness | None, str | None]:
    """(the answer this interval compares with, its folder's name): the newest kept (``latest.json``) - or, when
    that is this interval's own (a retry of it), the one before it."""
    base = base or root()
    try:
        latest = read_json(base / LATEST, "readiness pointer") if (base / LATEST).exists() else {}
        name = latest.get("previous_folder") if latest.get("folder") == folder_name else latest.get("folder")
        return (RunFolder(base / name).load_readiness(partitions=False) if name else None), name
    except Exception as e:  # noqa: BLE001 - no comparison: this interval tells what is wrong already
        log.warning("the previous readiness answer cannot be read (%s): not compared", e)
        return None, None


def history(base: Path | None = None, since_s: float | None = None) -> list[dict]:
    """The history's lines (newest last), those computed in the last ``since_s`` seconds when given."""
    p = (base or root()) / HISTORY
    if not p.exists():
        return []
    out = []
    now_ms = int(time.time() * 1000)
    with p.open("rb") as f:  # the tail only: a day is ~300 lines of ~400 bytes, the file grows for ever
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - HISTORY_TAIL_BYTES))
        text = f.read().decode(errors="replace")
    lines = text.splitlines()[1:] if size > HISTORY_TAIL_BYTES else text.splitlines()  # the first may be cut
    for line in lines:
        try:
            h = json.loads(line)
            age = rules.age_seconds(h["computed_at"], now_ms)
        except (ValueError, TypeError, KeyError):
            continue  # a torn line (a crash mid-append), or one that is not an interval's
        if since_s is None or (age or 0) <= since_s:
            out.append(h)
    return out


def append_history(line: dict, base: Path | None = None) -> None:
    """One line, appended durably; a torn line before it is ended first. In an object store (no appends there) the
    object is rewritten whole with the line added, keeping its last ``HISTORY_TAIL_BYTES`` (what is ever read)."""
    p = (base or root()) / HISTORY
    data = json.dumps(line, sort_keys=True) + "\n"
    if store.is_remote(p):
        old = p.read_bytes() if p.exists() else b""
        if old and not old.endswith(b"\n"):
            old += b"\n"
        new = old + data.encode()
        if len(new) > HISTORY_TAIL_BYTES:
            new = new[len(new) - HISTORY_TAIL_BYTES :]
            new = new[new.find(b"\n") + 1 :]  # whole lines only
        store.write_bytes(p, new)
        return
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "a+b") as f:
        f.seek(0, os.SEEK_END)
        if f.tell():
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                data = "\n" + data
        f.write(data.encode())
        f.flush()
        os.fsync(f.fileno())
    fsync_path(p.parent)


def prune(base: Path, keep: int = KEEP_FULL, keep_rows: int = KEEP_ROWS) -> list[str]:
    """Delete the heavy files of every interval's folder but the ``keep`` newest (by their answer's time), and the
    rows of all but the ``keep_rows`` newest (their summaries stay, in readiness.json and the history)."""
    folders = sorted(
        (d for d in base.iterdir() if d.is_dir() and (d / "readiness.json").exists()),
        key=lambda d: (d / "readiness.json").stat().st_mtime,
    )
    pruned = []
    for i, d in enumerate(folders):
        names = (HEAVY if i < len(folders) - keep else ()) + (ROWS if i < len(folders) - keep_rows else ())
        for name in names:
            p = d / name
            if p.is_dir():
                store.remove_tree(p)
            elif p.exists():
                p.unlink()
            else:
                continue
            pruned.append(f"{d.name}/{name}")
    return pruned


def assess_readiness(ctx, *, interval_seconds: int, archive_stale_intervals: int) -> tuple[rules.Readiness, list]:
    """The interval's answer, kept (readiness.json, the history, latest.json), and what got worse since the
    previous one (:func:`mm2_failover.rules.readiness.degradations`)."""
    t0 = time.monotonic()
    f = ctx.folder
    plan, refusal = plan_read_only(ctx)
    rows = plan.as_dicts()
    snap = f.load_snapshot()
    reread = estimate_reread(rows, source_positions(ctx, snap))
    drained = f.load_drain()
    drain_rows = drained.rows if drained else []
    oldest = oldest_unreplicated_ms(ctx, drain_rows)
    cps = {}
    if f.checkpoints.exists():
        for c in checkpoint_rows(f.checkpoints, ["group", "topic", "partition", "checkpoint_timestamp"]):
            k = (c["group"], c["topic"], int(c["partition"]))
            ms = rules.to_ms(c["checkpoint_timestamp"])
            if ms is not None and ms > cps.get(k, -1):
                cps[k] = ms
    done = last_scheduled()
    archive = {alias: done.get(alias) for alias in ctx.aliases}
    positions = {
        alias: (kept[0]["read_to"] if (kept := archived_positions(alias)) else None)
        for alias in ctx.aliases
        if ctx.source_conn_of(alias) is not None
    }
    t1 = time.monotonic()
    prev, prev_name = previous(f.dir.name)
    r = rules.assess(
        run_id=ctx.run_id,
        now_ms=int(time.time() * 1000),
        rpo_seconds=ctx.params.rpo_seconds,
        plan_rows=rows,
        reread=reread,
        drain_rows=drain_rows,
        oldest_unreplicated_ms=oldest,
        drain_observed_ms=drained.observed_ms if drained else None,
        checkpoint_ms=cps,
        archive_updated=archive,
        findings=findings_of(f, refusal),
        archive_failures=failures(),
        positions_read=positions,
    )
    # before it is saved: what waits for the next interval is marked on it (readiness.degradations, rule 5)
    worse = rules.degradations(
        prev, r, interval_seconds=interval_seconds, archive_stale_intervals=archive_stale_intervals
    )
    f.save_readiness(r)
    last = history(root())[-1:]
    if not last or last[0].get("run_id") != ctx.run_id:  # a retry of this interval does not count twice
        append_history(rules.history_line(r))
    write_json(
        root() / LATEST,
        {"folder": f.dir.name, "previous_folder": prev_name, "run_id": ctx.run_id, "computed_at": r.computed_at},
    )
    pruned = prune(root())
    log.info(
        "readiness of %d group(s), %d partition(s): read in %.1f s, assessed in %.1f s: %s%s",
        r.summary["groups"],
        r.summary["partitions"],
        t1 - t0,
        time.monotonic() - t1,
        r.summary,
        f"; heavy files of {len(pruned)} older interval(s) deleted" if pruned else "",
    )
    if f.path(PLAN_REFUSAL).exists() and refusal:
        log.warning("a real failover would refuse its plan now: %s", refusal)
    return r, worse
