"""The "mm2-failover reports" pages' HTML: pure functions from a run's data to its page (the routes that call them:
:mod:`mm2_failover.ui.app`; what they are given: :mod:`mm2_failover.ui.runs`).

Everything shown is HTML-escaped (:func:`esc`; a table's ``raw`` cells are built with it), the pages hold no script,
and a picture (:mod:`mm2_failover.pictures`) that cannot be drawn never breaks its page (logged). At most
``MAX_ROWS`` rows a table: the files linked from the page have them all.
"""

from __future__ import annotations

import html
import logging
import time
from datetime import datetime, timezone
from typing import Any, Callable
from urllib.parse import quote

from mm2_failover import pictures
from mm2_failover.adapters.config import TARGET_CONN_ID
from mm2_failover.adapters.runfolder import (
    PLAN_JSON,
    READINESS,
    READINESS_GROUPS,
    READINESS_PARTITIONS,
    REPORT_PARTITIONS,
)
from mm2_failover.rules import plandiff
from mm2_failover.rules.approval import Decision, group_reread_text, reread_text
from mm2_failover.rules.notify import READINESS_DAG, REPORT_DAGS
from mm2_failover.rules.readiness import answer_counts
from mm2_failover.rules.report import (
    APPROVAL_OUTCOMES,
    fate_shown,
    outcome_note,
    worst_first,
    worst_partitions_first,
)

MAX_ROWS = 2000

FOOTER = (
    "Read-only view of the run reports under the artifacts folder (inside Airflow: the runs of the DAGs your "
    "login may read). Report data only - group and topic names, offsets, counts - never connection settings "
    "or credentials."
)

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.2rem;color:#1d2939;font-size:14px}
h1{font-size:1.35rem;margin:.2rem 0 .8rem} h2{font-size:1.1rem;margin:1.4rem 0 .5rem}
table{border-collapse:collapse;margin:.3rem 0 1rem} th,td{border:1px solid #d0d5dd;padding:.25rem .5rem}
th{background:#f2f4f7;text-align:left} td.n{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:.1rem .5rem;border-radius:.6rem;font-weight:600;font-size:.85rem}
.succeeded{background:#d1fadf;color:#05603a}.failed,.unreadable{background:#fee4e2;color:#912018}
.dry_run,.drill,.awaiting_approval,.approved{background:#e0eaff;color:#1d3a8a}
.rejected,.approval_timed_out{background:#fef0c7;color:#7a2e0e}.warn{background:#fef0c7;color:#7a2e0e;padding:.3rem .6rem;margin:.2rem 0}
nav a{margin-right:1rem} footer{margin-top:2rem;color:#667085;font-size:.8rem;border-top:1px solid #eaecf0;padding-top:.5rem}
.muted{color:#667085} figure.picture{margin:.4rem 0 1rem;color:#1d2939;max-width:100%;width:fit-content}
figure.picture svg{max-width:100%;height:auto} figcaption{color:#667085;font-size:.85rem}
.pictures{display:flex;flex-wrap:wrap;gap:0 1.5rem;align-items:flex-start}
table{display:block;max-width:100%;overflow-x:auto} body{max-width:100%;overflow-wrap:anywhere}
@media (prefers-color-scheme: dark){
body{background:#101828;color:#e4e7ec} th{background:#1d2939} th,td{border-color:#344054}
.muted,footer{color:#98a2b3} footer{border-top-color:#344054} a{color:#84adff}
figure.picture{color:#e4e7ec} figcaption{color:#98a2b3}
.succeeded{background:#054f31;color:#d1fadf}.failed,.unreadable{background:#7a271a;color:#fee4e2}
.dry_run,.drill,.awaiting_approval,.approved{background:#1d3a8a;color:#e0eaff}
.rejected,.approval_timed_out,.warn{background:#7a2e0e;color:#fef0c7}
}
"""


def esc(v: Any) -> str:
    """HTML-escape anything (None -> empty)."""
    return "" if v is None else html.escape(str(v), quote=True)


def page(title: str, body: str, base: str) -> str:
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{esc(title)}</title>"
        f"<meta name=viewport content='width=device-width,initial-scale=1'><style>{CSS}</style></head><body>"
        f"<nav><a href='{esc(base)}/'>All runs</a><a href='{esc(base)}/readiness'>Readiness</a>"
        f"<a href='{esc(base)}/drills'>Drill trend</a></nav>"
        f"<h1>{esc(title)}</h1>{body}<footer>{esc(FOOTER)}</footer></body></html>"
    )


def table(
    headers: list[str],
    rows: list[list[Any]],
    numeric: set[int] | None = None,
    raw: set[int] | None = None,
    cls: str = "",
) -> str:
    """``raw``: column indexes whose cells are already-safe HTML (built with esc())."""
    numeric, raw = numeric or set(), raw or set()
    h = "".join(f"<th>{esc(x)}</th>" for x in headers)
    body = []
    for r in rows:
        cells = []
        for i, v in enumerate(r):
            c = " class=n" if i in numeric else ""
            cells.append(f"<td{c}>{v if i in raw else esc(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table class='{esc(cls)}'><thead><tr>{h}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def badge(outcome: str) -> str:
    return f"<span class='badge {esc(outcome)}'>{esc(outcome.replace('_', ' ').upper())}</span>"


def run_href(base: str, dag_id: str, folder: str) -> str:
    return f"{base}/runs/{quote(dag_id, safe='')}/{quote(folder, safe='')}"


def picture(draw: Callable[..., str], *args: Any) -> str:
    """One picture of :mod:`mm2_failover.pictures`; one that cannot be drawn never breaks the page (logged)."""
    try:
        return draw(*args)
    except Exception:  # noqa: BLE001 - the page without this picture, and the reason in the API server's log
        logging.getLogger(__name__).exception("the picture %s could not be drawn", draw.__name__)
        return f"<p class=muted>The picture {esc(draw.__name__)} could not be drawn (the log says why).</p>"


def _num(v: Any) -> str:
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else f"{v:.1f}"
    return "" if v is None else str(v)


def render_index(runs: list[dict], base: str, root_exists: bool) -> str:
    if not runs:
        msg = (
            "No failover or drill run has written a report yet."
            if root_exists
            else "The artifacts folder does not exist yet: no run has written a report."
        )
        return page("mm2-failover reports", f"<p class=muted>{esc(msg)}</p>", base)
    rows = []
    for r in runs:
        link = f"<a href='{esc(run_href(base, r['dag_id'], r['folder']))}'>{esc(r['run_id'])}</a>"
        outcome = f"{badge('drill')} {esc(r['findings'])} finding(s)" if r["kind"] == "drill" else badge(r["outcome"])
        if r["outcome"] == "unreadable":
            outcome += f" <span class=muted>{esc(r.get('why'))}</span>"
        rows.append(
            [
                r["time"],
                r["dag_id"],
                link,
                outcome,
                r["groups"],
                r["moved"],
                r["partitions"],
                r["committed"],
                r["skipped"],
                r["clamped"],
                r["lost"],
                group_reread_text({"reread_estimate": r["reread"], "reread_unknown": r.get("reread_unknown")}),
            ]
        )
    body = f"<p class=muted>{len(runs)} run(s) under the artifacts folder, newest first.</p>" + table(
        [
            "time (UTC)",
            "DAG",
            "run",
            "outcome",
            "groups",
            "moved",
            "partitions",
            "committed",
            "skipped",
            "clamped",
            "lost to retention",
            "est. re-read",
        ],
        rows,
        numeric=set(range(4, 12)),
        raw={2, 3},
        cls="runs",
    )
    return page("mm2-failover reports", body, base)


def render_report(rep: dict, dry_note: str = "dry run: nothing was written") -> str:
    t = rep.get("totals") or {}
    pending = rep.get("outcome") in APPROVAL_OUTCOMES
    note = outcome_note(rep) if pending else dry_note if rep.get("dry_run") else ""
    parts = [
        f"<p>Outcome: {badge(rep.get('outcome', 'unknown'))}"
        + (f" <span class=muted>({esc(note)})</span>" if note else "")
        + "</p>"
    ]
    if rep.get("approval") and not pending:
        parts.append(f"<p class=approval>Approval: {esc(Decision.from_dict(rep['approval']).describe())}</p>")
    keys = [
        ("groups", "groups"),
        ("groups_moved", "moved"),
        ("partitions", "partitions"),
        ("committed", "committed"),
        ("skipped", "skipped"),
        ("clamped", "clamped"),
        ("refused_groups", "refused groups"),
        ("mismatches", "mismatches"),
        ("records_lost_to_retention", "lost to retention"),
        ("records_lost_to_retention_upper_bound", "lost to retention (at most)"),
        ("records_reread_estimate", "est. re-read"),
        ("lag", "lag"),
    ]
    shown = {"records_reread_estimate": reread_text(t)}  # a count, an estimate, or unknown: said as what it is
    parts.append(
        table(
            [h for _, h in keys],
            [[shown.get(k, t.get(k)) for k, _ in keys]],
            numeric=set(range(len(keys))),
            cls="totals",
        )
    )
    for w in rep.get("warnings") or []:
        parts.append(f"<div class=warn>WARNING: {esc(w)}</div>")
    if rep.get("mismatches"):  # the worst first: what is not as planned, before the groups
        parts.append(
            "<h2>Mismatches (committed != planned)</h2>"
            + table(
                ["group", "topic", "partition", "planned", "committed"],
                [
                    [m.get("group"), m.get("topic"), m.get("partition"), m.get("planned"), m.get("committed")]
                    for m in rep["mismatches"][:MAX_ROWS]
                ],
                numeric={2, 3, 4},
                cls="mismatches",
            )
        )
    groups = worst_first(rep.get("groups") or [])
    prow = rep.get("partitions") or []
    if isinstance(prow, str):  # a report.json that names its rows' file, and no rows were read
        prow = []
    prow = worst_partitions_first(prow)
    parts.append(report_pictures(t, groups, prow))
    heads = [
        "group",
        "aliases",
        "fate",
        "partitions",
        "committed",
        "skipped",
        "clamped",
        "refused",
        "lag",
        "lost to retention",
        "re-read (est.)",
    ]
    rows = []
    for g in groups[:MAX_ROWS]:
        aliases = g.get("source_aliases", [g.get("source_alias")] if g.get("source_alias") else [])
        rows.append(
            [
                g.get("group"),
                ", ".join(str(a) for a in aliases or []),
                fate_shown(g.get("fate"), rep.get("outcome")),
                g.get("partitions"),
                g.get("committed"),
                g.get("skipped"),
                g.get("clamped"),
                g.get("refused") or "",
                g.get("lag"),
                g.get("retention_lost"),
                group_reread_text(g),
            ]
        )
    parts.append(
        f"<h2>Groups ({len(groups)})</h2><p class=muted>Worst first: refused, not as planned, lost to "
        "retention, then by re-read.</p>"
    )
    if len(groups) > MAX_ROWS:
        parts.append(f"<p class=muted>First {MAX_ROWS} shown; report.json has them all.</p>")
    parts.append(table(heads, rows, numeric={3, 4, 5, 6, 8, 9, 10}, cls="groups"))
    if prow:
        cols = [
            "group",
            "topic",
            "partition",
            "upstream_offset",
            "downstream_offset",
            "current_offset",
            "planned_offset",
            "committed_after",
            "action",
            "reason",
            "lag",
        ]
        total = max(int(t.get("partitions") or 0), len(prow))
        more = (
            f"<p class=muted>First {MAX_ROWS} shown; {REPORT_PARTITIONS} has all {total}.</p>"
            if total > MAX_ROWS
            else ""
        )
        parts.append(
            f"<details><summary>Partitions ({total})</summary>"
            + more
            + table(
                [
                    "group",
                    "topic",
                    "partition",
                    "upstream",
                    "downstream",
                    "before",
                    "planned",
                    "after",
                    "action",
                    "reason",
                    "lag",
                ],
                [[p.get(c) for c in cols] for p in prow[:MAX_ROWS]],
                numeric={2, 3, 4, 5, 6, 7, 10},
                cls="partitions",
            )
            + "</details>"
        )
    return "".join(parts)


def report_pictures(totals: dict, groups: list[dict], partitions: list[dict]) -> str:
    """The run page's pictures (:mod:`mm2_failover.pictures` 1-3), from the report's own figures: how each partition
    resumes (its ``partitions_by_answer``; a report written before it had that: from its rows when they are all
    here), the groups that re-read the most, where the worst partitions resume (``partitions``: the rows read, worst
    first). A report whose figures cannot be drawn is shown without them (logged)."""
    try:
        return _report_pictures(totals, groups, partitions)
    except Exception:  # noqa: BLE001 - the page without its pictures, and the reason in the API server's log
        logging.getLogger(__name__).exception("the run page's pictures could not be drawn")
        return "<p class=muted>The pictures of this report could not be drawn (the log says why).</p>"


def _report_pictures(totals: dict, groups: list[dict], partitions: list[dict]) -> str:
    total = int(totals.get("partitions") or len(partitions))
    mix = totals.get("partitions_by_answer")
    if not isinstance(mix, dict) and partitions and len(partitions) >= total:
        mix = answer_counts(partitions)
    out = [picture(pictures.answer_mix, mix)] if isinstance(mix, dict) and any(mix.values()) else []
    top = pictures.top_reread(groups)
    if top:
        rereading = len(pictures.top_reread(groups, len(groups)))
        out.append(picture(pictures.reread_groups, top, rereading))
    where = pictures.positions(partitions)
    if where:
        out.append(picture(pictures.resume_positions, where, len(partitions), max(total, len(partitions))))
    return f"<div class=pictures>{''.join(out)}</div>" if out else ""


def render_drill(d: dict) -> str:
    t = d.get("totals") or {}
    w = d.get("writes") or {}
    parts = [
        "<h2>Drill</h2>",
        f"<p>Captured at {esc(d.get('captured_at'))}, source alias {esc(d.get('source_alias'))}. "
        + (
            f"Writes allowed for groups starting with <code>{esc(w.get('prefix'))}</code>: "
            f"{esc(len(w.get('applied') or {}))} group(s) written."
            if w.get("prefix")
            else "Nothing was written."
        )
        + "</p>",
    ]
    keys = [
        ("groups_covered", "groups covered"),
        ("groups_without_checkpoints", "groups w/o checkpoints"),
        ("partitions_without_checkpoints", "partitions w/o checkpoint"),
        ("checkpoint_age_max_seconds", "max checkpoint age (s)"),
        ("replication_lag_max_records", "max replication lag"),
        ("records_reread_estimate", "est. re-read"),
        ("partitions_clamped", "clamped"),
        ("records_lost_to_retention", "lost to retention"),
        ("live_groups_on_target", "live on target"),
    ]
    parts.append(
        table([h for _, h in keys], [[t.get(k) for k, _ in keys]], numeric=set(range(len(keys))), cls="drill-totals")
    )
    parts.append(
        "<h3>Findings</h3><ul>"
        + ("".join(f"<li>{esc(f)}</li>" for f in d.get("findings") or []) or "<li>none</li>")
        + "</ul>"
    )
    parts.append(
        "<h3>Groups</h3>"
        + table(
            [
                "group",
                "partitions",
                "without checkpoint",
                "max checkpoint age (s)",
                "est. re-read",
                "clamped",
                "lost to retention",
                "live on target",
            ],
            [
                [
                    g.get("group"),
                    g.get("partitions"),
                    g.get("without_checkpoint"),
                    g.get("checkpoint_age_max_seconds"),
                    g.get("reread_estimate"),
                    g.get("clamped"),
                    g.get("retention_lost"),
                    "yes" if g.get("live_on_target") else "",
                ]
                for g in (d.get("groups") or [])[:MAX_ROWS]
            ],
            numeric={1, 2, 3, 4, 5, 6},
            cls="drill-groups",
        )
    )
    parts.append(
        "<details><summary>Estimated re-read per partition</summary>"
        + table(
            ["group", "topic", "partition", "source commit", "checkpoint upstream", "planned", "re-read", "note"],
            [
                [
                    x.get("group"),
                    x.get("topic"),
                    x.get("partition"),
                    x.get("source_committed"),
                    x.get("checkpoint_upstream"),
                    x.get("planned"),
                    x.get("reread"),
                    x.get("note"),
                ]
                for x in (d.get("reread") or [])[:MAX_ROWS]
            ],
            numeric={2, 3, 4, 5, 6},
        )
        + "</details>"
    )
    parts.append(
        "<details><summary>Replication lag (snapshot)</summary>"
        + table(
            ["topic", "partition", "source end", "replica end", "MM2 replicated", "lag", "producers active"],
            [
                [
                    x.get("topic"),
                    x.get("partition"),
                    x.get("source_end"),
                    x.get("replica_end"),
                    x.get("replicated"),
                    x.get("lag_records"),
                    "yes" if x.get("producers_active") else "",
                ]
                for x in (d.get("replication_lag") or [])[:MAX_ROWS]
            ],
            numeric={1, 2, 3, 4, 5},
        )
        + "</details>"
    )
    return "".join(parts)


def render_run(
    dag_id: str,
    folder: str,
    rep: dict | None,
    drill: dict | None,
    files: list[str],
    base: str,
    tries: list[dict] | None = None,
) -> str:
    """One run's page; ``tries``: its task tries from Airflow (the timeline picture; None outside Airflow)."""
    links = " ".join(f"<a href='{esc(run_href(base, dag_id, folder))}/{esc(f)}'>{esc(f)}</a>" for f in files)
    body = [f"<p class=muted>DAG {esc(dag_id)}, run {esc((rep or drill or {}).get('run_id', folder))}</p>"]
    if rep is not None:  # the outcome first, the files after what they hold
        written = ((drill or {}).get("writes") or {}).get("applied")
        body.append(
            render_report(
                rep,
                f"dry run of the whole plan; the drill wrote {len(written)} group(s) starting "
                "with its prefix, see below"
                if written
                else "dry run: nothing was written",
            )
        )
    if drill is not None:
        body.append(render_drill(drill))
    bars, span, waiting = pictures.task_bars(tries or [], time.time())
    if bars:
        body.append("<h2>Time per task</h2>" + picture(pictures.timeline, bars, span, waiting))
    if PLAN_JSON in files:
        body.append(
            f"<p><a class=livediff href='{esc(run_href(base, dag_id, folder))}/live-diff'>The plan against "
            "the target's commits now</a> (read when you open it)</p>"
        )
    body.append(f"<p class=files>Files: {links}</p>")
    run_id = (drill or rep or {}).get("run_id", folder)
    return page(f"{'Drill' if drill is not None else 'Failover'} report: {dag_id} / {run_id}", "".join(body), base)


def render_live_diff(
    dag_id: str, folder: str, run_id: str, d, contains: str, read_at: str, base: str, error: str = ""
) -> str:
    """The live diff page (:mod:`mm2_failover.rules.plandiff`)."""
    back = f"<p><a href='{esc(run_href(base, dag_id, folder))}'>The run's report</a></p>"
    form = (
        f"<form method=get><label>groups containing <input name=group value='{esc(contains)}'></label> "
        "<button>Read again</button></form>"
    )
    if error:
        return page(f"Live diff: {dag_id} / {run_id}", back + form + f"<div class=warn>{esc(error)}</div>", base)
    counts = table(
        list(plandiff.STATES),
        [[d.counts.get(s, 0) for s in plandiff.STATES]],
        numeric=set(range(len(plandiff.STATES))),
        cls="diffcounts",
    )
    left = (
        f"<p class=muted>{d.groups_left_out} more matching group(s) not read: at most {plandiff.MAX_GROUPS} a "
        "page; narrow the filter.</p>"
        if d.groups_left_out
        else ""
    )
    off = (
        f"<div class=warn>Not where the plan puts them: {esc(', '.join(d.groups_off_plan[:50]))}"
        + (f" (+{len(d.groups_off_plan) - 50} more)" if len(d.groups_off_plan) > 50 else "")
        + "</div>"
        if d.groups_off_plan
        else "<p>Every partition read is where the plan puts it.</p>"
    )
    rows = [
        [r["group"], r["topic"], r["partition"], r["before"], r["planned"], r["now"], r["state"]]
        for r in d.rows[:MAX_ROWS]
    ]
    more = f"<p class=muted>First {MAX_ROWS} of {len(d.rows)} rows shown.</p>" if len(d.rows) > MAX_ROWS else ""
    body = (
        back + form + f"<p class=muted>The plan's writes against the target's commits read at {esc(read_at)} "
        f"({d.groups_read} group(s)); read-only.</p>"
        + counts
        + left
        + off
        + more
        + table(
            ["group", "topic", "partition", "before the run", "planned", "now", "state"],
            rows,
            numeric={2, 3, 4, 5},
            cls="livediff",
        )
    )
    return page(f"Live diff: {dag_id} / {run_id}", body, base)


def target_read_error(e: Exception) -> str:
    """What the live diff says when the target's commits cannot be read: a connection the API server does not have,
    by its name and what to do; any other failure by its kind only (its detail may name the cluster: logged)."""
    if any(c.__name__ == "AirflowNotFoundException" for c in type(e).__mro__):
        return (
            f"The API server has no connection {TARGET_CONN_ID!r}: the live diff reads the target's commits "
            "through it from the API server's own process (the tasks find theirs on the workers). Define it where "
            f"the API server reads connections - Admin > Connections, a secrets backend, or "
            f"AIRFLOW_CONN_{TARGET_CONN_ID.upper()} in the API server's environment - and reload this page. The "
            "run's report shows what verify read back."
        )
    return (
        f"The target's commits could not be read now ({type(e).__name__}); the API server's log has the detail. "
        "The run's report shows what verify read back."
    )


def render_trend(drills: list[dict], base: str) -> str:
    if not drills:
        return page(
            "DR drill trend",
            "<p class=muted>No drill run has written a drill.json yet. Trigger (or "
            "unpause) the mm2_failover_drill DAG.</p>",
            base,
        )
    drills = sorted(drills, key=lambda r: r["time"])
    series = [
        ("Estimated re-read (records)", "records_reread_estimate", ""),
        ("Max checkpoint age", "checkpoint_age_max_seconds", " s"),
        ("Max replication lag (records)", "replication_lag_max_records", ""),
        ("Partitions without checkpoint", "partitions_without_checkpoints", ""),
        ("Groups covered", "groups_covered", ""),
    ]
    charts = "".join(
        picture(pictures.trend, title, [(f"{r['time']} {r['run_id']}", r["drill_totals"].get(k)) for r in drills], unit)
        for title, k, unit in series
    )
    rows = []
    for r in reversed(drills):
        t = r["drill_totals"]
        rows.append(
            [
                r["time"],
                f"<a href='{esc(run_href(base, r['dag_id'], r['folder']))}'>{esc(r['run_id'])}</a>",
                t.get("groups_covered"),
                t.get("groups_without_checkpoints"),
                t.get("partitions_without_checkpoints"),
                t.get("checkpoint_age_max_seconds"),
                t.get("replication_lag_max_records"),
                t.get("records_reread_estimate"),
                t.get("partitions_clamped"),
                t.get("records_lost_to_retention"),
                t.get("findings"),
            ]
        )
    body = (
        f"<p class=muted>{len(drills)} drill run(s), oldest to newest in the plots.</p>"
        f"<div class=pictures>{charts}</div>"
        + table(
            [
                "time (UTC)",
                "run",
                "groups covered",
                "groups w/o checkpoints",
                "partitions w/o checkpoint",
                "max checkpoint age (s)",
                "max replication lag",
                "est. re-read",
                "clamped",
                "lost to retention",
                "findings",
            ],
            rows,
            numeric=set(range(2, 11)),
            raw={1},
            cls="trend",
        )
    )
    return page("DR drill trend", body, base)


NO_REPORT = {
    READINESS_DAG: "A readiness interval has no report of its own: the Readiness page shows the newest one and the "
    "trend.",
    "mm2_sync_archive": "The archive keeps no per-run report: its tasks' logs in Airflow say what each run appended "
    "and refreshed, and the Readiness page shows the archive's age.",
    "mm2_failover_rollback": "A rollback keeps no report page: its tasks' logs in Airflow name every group restored, "
    "and rollback.json is in its run folder.",
}


def render_no_report(dag_id: str, base: str) -> str:
    """The run tab of a DAG run without a report (Airflow 3.3 adds a plugin's run tab to every DAG's runs)."""
    why = NO_REPORT.get(
        dag_id, f"{dag_id} is not one of mm2-failover's DAGs: mm2-failover keeps no report of its runs."
    )
    more = f" <a href='{esc(base)}/readiness'>Readiness</a>." if dag_id == READINESS_DAG else ""
    return page(
        f"No mm2-failover report: {dag_id}",
        f"<p>{esc(why)}{more}</p><p class=muted>Reports are kept for the runs of {', '.join(sorted(REPORT_DAGS))}.</p>",
        base,
    )


ANSWERS = ("exact", "floor", "checkpoint", "none")
ANSWER_FILTERS = {"": "any answer", "not_exact": "not exact", **{a: a for a in ANSWERS}}


def readiness_rows(
    groups: list[dict], answer: str = "", group: str = "", over_rpo: bool = False, rpo_seconds: int = 0
) -> list[dict]:
    """The per-group table's rows after the filters, the worst first: the longest exposure (one not known before
    none), then not exact, then the most re-read (one not known before none: :func:`~mm2_failover.rules.report.
    worst_first`'s order), then by name."""
    out = [
        g
        for g in groups
        if (not answer or (g["answer"] != "exact" if answer == "not_exact" else g["answer"] == answer))
        and (not group or group.lower() in g["group"].lower())
        and (not over_rpo or (g["exposure_seconds"] or 0) > rpo_seconds)
    ]

    def key(g: dict):
        exposure = g["exposure_seconds"]
        return (
            -(exposure or 0),
            exposure is not None,
            g["answer"] == "exact",
            -(g["reread"] or 0),
            not g.get("reread_unknown"),
            g["group"],
        )

    return sorted(out, key=key)


def render_readiness(
    r: dict | None,
    hist: list[dict],
    base: str,
    answer: str = "",
    group: str = "",
    over_rpo: bool = False,
    folder: str = "",
) -> str:
    title = "Readiness: if we failed over now"
    if r is None:
        return page(
            title,
            "<p class=muted>No readiness interval has been computed yet: unpause the "
            "mm2_failover_readiness DAG (with mm2_sync_archive).</p>",
            base,
        )
    s, rpo = r["summary"], r["rpo_seconds"]
    warn = []
    if s.get("groups_over_rpo"):
        warn.append(
            f"{s['groups_over_rpo']} group(s) would lose more than the RPO ({rpo} s) if the source were "
            f"lost now (worst: {_num(s['worst_exposure_seconds'])} s)"
        )
    if s.get("groups_not_exact"):
        warn.append(
            f"{s['groups_not_exact']} group(s) are not provable exactly (they would resume at MM2's "
            "checkpoint or the sync floor, or not move)"
        )
    head = (
        f"<p>Computed {esc(r['computed_at'])} by run {esc(r['run_id'])} "
        f"(<a href='{esc(run_href(base, READINESS_DAG, folder))}/{READINESS}'>readiness.json</a>, the rows "
        f"<a href='{esc(run_href(base, READINESS_DAG, folder))}/{READINESS_GROUPS}'>per group</a> and "
        f"<a href='{esc(run_href(base, READINESS_DAG, folder))}/{READINESS_PARTITIONS}'>per partition</a>, "
        "Parquet); "
        f"RPO {esc(rpo)} s.</p>" + "".join(f"<p class=warn>{esc(w)}</p>" for w in warn)
    )
    summary = table(
        [
            "groups",
            "exact",
            "floor",
            "checkpoint",
            "none",
            "partitions",
            "re-read (records)",
            "not replicated (records)",
            "worst exposure (s)",
            "over RPO",
            "exposure unknown",
            "archive age (s)",
            "oldest checkpoint (s)",
            "findings",
        ],
        [
            [
                s.get(k)
                for k in (
                    "groups",
                    "groups_exact",
                    "groups_floor",
                    "groups_checkpoint",
                    "groups_none",
                    "partitions",
                    "reread_records",
                    "not_replicated_records",
                    "worst_exposure_seconds",
                    "groups_over_rpo",
                    "groups_exposure_unknown",
                    "archive_age_seconds",
                    "checkpoint_age_max_seconds",
                    "findings",
                )
            ]
        ],
        numeric=set(range(14)),
        cls="summary",
    )
    findings = (
        "<h2>Findings</h2><ul>" + "".join(f"<li>{esc(f['text'])}</li>" for f in r["findings"]) + "</ul>"
        if r["findings"]
        else ""
    )
    archive = table(
        [
            "alias",
            "archive last succeeded (UTC)",
            "age (s)",
            "mm2_sync_archive runs failed since",
            "last failure",
            "source commits read (UTC)",
            "their age (s)",
        ],
        [
            [
                a,
                v.get("updated_at") or "never",
                v.get("age_seconds"),
                v.get("failed_runs_since", 0),
                v.get("last_failure") or "",
                (v.get("positions_read_at") or "never") if "positions_read_at" in v else "no source connection",
                v.get("positions_age_seconds"),
            ]
            for a, v in sorted(r["archive"].items())
        ],
        numeric={2, 3, 6},
        cls="archive",
    )
    hist = sorted(hist, key=lambda h: h.get("computed_at") or "")
    exposure = picture(
        pictures.exposure,
        pictures.known_exposures(r["groups"]),
        len(r["groups"]),
        s.get("groups_exposure_unknown") or 0,
        s.get("groups_over_rpo") or 0,
        rpo,
    )
    charts = (
        picture(pictures.interval_strip, hist, rpo, datetime.now(timezone.utc))
        + picture(
            pictures.trend, "Groups not provable exactly", [(h["computed_at"], h.get("groups_not_exact")) for h in hist]
        )
        + picture(
            pictures.trend,
            "Worst exposure (oldest record not replicated)",
            [(h["computed_at"], h.get("worst_exposure_seconds")) for h in hist],
            " s",
        )
    )
    rows = readiness_rows(r["groups"], answer, group, over_rpo, rpo)
    options = "".join(
        f"<option value='{esc(k)}'{' selected' if k == answer else ''}>{esc(v)}</option>"
        for k, v in ANSWER_FILTERS.items()
    )
    form = (
        f"<form method=get action='{esc(base)}/readiness'><label>answer <select name=answer>{options}</select>"
        f"</label> <label>group contains <input name=group value='{esc(group)}'></label> "
        f"<label><input type=checkbox name=over_rpo value=true{' checked' if over_rpo else ''}> over the RPO only"
        "</label> <button type=submit>Filter</button></form>"
    )
    cells = [
        [
            g["group"],
            g["answer"],
            ", ".join(f"{k} {v}" for k, v in sorted(g["rules"].items())),
            g["partitions"],
            g["none"],
            g["reread"],
            g["reread_unknown"],
            g["not_replicated"],
            g["exposure_seconds"],
            g["exposure_unknown"],
            g["checkpoint_age_seconds"],
        ]
        for g in rows[:MAX_ROWS]
    ]
    more = (
        f"<p class=muted>{len(rows)} group(s) match; the first {MAX_ROWS} are shown (all of them are in "
        "readiness.json).</p>"
        if len(rows) > MAX_ROWS
        else f"<p class=muted>{len(rows)} group(s) match.</p>"
    )
    body = (
        head
        + summary
        + f"<div class=pictures>{exposure}</div>"
        + findings
        + archive
        + f"<h2>Over the last day ({len(hist)} interval(s))</h2><div class=pictures>{charts}</div>"
        + "<h2>Groups</h2>"
        + form
        + more
        + table(
            [
                "group",
                "answer",
                "rules (partitions)",
                "partitions",
                "not moved",
                "re-read",
                "re-read unknown",
                "not replicated",
                "exposure (s)",
                "exposure unknown",
                "newest checkpoint age (s)",
            ],
            cells,
            numeric=set(range(3, 11)),
            cls="groups",
        )
    )
    return page(title, body, base)
