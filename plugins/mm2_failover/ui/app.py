"""The "mm2-failover reports" pages: a small read-only FastAPI app over the run artifacts.

Mounted by ``plugins/mm2_failover_plugin.py`` into Airflow's API server at ``/mm2`` (menu: Plugins ->
"mm2-failover reports"; each DAG run also gets an "mm2-failover report" tab: Airflow adds it to every DAG's runs,
and the runs of DAGs without a report say where to look instead). Testable without Airflow:
``create_app(root)``.

* ``/`` - failover and drill runs found under ``$MM2_FAILOVER_ARTIFACTS/<dag_id>/<run_id>/`` (a ``report.json``
  or ``drill.json``), newest first, with outcome, totals and time;
* ``/runs/<dag_id>/<run_id>`` - one run: totals, warnings, the per-group table, partitions, the drill's findings,
  and links to ``report.json``/``report.md`` (``drill.json``/``drill.md``), the plan (``plan.json``, its rows
  ``plan_rows.parquet``, ``plan.csv`` for ``kafka-consumer-groups --from-file``) and its approval
  (``approval.json``). A dry run, and a plan waiting for its approval, rejected or not approved in time, have a
  report too (written before anything is written);
* ``/runs/<dag_id>/<run_id>/live-diff`` - the run's plan against the target's commits *now* (rules:
  :mod:`mm2_failover.rules.plandiff`), read through the ``kafka_target`` connection when the page is asked for: as planned,
  not written yet, moved since, commit gone - for an approver (has anything moved since the plan?) and after the run
  (is every group still where it was put?); at most 200 groups a page, filtered by name;
* ``/drills`` - the trend across drill runs: a table and inline SVG plots;
* ``/readiness`` - what a failover would do now (the newest interval of ``mm2_failover_readiness``): a summary, the
  findings, the per-group table (filters: answer, group name, over the RPO; the worst first) and, over the last
  day, the trends of groups not provable exactly and of the worst exposure; the rows themselves as Parquet.

Inside Airflow the pages need Airflow's login and the reader's read permission on the DAG whose runs they show
(:mod:`mm2_failover.ui.access`: anonymous 401, no permission 403; the index lists only readable DAGs' runs). They
serve only report data - group and topic names, offsets, counts - read from whitelisted file names
(:data:`mm2_failover.ui.runs.SERVED_FILES`), never connection settings or the backup (which names the cluster); keys
that look like credentials or connection settings are removed from the JSON before it is served. Everything shown is
HTML-escaped (:mod:`mm2_failover.ui.pages`), and the pages carry a strict Content-Security-Policy (no scripts).

Without Airflow: ``python -m mm2_failover.ui.app`` serves the same pages, with no login, on loopback by default.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any, Callable

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, PlainTextResponse, Response, StreamingResponse

from mm2_failover.adapters import config
from mm2_failover.adapters.runfolder import PLAN_JSON, RunFolder, RunFolderError, now_iso
from mm2_failover.adapters.store import as_path, is_remote
from mm2_failover.rules import plandiff
from mm2_failover.rules.notify import READINESS_DAG, REPORT_DAGS
from mm2_failover.ui import pages
from mm2_failover.ui.access import OpenAccess
from mm2_failover.ui.runs import (
    MAX_RUNS,
    SERVED_FILES,
    STREAMED_FILES,
    JsonCache,
    run_folder,
    run_reports,
    run_tries,
    scan_runs,
    scrub,
    target_commits,
)

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
    "frame-ancestors 'self'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class Site:
    """What every page reads, one per app: the artifacts folder, who may read what, the live diff's read of the
    target, and the JSON files already parsed."""

    def __init__(self, root: Path | Callable[[], Path] | None, access, commits: Callable[[list[str]], dict] | None):
        self.root, self.access, self.commits = root, access, commits
        self.cache = JsonCache()

    def artifacts(self) -> Path:
        if self.root is None:
            return config.artifacts_root()
        return as_path(self.root() if callable(self.root) else self.root)  # a local folder or an object store's prefix

    def readable(self, user, runs: list[dict]) -> list[dict]:
        allowed: dict[str, bool] = {}
        return [r for r in runs if allowed.setdefault(r["dag_id"], self.access.can_read(user, r["dag_id"]))]

    def must_read(self, user, dag_id: str) -> None:
        if not self.access.can_read(user, dag_id):
            raise HTTPException(status_code=403, detail=f"your Airflow login may not read the runs of {dag_id}")

    def run_folder(self, dag_id: str, run_id: str) -> Path | None:
        return run_folder(self.artifacts(), dag_id, run_id)


async def security_headers(request, call_next):
    resp = await call_next(request)
    for k, v in HEADERS.items():
        resp.headers.setdefault(k, v)
    return resp


def base(request: Request) -> str:
    return request.scope.get("root_path", "").rstrip("/")


def not_found(request: Request, what: str) -> HTMLResponse:
    return HTMLResponse(pages.page("Not found", f"<p>{pages.esc(what)}</p>", base(request)), status_code=404)


def index_page(site: Site, request: Request, limit: int, user: Any) -> HTMLResponse:
    rt = site.artifacts()
    runs = site.readable(user, scan_runs(rt, site.cache, max(1, min(limit, 5000))))
    return HTMLResponse(pages.render_index(runs, base(request), rt.is_dir()))


def drills_page(site: Site, request: Request, user: Any) -> HTMLResponse:
    runs = [r for r in site.readable(user, scan_runs(site.artifacts(), site.cache, 5000)) if r["drill_totals"]]
    return HTMLResponse(pages.render_trend(runs, base(request)))


def readiness_page(site: Site, request: Request, answer: str, group: str, over_rpo: bool, user: Any) -> HTMLResponse:
    site.must_read(user, READINESS_DAG)
    base_dir = site.artifacts() / READINESS_DAG
    latest = site.cache.get(base_dir / "latest.json")
    folder = site.run_folder(READINESS_DAG, str(latest.get("folder"))) if isinstance(latest, dict) else None
    try:
        r = RunFolder(folder).load_readiness(partitions=False) if folder is not None else None
    except RunFolderError as e:
        return HTMLResponse(
            pages.page(
                "Readiness", f"<p class=warn>The newest interval cannot be read: {pages.esc(e)}</p>", base(request)
            ),
            status_code=500,
        )
    # the plugin is loaded in every task process: the stages (Kafka's client with them) only when a page needs one
    from mm2_failover.stages.assess_readiness import history  # lazy: the plugin in every task

    hist = history(base_dir, since_s=86400) if base_dir.is_dir() else []
    answer = answer if answer in pages.ANSWER_FILTERS else ""
    return HTMLResponse(
        pages.render_readiness(
            r.as_dict() if r else None,
            hist,
            base(request),
            answer,
            group[:200],
            over_rpo,
            folder.name if folder else "",
        )
    )


def run_page(site: Site, request: Request, dag_id: str, run_id: str, user: Any) -> HTMLResponse:
    site.must_read(user, dag_id)
    if dag_id not in REPORT_DAGS:  # Airflow shows the plugin's run tab on every DAG's runs: say what is where
        return HTMLResponse(
            pages.render_no_report(dag_id, base(request)), status_code=200 if dag_id in pages.NO_REPORT else 404
        )
    folder = site.run_folder(dag_id, run_id)
    if folder is None:
        return not_found(
            request,
            f"No report for run {run_id} of {dag_id} under the artifacts folder (runs of "
            "other DAGs, and failover runs that stopped before verify, have none).",
        )
    rep, drill = run_reports(folder, site.cache, pages.MAX_ROWS)
    if rep is None and drill is None:
        return not_found(
            request,
            f"Run {run_id} of {dag_id} has no report yet (it is still running, or stopped before its last task).",
        )
    files = [f for f in SERVED_FILES if (folder / f).is_file()]
    tries = run_tries(site.access, dag_id, str((rep or drill or {}).get("run_id") or run_id))
    return HTMLResponse(pages.render_run(folder.parent.name, folder.name, rep, drill, files, base(request), tries))


def live_diff_page(site: Site, request: Request, dag_id: str, run_id: str, group: str, user: Any) -> HTMLResponse:
    site.must_read(user, dag_id)
    folder = site.run_folder(dag_id, run_id)
    if folder is None or not (folder / PLAN_JSON).is_file():
        return not_found(
            request, f"Run {run_id} of {dag_id} has no plan (build_plan has not run, or this DAG builds none)."
        )
    contains = group[:200]
    try:
        rec = RunFolder(folder).load_plan()
    except RunFolderError as e:
        logging.getLogger(__name__).warning("live diff of %s/%s: %s", dag_id, folder.name, e)
        return not_found(
            request, f"The plan of run {run_id} of {dag_id} cannot be read (the API server's log says why)."
        )
    writes = [r.as_dict() for r in rec.plan.rows if r.writes]
    groups, left_out = plandiff.select_groups([w["group"] for w in writes], contains)
    read_at = now_iso()
    try:
        now = (site.commits or target_commits)(groups) if groups else {}
    except Exception as e:  # noqa: BLE001 - the page says so; the detail (it may name the cluster) is logged
        logging.getLogger(__name__).warning(
            "live diff of %s/%s: the target's commits could not be read: %s", dag_id, folder.name, e
        )
        return HTMLResponse(
            pages.render_live_diff(
                dag_id,
                folder.name,
                run_id,
                None,
                contains,
                read_at,
                base(request),
                error=pages.target_read_error(e),
            ),
            status_code=502,
        )
    d = plandiff.diff(writes, now, groups, left_out)
    return HTMLResponse(pages.render_live_diff(dag_id, folder.name, run_id, d, contains, read_at, base(request)))


def raw_file(site: Site, dag_id: str, run_id: str, name: str, user: Any) -> Response:
    site.must_read(user, dag_id)
    folder = site.run_folder(dag_id, run_id)
    if folder is None or name not in SERVED_FILES or not (folder / name).is_file():
        return PlainTextResponse("not found", status_code=404)
    if name in STREAMED_FILES:
        if not is_remote(folder):
            return FileResponse(folder / name, media_type=SERVED_FILES[name], filename=name)

        def chunks(p=folder / name):
            with p.open("rb") as fh:
                while chunk := fh.read(1 << 20):
                    yield chunk

        return StreamingResponse(
            chunks(),
            media_type=SERVED_FILES[name],
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )
    if name.endswith(".json"):
        data = site.cache.get(folder / name)
        return Response(json.dumps(scrub(data), indent=2, sort_keys=True), media_type=SERVED_FILES[name])
    return PlainTextResponse((folder / name).read_text(errors="replace"), media_type=SERVED_FILES[name])


def create_app(
    root: Path | Callable[[], Path] | None = None, access=None, commits: Callable[[list[str]], dict] | None = None
):
    """The FastAPI app. ``root``: the artifacts folder (default: ``$MM2_FAILOVER_ARTIFACTS`` at request time);
    ``access``: who may read what (:mod:`mm2_failover.ui.access`; the Airflow plugin passes ``AirflowAccess()``,
    default ``OpenAccess()``); ``commits``: the live diff's read of the target (default
    :func:`mm2_failover.ui.runs.target_commits`). The routes only declare their parameters (the reader's login is
    ``access.get_user``, per app) and call the page functions above."""
    access = access or OpenAccess()
    reader = Depends(access.get_user)
    site = Site(root, access, commits)
    app = FastAPI(title="mm2-failover reports", docs_url=None, redoc_url=None, openapi_url=None)
    app.middleware("http")(security_headers)

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request, limit: int = MAX_RUNS, user=reader):
        return index_page(site, request, limit, user)

    @app.get("/drills", response_class=HTMLResponse)
    def drills(request: Request, user=reader):
        return drills_page(site, request, user)

    @app.get("/readiness", response_class=HTMLResponse)
    def readiness(request: Request, answer: str = "", group: str = "", over_rpo: bool = False, user=reader):
        return readiness_page(site, request, answer, group, over_rpo, user)

    @app.get("/runs/{dag_id}/{run_id}", response_class=HTMLResponse)
    def run(request: Request, dag_id: str, run_id: str, user=reader):
        return run_page(site, request, dag_id, run_id, user)

    @app.get("/runs/{dag_id}/{run_id}/live-diff", response_class=HTMLResponse)
    def live_diff(request: Request, dag_id: str, run_id: str, group: str = "", user=reader):
        return live_diff_page(site, request, dag_id, run_id, group, user)

    @app.get("/runs/{dag_id}/{run_id}/{name}")
    def raw(request: Request, dag_id: str, run_id: str, name: str, user=reader):
        return raw_file(site, dag_id, run_id, name, user)

    return app


def main() -> None:  # pragma: no cover - a standalone server for the reports (no Airflow)
    import uvicorn  # lazy: optional (uvicorn)

    ap = argparse.ArgumentParser(description="Serve the mm2-failover reports pages without Airflow (read-only).")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8099)
    ap.add_argument("--artifacts", default=config.setting("artifacts"))
    a = ap.parse_args()
    uvicorn.run(create_app(a.artifacts or None), host=a.host, port=a.port)


if __name__ == "__main__":  # pragma: no cover
    main()
