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

import io
import re
from datetime import datetime
from typing import Any, Iterable

from mm2_failover.rules.readiness import CHECKPOINT, EXACT, FLOOR, NONE

TOP = 15  # bars in a "the most ..." picture
INK = "#010203"  # drawn by matplotlib, then said as currentColor (the page's text colour)
COLOURS = {EXACT: "#12b76a", FLOOR: "#2e90fa", CHECKPOINT: "#f79009", NONE: "#98a2b3"}
RED, GREY, BLUE = "#f04438", "#98a2b3", "#2e90fa"
ANSWER_LABELS = {EXACT: "exact", FLOOR: "floor (safe, re-reads)", CHECKPOINT: "MM2's checkpoint", NONE: "not moved"}
APPROVAL_TASKS = frozenset({"approve_plan"})
_RC = {
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
    known = [
        (g["group"], int(g.get("reread_estimate") or 0), int(g.get("reread_unknown") or 0))
        for g in groups
        if (g.get("reread_estimate") or 0) > 0
    ]
    return sorted(known, key=lambda x: (-x[1], x[0]))[:n]


def positions(partitions: Iterable[dict], n: int = TOP) -> list[dict]:
    """Rule 3: the first ``n`` partitions (already worst first) whose replica log is known: where the checkpoint and
    the planned offset lie in it."""
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
    """Rule 4: the groups' exposures that are known, in seconds (how many are unknown, and over the RPO, are
    readiness's own figures: ``groups_exposure_unknown``, ``groups_over_rpo``)."""
    return [float(g["exposure_seconds"]) for g in groups if g.get("exposure_seconds") is not None]


def interval_state(h: dict, rpo_seconds: float) -> str:
    """Rule 4: what one readiness interval found, worst first: over the RPO, not every group exact, or well."""
    if (h.get("groups_over_rpo") or 0) > 0 or (h.get("worst_exposure_seconds") or 0) > rpo_seconds:
        return "over the RPO"
    if (h.get("groups_not_exact") or 0) > 0:
        return "not all exact"
    return "all exact, within the RPO"


STRIP_COLOURS = {"over the RPO": RED, "not all exact": COLOURS[CHECKPOINT], "all exact, within the RPO": COLOURS[EXACT]}


def task_bars(tries: Iterable[dict]) -> tuple[list[dict], float, float]:
    """Rule 5: one bar per task try that started (seconds from the first start), the order they started in; the
    whole span, and the span without the approval's wait (the approval task's tries)."""
    started = sorted((t for t in tries if t.get("start") is not None), key=lambda t: (t["start"], t["task_id"]))
    if not started:
        return [], 0.0, 0.0
    t0 = started[0]["start"]
    last = max((t.get("end") or t["start"]) for t in started)
    bars, waiting = [], 0.0
    for t in started:
        end = t.get("end") or last
        part = f" [{t['map_index']}]" if (t.get("map_index") or -1) >= 0 else ""
        bars.append(
            {
                "label": f"{t['task_id']}{part} #{t.get('try_number') or 1}",
                "from": (t["start"] - t0),
                "seconds": max(0.0, end - t["start"]),
                "state": t.get("state") or "",
                "approval": t["task_id"] in APPROVAL_TASKS,
            }
        )
        if t["task_id"] in APPROVAL_TASKS:
            waiting += max(0.0, end - t["start"])
    span = last - t0
    return bars, span, max(0.0, span - waiting)


# ------------------------------------------------------------------------------------------ drawing


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _titled(fig, title: str) -> None:
    """The picture's title over its whole width, left-aligned, wrapped to it (never cut at the figure's edge)."""
    import textwrap

    per_line = max(30, int(fig.get_figwidth() * 72 / 7.2))  # about 7 points per bold character at 11 points
    fig.suptitle(textwrap.fill(title, per_line), x=0.01, ha="left", fontsize=11, fontweight="bold")


def _counts(axis) -> None:
    """Whole numbers only on an axis of counts."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _svg(fig, name: str, title: str, caption: str = "") -> str:
    """The figure as inline SVG in a ``<figure class=picture>`` (no XML prolog, no metadata; ink -> currentColor)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context(_RC):
        fig.savefig(buf, format="svg", transparent=True, metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, flags=re.S).replace(INK, "currentColor")
    svg = svg.replace("<svg ", f"<svg role='img' aria-label='{_attr(title)}' ", 1)
    cap = f"<figcaption>{_text(caption)}</figcaption>" if caption else ""
    return f"<figure class=picture data-picture='{_attr(name)}'>{svg}{cap}</figure>"


def _text(v: Any) -> str:
    import html

    return html.escape(str(v), quote=False)


def _attr(v: Any) -> str:
    import html

    return html.escape(str(v), quote=True)


def _draw(fn):
    """Run a drawing in matplotlib's settings of these pictures (fonts, ink)."""
    import matplotlib

    def wrapped(*a, **kw):
        with matplotlib.rc_context(_RC):
            return fn(*a, **kw)

    wrapped.__doc__, wrapped.__name__ = fn.__doc__, fn.__name__
    return wrapped


def _short(label: str, n: int = 48) -> str:
    return label if len(label) <= n else label[: n - 1] + "…"


def _bars(name: str, title: str, bars: list[tuple[str, float, str, str]], xlabel: str, margin: float) -> str:
    """A horizontal bar per (label, value, the value as said, colour), the first at the top, each said beside its
    bar; the value axis counts."""
    fig = _figure(6.4, 0.9 + 0.26 * max(4, len(bars)))
    ax = fig.add_subplot()
    rows = bars[::-1]
    drawn = ax.barh([b[0] for b in rows], [b[1] for b in rows], color=[b[3] for b in rows])
    ax.bar_label(drawn, labels=[b[2] for b in rows], padding=3)
    _titled(fig, title)
    ax.set_xlabel(xlabel)
    _counts(ax.xaxis)
    ax.margins(x=margin)
    return _svg(fig, name, title)


@_draw
def answer_mix(counts: dict[str, int]) -> str:
    """Picture 1: how each partition resumes."""
    title = f"How each partition resumes ({sum(counts.values())} partition(s))"
    return _bars(
        "answer-mix",
        title,
        [(ANSWER_LABELS[k], counts.get(k, 0), str(counts.get(k, 0)), COLOURS[k]) for k in ANSWER_LABELS],
        "partitions",
        0.12,
    )


@_draw
def reread_groups(top: list[tuple[str, int, int]], groups_rereading: int) -> str:
    """Picture 2: the groups with the most re-read."""
    title = f"The groups with the most re-read (top {len(top)} of {groups_rereading})"
    return _bars(
        "reread-groups",
        title,
        [(_short(g), r, f"{r:,}" + (f" (+{u} partition(s) unknown)" if u else ""), BLUE) for g, r, u in top],
        "records re-read (estimate)",
        0.25,
    )


@_draw
def resume_positions(parts: list[dict], shown_of: int) -> str:
    """Picture 3: where each partition resumes in the replica's log."""
    title = f"Where each partition resumes in the replica's log (the worst {len(parts)} of {shown_of})"
    fig = _figure(7.6, 1.0 + 0.34 * max(1, len(parts)))
    ax = fig.add_subplot()
    rows = parts[::-1]
    for i, p in enumerate(rows):
        width = max(1, p["end"] - p["start"])

        def at(o, p=p, width=width):
            return None if o is None else min(1.0, max(0.0, (o - p["start"]) / width))

        ax.barh(i, 1.0, color=GREY, alpha=0.35, height=0.55)
        ax.text(-0.01, i, f"{p['start']:,}", ha="right", va="center", fontsize=8)
        ax.text(1.01, i, f"{p['end']:,}", ha="left", va="center", fontsize=8)
        if (c := at(p["checkpoint"])) is not None:
            ax.plot([c], [i], marker="D", color=COLOURS[CHECKPOINT], markersize=7, linestyle="none")
        if (q := at(p["planned"])) is not None:
            ax.plot([q, q], [i - 0.34, i + 0.34], color=COLOURS[EXACT], linewidth=3)
    ax.set_yticks(range(len(rows)), [_short(p["label"], 40) for p in rows])
    ax.set_xlim(-0.16, 1.16)
    ax.set_xticks([0, 1], ["log start", "log end"])
    ax.plot([], [], marker="D", color=COLOURS[CHECKPOINT], linestyle="none", label="MM2's checkpoint")
    ax.plot([], [], color=COLOURS[EXACT], linewidth=3, label="planned offset")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, frameon=False, fontsize=9)
    _titled(fig, title)
    return _svg(fig, "resume-positions", title)


@_draw
def exposure(exposures: list[float], unknown: int, over: int, rpo_seconds: float) -> str:
    """Picture 4a: the groups' exposure against the RPO."""
    title = f"Exposure now: {len(exposures)} group(s) known, {over} over the RPO"
    fig = _figure(6.4, 2.4)
    ax = fig.add_subplot()
    top = max([*exposures, rpo_seconds * 1.2, 1.0])
    ax.hist(exposures, bins=20, range=(0, top), color=BLUE)
    ax.axvline(rpo_seconds, color=RED, linewidth=2, label=f"RPO {rpo_seconds:g} s")
    ax.legend(frameon=False)
    ax.set_xlabel("seconds of records not replicated (the oldest)")
    ax.set_ylabel("groups")
    _counts(ax.yaxis)
    _titled(fig, title)
    cap = "What each group would lose if the source were lost now" + (
        f"; {unknown} group(s) whose exposure is unknown are not drawn." if unknown else "."
    )
    return _svg(fig, "exposure", title, cap)


@_draw
def interval_strip(hist: list[dict], rpo_seconds: float, now: datetime) -> str:
    """Picture 4b: the last 24 hours' readiness intervals, each coloured by what it found."""
    start = now.timestamp() - 86400
    day = [
        (t, interval_state(h, rpo_seconds)) for h in hist if (t := _ts(h.get("computed_at"))) is not None and t >= start
    ]
    states = [s for _, s in day]
    title = f"The last 24 hours: {len(day)} interval(s)"
    fig = _figure(7.6, 1.3)
    ax = fig.add_subplot()
    for t, s in day:
        ax.axvspan((t - start) / 3600 - 0.04, (t - start) / 3600 + 0.04, color=STRIP_COLOURS[s])
    ax.set_xlim(0, 24)
    ax.set_yticks([])
    ax.set_xticks(range(0, 25, 3), [f"-{24 - h}h" if h < 24 else "now" for h in range(0, 25, 3)])
    for s, c in STRIP_COLOURS.items():
        ax.plot([], [], color=c, linewidth=6, label=f"{s} ({states.count(s)})")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=3, frameon=False, fontsize=9)
    _titled(fig, title)
    return _svg(fig, "interval-strip", title)


@_draw
def timeline(bars: list[dict], span: float, working: float) -> str:
    """Picture 5: a failover's time per task try, the approval's wait apart."""
    title = f"Time per task: {span:,.1f} s in all, {working:,.1f} s without the approval's wait"
    fig = _figure(7.6, 1.0 + 0.28 * max(1, len(bars)))
    ax = fig.add_subplot()
    rows = bars[::-1]
    for i, b in enumerate(rows):
        colour = GREY if b["approval"] else (RED if b["state"] not in ("success", "skipped", "") else BLUE)
        ax.barh(
            i,
            max(b["seconds"], span / 400 if span else 0.01),
            left=b["from"],
            color=colour,
            hatch="//" if b["approval"] else None,
            edgecolor=INK if b["approval"] else colour,
            linewidth=0.3,
        )
        ax.text(
            b["from"] + b["seconds"],
            i,
            f" {b['seconds']:.1f} s"
            + (" waiting for a person" if b["approval"] else "" if b["state"] == "success" else f" ({b['state']})"),
            va="center",
            fontsize=8,
        )
    ax.set_yticks(range(len(rows)), [b["label"] for b in rows])
    ax.set_xlabel("seconds since the first task started")
    ax.set_xlim(0, max(span, 1) * 1.22)
    _titled(fig, title)
    return _svg(fig, "timeline", title)


@_draw
def trend(title: str, points: list[tuple[str, float | None]], unit: str = "") -> str:
    """Picture 6: one series over time (``points``: (label, value), oldest first; None: not known), the newest value
    written beside its point."""
    fig = _figure(5.2, 1.9)
    ax = fig.add_subplot()
    xs = [i for i, (_, v) in enumerate(points) if v is not None]
    ys = [points[i][1] for i in xs]
    if xs:
        ax.plot(xs, ys, marker="o", markersize=3.5, color=BLUE)
        ax.set_ylim(bottom=0, top=max(max(ys) * 1.15, 1))
        ax.set_xticks([xs[0], xs[-1]], [points[xs[0]][0][:16], points[xs[-1]][0][:16]])
        ax.annotate(_number(ys[-1]), (xs[-1], ys[-1]), textcoords="offset points", xytext=(4, 4), fontsize=8)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
    if unit.strip():
        ax.set_ylabel(unit.strip())
    _titled(fig, title)
    return _svg(fig, "trend", title)


def _number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.1f}"


def _ts(iso: str | None) -> float | None:
    try:
        return datetime.fromisoformat(str(iso)).timestamp() if iso else None
    except ValueError:
        return None
