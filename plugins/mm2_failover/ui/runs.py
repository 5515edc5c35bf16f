"""The runs the "mm2-failover reports" pages show: finding them under the artifacts folder
(``<dag_id>/<run_id>/``, the folder names :func:`safe_name` gives), reading what a page shows (their files, their
task tries, the target's commits now), and scrubbing what is served (:func:`scrub`). Only the whitelisted files
(``SERVED_FILES``) are ever served; the routes: :mod:`mm2_failover.ui.app`.
"""

from __future__ import annotations

import json
import logging
import re
from collections import OrderedDict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mm2_failover.adapters import store
from mm2_failover.adapters.config import TARGET_CONN_ID
from mm2_failover.adapters.runfolder import (
    APPROVAL,
    DRILL_JSON,
    DRILL_MD,
    PLAN_CSV,
    PLAN_JSON,
    PLAN_ROWS,
    READINESS,
    READINESS_GROUPS,
    READINESS_PARTITIONS,
    REPORT_JSON,
    REPORT_MD,
    REPORT_PARTITIONS,
    REPORT_STALE,
    SUMMARY,
    RunFolder,
    RunFolderError,
)
from mm2_failover.rules.report import run_summary

SERVED_FILES = {
    REPORT_JSON: "application/json",
    REPORT_MD: "text/plain; charset=utf-8",
    DRILL_JSON: "application/json",
    DRILL_MD: "text/plain; charset=utf-8",
    APPROVAL: "application/json",
    PLAN_JSON: "application/json",
    PLAN_CSV: "text/csv; charset=utf-8",
    PLAN_ROWS: "application/vnd.apache.parquet",
    READINESS: "application/json",
    READINESS_GROUPS: "application/vnd.apache.parquet",
    READINESS_PARTITIONS: "application/vnd.apache.parquet",
    REPORT_PARTITIONS: "application/vnd.apache.parquet",
    REPORT_STALE: "application/vnd.apache.parquet",
}
#: served as written, never parsed here (the plan's rows at 10k groups are 100k): they hold the run's parameters and
#: rows only - RunParams has no field for a connection setting or a credential (tests/unit/test_ui_pages.py)
STREAMED_FILES = {
    PLAN_JSON,
    PLAN_CSV,
    PLAN_ROWS,
    READINESS_GROUPS,
    READINESS_PARTITIONS,
    REPORT_PARTITIONS,
    REPORT_STALE,
}
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")
_SECRET_KEY = re.compile(r"password|passwd|secret|token|sasl|ssl|jaas|credential|bootstrap|keytab|oauth", re.I)
MAX_RUNS = 500


def safe_name(name: str) -> str | None:
    """The folder name config.run_dir uses for a dag/run id; None for names that could leave the root."""
    s = _UNSAFE.sub("_", name or "")
    if not s or s.startswith(".") or len(s) > 250:
        return None
    return s


def scrub(obj: Any) -> Any:
    """Drop keys that look like credentials or connection settings (defence in depth: reports hold none)."""
    if isinstance(obj, dict):
        return {k: scrub(v) for k, v in obj.items() if not _SECRET_KEY.search(str(k))}
    if isinstance(obj, list):
        return [scrub(v) for v in obj]
    return obj


class JsonCache:
    """Parsed JSON files, reloaded when their mtime/size change."""

    def __init__(self, size: int = 64):
        self.size = size
        self.d: OrderedDict[str, tuple[tuple[int, int], Any]] = OrderedDict()

    def get(self, path: Path) -> Any:
        try:
            st = path.stat()
        except OSError:
            return None
        sig = (getattr(st, "st_mtime_ns", None) or int(st.st_mtime * 1e9), st.st_size)  # a store's objects: no _ns
        k = str(path)
        hit = self.d.get(k)
        if hit and hit[0] == sig:
            self.d.move_to_end(k)
            return hit[1]
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = None
        self.d[k] = (sig, data)
        while len(self.d) > self.size:
            self.d.popitem(last=False)
        return data


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds")


MAX_FALLBACK_BYTES = 2 << 20  # a run without summary.json (older versions): parse its report only if this small


_SUMMARY_TYPES = {"dag_id": str, "run_id": str, "kind": str, "outcome": str, "time": str, "drill_totals": dict}


def _valid(summary: Any) -> bool:
    if not isinstance(summary, dict):
        return False
    for k, ty in _SUMMARY_TYPES.items():
        if k in summary and not isinstance(summary[k], ty):
            return False
    num = (
        "groups",
        "moved",
        "partitions",
        "committed",
        "skipped",
        "clamped",
        "lost",
        "mismatches",
        "reread",
        "findings",
    )
    return all(summary.get(k) is None or isinstance(summary[k], (int, float)) for k in num)


def _unreadable(dag_id: str, folder: str, mtime: float, why: str) -> dict:
    return {
        "dag_id": dag_id,
        "folder": folder,
        "run_id": folder,
        "kind": "failover",
        "outcome": "unreadable",
        "time": _iso(mtime),
        "why": why,
        "drill_totals": {},
        **{
            k: None
            for k in (
                "groups",
                "moved",
                "partitions",
                "committed",
                "skipped",
                "clamped",
                "lost",
                "mismatches",
                "reread",
                "findings",
            )
        },
    }


def scan_runs(root: Path, cache: JsonCache, limit: int = MAX_RUNS) -> list[dict]:
    """Runs with a report under ``root/<dag_id>/<run>/``, newest first, from each run's ``summary.json``. A run whose
    files are missing, too big or malformed is listed as unreadable; it never breaks the page for the others."""
    found = []
    if not root.is_dir():
        return []
    for dag_dir in root.iterdir():
        if not dag_dir.is_dir() or dag_dir.name.startswith("."):
            continue
        # each DAG folder's runs in one listing (a store answered each name looked for below a file in 5-11 s)
        for run, files in store.files_in_subfolders(dag_dir, (SUMMARY, DRILL_JSON, REPORT_JSON)).items():
            if files:
                found.append((max(files.values()), dag_dir.name, dag_dir / run, set(files)))
    found.sort(key=lambda x: x[0], reverse=True)
    out = []
    for mtime, dag_id, run, present in found[:limit]:
        try:
            s = summarize_folder(dag_id, run, cache, mtime, present)
        except Exception as e:  # noqa: BLE001 - one bad run never breaks the index
            s = _unreadable(dag_id, run.name, mtime, f"{type(e).__name__}: {e}")
        out.append(s)
    return out


def summarize_folder(dag_id: str, run: Path, cache: JsonCache, mtime: float, present: set[str]) -> dict:
    """The index's row of one run, from its summary.json or, without one, its report; ``present``: which of those
    files the run holds, as its listing showed."""
    summary = cache.get(run / SUMMARY) if SUMMARY in present else None
    if summary is None:  # a run written before summary.json existed: its report, if small enough
        loaded = {}
        for name in (REPORT_JSON, DRILL_JSON):
            p = run / name
            if name in present:
                if p.stat().st_size > MAX_FALLBACK_BYTES:
                    return _unreadable(dag_id, run.name, mtime, f"{name} is large and the run has no {SUMMARY}")
                loaded[name] = cache.get(p)
        rep, drill = loaded.get(REPORT_JSON), loaded.get(DRILL_JSON)
        if (rep is not None and not isinstance(rep, dict)) or (drill is not None and not isinstance(drill, dict)):
            return _unreadable(dag_id, run.name, mtime, "report is not a JSON object")
        if rep is None and drill is None:
            return _unreadable(dag_id, run.name, mtime, "report is not valid JSON")
        summary = run_summary(dag_id, (drill or rep).get("run_id", run.name), rep, drill, _iso(mtime))
    if not _valid(summary):
        return _unreadable(dag_id, run.name, mtime, "summary has unexpected values")
    return {**summary, "dag_id": dag_id, "folder": run.name, "run_id": summary.get("run_id") or run.name}


def run_tries(access, dag_id: str, run_id: str) -> list[dict] | None:
    """The run's task tries for its timeline, from ``access`` (Airflow's database inside Airflow); None when it has
    none or they cannot be read now (logged: the page is shown without its timeline)."""
    read = getattr(access, "task_tries", None)
    if read is None:
        return None
    try:
        return read(dag_id, run_id)
    except Exception as e:  # noqa: BLE001 - the page without its timeline
        logging.getLogger(__name__).warning("the task tries of %s/%s could not be read: %s", dag_id, run_id, e)
        return None


def target_commits(groups: list[str]) -> dict[str, dict[tuple[str, int], int]]:
    """The groups' commits on the target now, through the ``kafka_target`` connection (the live diff's read)."""
    # the plugin is loaded in every task process: Kafka's client only when the live diff is asked for
    from mm2_failover.hooks.kafka_cluster import KafkaClusterHook  # lazy: the plugin in every task

    cluster = KafkaClusterHook(TARGET_CONN_ID, role="target").cluster()
    return {g: {tp: c.offset for tp, c in cs.items()} for g, cs in cluster.commits_many(groups).items()}


def run_folder(root: Path, dag_id: str, run_id: str) -> Path | None:
    """The folder of run ``run_id`` of ``dag_id`` under ``root``; None if it has none, or the ids could leave it."""
    d, r = safe_name(dag_id), safe_name(run_id)
    if not d or not r or d != dag_id:
        # the DAG id authorized must be the folder's own: another id that maps to it ('mm2:failover') is not it
        return None
    rt = root.resolve()
    p = (rt / d / r).resolve()
    return p if p.parent.parent == rt and p.is_dir() else None


def run_reports(folder: Path, cache: JsonCache, rows: int) -> tuple[dict | None, dict | None]:
    """The run's report and drill (None: it has none); a report whose partitions are in Parquet gets its first
    ``rows`` rows from there (none, and a warning, when that file cannot be read)."""
    rep = cache.get(folder / REPORT_JSON) if (folder / REPORT_JSON).is_file() else None
    if rep is not None and isinstance(rep.get("partitions"), str):  # the first rows only, from the Parquet file
        try:
            rep = {**rep, "partitions": RunFolder(folder).parquet_rows(REPORT_PARTITIONS, "", rows)}
        except RunFolderError:
            rep = {
                **rep,
                "partitions": [],
                "warnings": [*(rep.get("warnings") or []), f"{REPORT_PARTITIONS} cannot be read"],
            }
    drill = cache.get(folder / DRILL_JSON) if (folder / DRILL_JSON).is_file() else None
    return rep, drill
