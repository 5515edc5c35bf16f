"""The pictures of the report pages (issue 53 item 5): static SVG drawn by matplotlib, inlined in the pages, with no
script (the pages' Content-Security-Policy allows none). Each picture is a pure function of data the page already
holds; the numbers it shows are the report's own (no picture computes a figure of its own):

1. **How each partition resumes** (a run's report): the plan's partitions by the kind of answer they got - exact,
   floor, MM2's checkpoint, not moved (:func:`mm2_failover.rules.readiness.kind_of`, the one classification) - each bar
   labelled with its count (``totals["partitions_by_answer"]``).
2. **The groups with the most re-read** (a run's report): the top :data:`TOP` groups by their estimated re-read, each
   bar labelled with its count; a group whose re-read is unknown for a partition says so in its label.
3. **Where each partition resumes** (a run's report, the worst :data:`TOP` partitions first): one bar per partition
   from the replica's log start to its end, with MM2's checkpoint and the planned offset marked on it. The bar is
   the partition's own log (offsets differ by orders of magnitude between partitions): its ends are labelled with
   their offsets.
4. **Exposure** (the readiness page): how many groups would lose how many seconds of records if the source were lost
   now, with the RPO as a line; and a strip of the last 24 hours' intervals, each coloured by what it found.
5. **A failover's time per task** (a run's report inside Airflow: the task tries come from Airflow's metadata
   database): one bar per try, the approval's wait drawn apart (hatched) and left out of the working time.
6. **A trend** (the drill trend and the readiness page): one series over time.

The ink (text, axes, ticks) is ``currentColor``: a picture takes the page's text colour, so it follows the pages'
light and dark themes; the data colours read on both.
"""

from __future__ import annotations

import functools
import hashlib
import html
import io
import math
import re
import textwrap
from datetime import datetime, timezone
from typing import Any, Iterable

from mm2_failover.rules.readiness import CHECKPOINT, EXACT, FLOOR, NONE

TOP = 15  # bars in a "the most ..." picture
INK = "#010203"  # drawn by matplotlib, then said as currentColor (the page's text colour) in the SVG's styles
COLOURS = {EXACT: "#12b76a", FLOOR: "#2e90fa", CHECKPOINT: "#f79009", NONE: "#98a2b3"}
RED, GREY, BLUE = "#f04438", "#98a2b3", "#2e90fa"
ANSWER_LABELS = {EXACT: "exact", FLOOR: "floor (safe, re-reads)", CHECKPOINT: "MM2's checkpoint", NONE: "not moved"}
APPROVAL_TASKS = frozenset({"approve_plan"})
NOT_RUN = frozenset({"skipped", "upstream_failed", "removed"})  # tries that did nothing: not drawn
_RC = {
    "text.parse_math": False,  # a group id may hold "$": drawn as written, never as mathematics
    "svg.fonttype": "none",
    "svg.hashsalt": "mm2-failover",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "font.size": 10,
    "axes.edgecolor": INK,
    "axes.labelcolor": INK,
    "text.color": INK,
    "xtick.color": INK,
    "ytick.color": INK,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
}


# ------------------------------------------------------------------------------------------ the data of each picture


def top_reread(groups: Iterable[dict], n: int = TOP) -> list[tuple[str, int, int]]:
    """Rule 2: (group, estimated re-read, partitions whose re-read is unknown) of the ``n`` groups that re-read the
    most, the most first; groups re-reading nothing (or nothing known) are left out."""
    known = [(g["group"], _count(g.get("reread_estimate")), _count(g.get("reread_unknown"))) for g in groups]
    return sorted((k for k in known if k[1] > 0), key=lambda x: (-x[1], x[0]))[:n]


def log_fraction(offset: int | None, start: int, end: int) -> float | None:
    """Rule 3: where ``offset`` lies in a log from ``start`` to ``end``, 0 to 1 (None: no offset); an offset outside
    the log is drawn at its nearer end (and said in words beside the bar)."""
    if offset is None:
        return None
    return min(1.0, max(0.0, (offset - start) / max(1, end - start)))


def positions(partitions: Iterable[dict], n: int = TOP) -> list[dict]:
    """Rule 3: the first ``n`` partitions (already worst first) whose replica log is known: the log's ends, MM2's
    checkpoint and the planned offset."""
    out = []
    for p in partitions:
        start, end = p.get("log_start"), p.get("log_end")
        if start is None or end is None:
            continue
        out.append(
            {
                "label": f"{p.get('group')} {p.get('topic')}[{p.get('partition')}]",
                "start": start,
                "end": end,
                "checkpoint": p.get("downstream_offset"),
                "planned": p.get("planned_offset"),
            }
        )
        if len(out) == n:
            break
    return out


def known_exposures(groups: Iterable[dict]) -> list[float]:
    """Rule 4: the exposures, in seconds, of the groups whose every partition's exposure is known (a group with one
    not known is among readiness's ``groups_exposure_unknown``, and is not drawn)."""
    out = []
    for g in groups:
        e = g.get("exposure_seconds")
        if e is not None and not g.get("exposure_unknown") and math.isfinite(float(e)):
            out.append(max(0.0, float(e)))
    return out


def interval_state(h: dict, rpo_seconds: float) -> str:
    """Rule 4: what one readiness interval found, worst first: over the RPO, not every group exact, or well."""
    if (h.get("groups_over_rpo") or 0) > 0 or (h.get("worst_exposure_seconds") or 0) > rpo_seconds:
        return "over the RPO"
    if (h.get("groups_not_exact") or 0) > 0:
        return "not all exact"
    return "all exact, within the RPO"


STRIP_COLOURS = {"over the RPO": RED, "not all exact": COLOURS[CHECKPOINT], "all exact, within the RPO": COLOURS[EXACT]}


def day_of_intervals(hist: Iterable[dict], rpo_seconds: float, now: float) -> list[tuple[float, str]]:
    """Rule 4: (hours since 24 hours before ``now``, what it found) of each interval computed in those 24 hours; one
    dated after ``now`` (another host's clock) is drawn at now."""
    start = now - 86400
    out = []
    for h in hist:
        t = _ts(h.get("computed_at"))
        if t is not None and t >= start:
            out.append((min(24.0, (t - start) / 3600), interval_state(h, rpo_seconds)))
    return out


def task_bars(tries: Iterable[dict], now: float | None = None) -> tuple[list[dict], float, float]:
    """Rule 5: one bar per task try that ran (seconds from the first start), the order they started in; a try not
    ended yet runs to ``now`` (default: the latest time a try ended). Returns the bars, the span from the first start
    to the last end, and the seconds of it the approval's tries waited for a person."""
    ran = [t for t in tries if t.get("start") is not None and (t.get("state") or "") not in NOT_RUN]
    started = sorted(ran, key=lambda t: (t["start"], t["task_id"]))
    if not started:
        return [], 0.0, 0.0
    t0 = started[0]["start"]
    last = max((t.get("end") or t["start"]) for t in started)
    now = last if now is None else max(now, last)
    bars, waiting = [], 0.0
    for t in started:
        end = t.get("end") or now
        part = f" [{t['map_index']}]" if t.get("map_index") is not None and t["map_index"] >= 0 else ""
        seconds = max(0.0, end - t["start"])
        approval = t["task_id"] in APPROVAL_TASKS
        bars.append(
            {
                "label": f"{t['task_id']}{part} #{t.get('try_number') or 1}",
                "from": t["start"] - t0,
                "seconds": seconds,
                "state": t.get("state") or "",
                "approval": approval,
                "ended": t.get("end") is not None,
                "pokes": int(t.get("pokes") or 1),
            }
        )
        waiting += seconds if approval else 0.0
    end_all = now if any(not b["ended"] for b in bars) else last
    return bars, end_all - t0, waiting


def _count(v: Any) -> int:
    """A count as a whole number (0 for none or not a number)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return 0
    return int(round(f)) if math.isfinite(f) else 0


# ------------------------------------------------------------------------------------------ drawing
# Each picture is a ``figure_<name>`` (the matplotlib Figure, its title and caption: what the tests inspect) and a
# ``<name>`` that returns it as inline SVG.


def _figure(width: float, height: float):
    from matplotlib.figure import Figure  # lazy: heavy (matplotlib)

    return Figure(figsize=(width, height), layout="constrained")


def _titled(fig, title: str) -> None:
    """The picture's title over its whole width, left-aligned, wrapped to it (never cut at the figure's edge)."""
    per_line = max(30, int(fig.get_figwidth() * 72 / 7.2))  # about 7 points per bold character at 11 points
    fig.suptitle(textwrap.fill(title, per_line), x=0.01, ha="left", fontsize=11, fontweight="bold")


def _counts(axis) -> None:
    """Whole numbers only on an axis of counts."""
    from matplotlib.ticker import MaxNLocator  # lazy: heavy (matplotlib)

    axis.set_major_locator(MaxNLocator(integer=True))


_INK_IN_STYLE = re.compile(r"((?:fill|stroke|color)\s*:\s*|(?:fill|stroke)=\")" + re.escape(INK))
_ID = re.compile(r"""\bid=(["'])([^"']+)\1""")


def _svg(fig, name: str, title: str, caption: str = "") -> str:
    """The figure as inline SVG in a ``<figure class=picture>``: no XML prolog, no metadata; the ink of its styles
    said as currentColor; its element ids (and its style sheet) scoped to it, so that several pictures on one page
    neither share an id nor style each other."""
    import matplotlib  # lazy: heavy (matplotlib)

    buf = io.StringIO()
    with matplotlib.rc_context(_RC):
        fig.savefig(buf, format="svg", transparent=True, metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = _INK_IN_STYLE.sub(lambda m: m.group(1) + "currentColor", svg)
    scope = f"p{hashlib.sha256((name + title + svg).encode()).hexdigest()[:10]}"
    ids = {m.group(2) for m in _ID.finditer(svg)}
    svg = _ID.sub(lambda m: f"id={m.group(1)}{scope}-{m.group(2)}{m.group(1)}", svg)
    svg = re.sub(r"#([A-Za-z_][\w.-]*)", lambda m: f"#{scope}-{m.group(1)}" if m.group(1) in ids else m.group(0), svg)
    svg = svg.replace("*{stroke-linejoin", f"#{scope} *{{stroke-linejoin")
    svg = svg.replace("<svg ", f"<svg id='{scope}' role='img' aria-label='{_attr(title)}' ", 1)
    cap = f"<figcaption>{_text(caption)}</figcaption>" if caption else ""
    return f"<figure class=picture data-picture='{_attr(name)}'>{svg}{cap}</figure>"


def _text(v: Any) -> str:
    return html.escape(str(v), quote=False)


def _attr(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _draw(fn):
    """Run a drawing in matplotlib's settings of these pictures (fonts, ink)."""

    @functools.wraps(fn)
    def wrapped(*a, **kw):
        import matplotlib  # lazy: heavy (matplotlib)

        with matplotlib.rc_context(_RC):
            return fn(*a, **kw)

    return wrapped


def _short(label: str, n: int = 48) -> str:
    return label if len(label) <= n else label[: n - 1] + "…"


def _bars(title: str, bars: list[tuple[str, float, str, str, str]], xlabel: str, margin: float):
    """A horizontal bar per (label, value, the value as said, colour, key), the first at the top, each said beside its
    bar (in an SVG group ``count-<key>``); the value axis counts."""
    fig = _figure(6.4, 0.9 + 0.26 * max(4, len(bars)))
    ax = fig.add_subplot()
    rows = bars[::-1]
    drawn = ax.barh(range(len(rows)), [b[1] for b in rows], color=[b[3] for b in rows])
    ax.set_yticks(range(len(rows)), [b[0] for b in rows])
    for text, b in zip(ax.bar_label(drawn, labels=[b[2] for b in rows], padding=3), rows):
        text.set_gid(f"count-{b[4]}")
    _titled(fig, title)
    ax.set_xlabel(xlabel)
    _counts(ax.xaxis)
    ax.margins(x=margin)
    return fig


@_draw
def figure_answer_mix(counts: dict[str, int]):
    """Picture 1: how each partition resumes."""
    counts = {k: _count(counts.get(k)) for k in ANSWER_LABELS}
    title = f"How each partition resumes ({sum(counts.values())} partition(s))"
    bars = [(ANSWER_LABELS[k], counts[k], str(counts[k]), COLOURS[k], k) for k in ANSWER_LABELS]
    return _bars(title, bars, "partitions", 0.12), title, ""


@_draw
def figure_reread_groups(top: list[tuple[str, int, int]], groups_rereading: int):
    """Picture 2: the groups with the most re-read."""
    title = f"The groups with the most re-read (top {len(top)} of {groups_rereading})"
    bars = [
        (_short(g), r, f"{r:,}" + (f" (+{u} partition(s) unknown)" if u else ""), BLUE, str(i))
        for i, (g, r, u) in enumerate(top)
    ]
    return _bars(title, bars, "records re-read (estimate)", 0.3), title, ""


def _offset_words(p: dict) -> str:
    """The numbers a position bar stands for, in words beside it (where the marks cannot say them)."""

    def where(o: int | None) -> str:
        if o is None:
            return "none"
        return f"{o:,}" + (
            " (before the log start)" if o < p["start"] else " (past the log end)" if o > p["end"] else ""
        )

    return f"{p['end']:,}   planned {where(p['planned'])}, checkpoint {where(p['checkpoint'])}"


@_draw
def figure_resume_positions(parts: list[dict], read: int, total: int):
    """Picture 3: where the worst partitions resume in the replica's log (``read``: the rows the page read, worst
    first; ``total``: the run's partitions)."""
    of = f"{total:,}" + (f", of the {read:,} read" if read < total else "")
    title = f"Where each partition resumes in the replica's log (the worst {len(parts)} of {of})"
    fig = _figure(9.6, 1.0 + 0.34 * max(1, len(parts)))
    ax = fig.add_subplot()
    rows = parts[::-1]
    for i, p in enumerate(rows):
        ax.barh(i, 1.0, color=GREY, alpha=0.35, height=0.55)
        ax.text(-0.01, i, f"{p['start']:,}", ha="right", va="center", fontsize=8)
        ax.text(1.01, i, _offset_words(p), ha="left", va="center", fontsize=8)
        if (c := log_fraction(p["checkpoint"], p["start"], p["end"])) is not None:
            ax.plot([c], [i], marker="D", color=COLOURS[CHECKPOINT], markersize=7, linestyle="none", gid="checkpoint")
        if (q := log_fraction(p["planned"], p["start"], p["end"])) is not None:
            ax.plot([q, q], [i - 0.34, i + 0.34], color=COLOURS[EXACT], linewidth=3, gid="planned")
    ax.set_yticks(range(len(rows)), [_short(p["label"], 40) for p in rows])
    ax.set_xlim(-0.16, 1.9)
    ax.set_xticks([0, 1], ["log start", "log end"])
    ax.plot([], [], marker="D", color=COLOURS[CHECKPOINT], linestyle="none", label="MM2's checkpoint")
    ax.plot([], [], color=COLOURS[EXACT], linewidth=3, label="planned offset")
    ax.legend(loc="lower center", bbox_to_anchor=(0.3, 1.0), ncols=2, frameon=False, fontsize=9)
    _titled(fig, title)
    return fig, title, ""


@_draw
def figure_exposure(exposures: list[float], groups: int, unknown: int, over: int, rpo_seconds: float):
    """Picture 4a: the groups' exposure against the RPO (``unknown``, ``over``: readiness's own counts)."""
    title = f"Exposure now: {len(exposures)} of {groups} group(s) known, {over} over the RPO"
    fig = _figure(6.4, 2.4)
    ax = fig.add_subplot()
    top = max([*exposures, rpo_seconds * 1.2, 1.0])
    ax.hist(exposures, bins=20, range=(0, top), color=BLUE)
    ax.axvline(rpo_seconds, color=RED, linewidth=2, label=f"RPO {rpo_seconds:g} s", gid="rpo")
    ax.legend(frameon=False)
    ax.set_xlabel("seconds of records not replicated (the oldest)")
    ax.set_ylabel("groups")
    _counts(ax.yaxis)
    _titled(fig, title)
    cap = "What each group would lose if the source were lost now" + (
        f"; {unknown} group(s) with a partition whose exposure is unknown are not drawn." if unknown else "."
    )
    return fig, title, cap


@_draw
def figure_interval_strip(hist: list[dict], rpo_seconds: float, now: datetime):
    """Picture 4b: the last 24 hours' readiness intervals, each coloured by what it found."""
    day = day_of_intervals(hist, rpo_seconds, now.timestamp())
    states = [s for _, s in day]
    title = f"The last 24 hours: {len(day)} interval(s)"
    fig = _figure(7.6, 1.3)
    ax = fig.add_subplot()
    for h, s in day:
        ax.axvspan(h - 0.04, h + 0.04, color=STRIP_COLOURS[s])
    ax.set_xlim(0, 24.05)
    ax.set_yticks([])
    ax.set_xticks(range(0, 25, 3), [f"-{24 - h}h" if h < 24 else "now" for h in range(0, 25, 3)])
    for s, c in STRIP_COLOURS.items():
        ax.plot([], [], color=c, linewidth=6, label=f"{s} ({states.count(s)})")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=3, frameon=False, fontsize=9)
    _titled(fig, title)
    return fig, title, ""


def _bar_words(b: dict) -> str:
    said = f" {b['seconds']:.1f} s"
    if b["approval"]:
        return said + (" waiting for a person" if b["ended"] else " waiting for a person, still waiting")
    if b["pokes"] > 1:
        said += f", {b['pokes']} pokes"
    if not b["ended"]:
        return said + " (running)"
    return said + ("" if b["state"] == "success" else f" ({b['state']})")


@_draw
def figure_timeline(bars: list[dict], span: float, waiting: float):
    """Picture 5: a failover's time per task try, the approval's wait apart (hatched)."""
    title = f"Time per task: {span:,.1f} s from the first start to the last end" + (
        f", {waiting:,.1f} s of it waiting for a person's approval" if any(b["approval"] for b in bars) else ""
    )
    fig = _figure(7.6, 1.0 + 0.28 * max(1, len(bars)))
    ax = fig.add_subplot()
    rows = bars[::-1]
    for i, b in enumerate(rows):
        colour = GREY if b["approval"] else (RED if b["ended"] and b["state"] != "success" else BLUE)
        ax.barh(
            i,
            max(b["seconds"], span / 400 if span else 0.01),
            left=b["from"],
            color=colour,
            hatch="//" if b["approval"] else None,
            edgecolor=INK if b["approval"] else colour,
            linewidth=0.3,
        )
        ax.text(b["from"] + b["seconds"], i, _bar_words(b), va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), [b["label"] for b in rows])
    ax.set_xlabel("seconds since the first task started")
    ax.set_xlim(0, max(span, 1) * 1.3)
    _titled(fig, title)
    return fig, title, ""


@_draw
def figure_trend(title: str, points: list[tuple[str, float | None]], unit: str = ""):
    """Picture 6: one series over time (``points``: (label, value), oldest first; None: not known), the newest value
    written beside its point."""
    fig = _figure(5.2, 1.9)
    ax = fig.add_subplot()
    xs = [i for i, (_, v) in enumerate(points) if v is not None and math.isfinite(float(v))]
    ys = [float(points[i][1]) for i in xs]
    if xs:
        ax.plot(xs, ys, marker="o", markersize=3.5, color=BLUE)
        ax.set_ylim(bottom=min(0, min(ys)), top=max(max(ys) * 1.15, 1))
        ax.set_xticks([xs[0], xs[-1]], [points[xs[0]][0][:16], points[xs[-1]][0][:16]])
        ax.annotate(_number(ys[-1]), (xs[-1], ys[-1]), textcoords="offset points", xytext=(4, 4), fontsize=8)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
    if unit.strip():
        ax.set_ylabel(unit.strip())
    _titled(fig, title)
    return fig, title, ""


def _as_svg(name: str, figure):
    """The picture ``name`` drawn by ``figure`` (a ``figure_<name>``), as inline SVG."""

    @_draw
    def draw(*a, **kw) -> str:
        fig, title, caption = figure(*a, **kw)
        return _svg(fig, name, title, caption)

    draw.__name__ = draw.__qualname__ = name.replace("-", "_")
    draw.__doc__ = figure.__doc__
    return draw


answer_mix = _as_svg("answer-mix", figure_answer_mix)
reread_groups = _as_svg("reread-groups", figure_reread_groups)
resume_positions = _as_svg("resume-positions", figure_resume_positions)
exposure = _as_svg("exposure", figure_exposure)
interval_strip = _as_svg("interval-strip", figure_interval_strip)
timeline = _as_svg("timeline", figure_timeline)
trend = _as_svg("trend", figure_trend)


def _number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.1f}"


def _ts(iso: Any) -> float | None:
    """Epoch seconds of an ISO time (naive: UTC), None when it is not one."""
    try:
        t = datetime.fromisoformat(str(iso).replace("Z", "+00:00")) if iso else None
    except ValueError:
        return None
    return None if t is None else (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()
