"""What the command line prints, in the format asked (``-o table|json|csv``, as Kafka's and kubectl's tools do): pure.

A command's result is a :class:`Listing`: rows with named columns, and a summary (what the command did, the files it
wrote). ``table`` is for people: the summary's lines, then the rows aligned under upper-case headers as
``kafka-consumer-groups`` prints them, capped at ``limit`` rows with "... N more in FILE"; ``json`` is one object
(the summary and every row); ``csv`` is every row under a header line, for a spreadsheet or ``awk``. Nothing is cut
in ``json`` or ``csv``.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field

FORMATS = ("table", "json", "csv")
TABLE_LIMIT = 20  # rows a table shows before "... N more in <file>"


@dataclass
class Listing:
    """``columns``: (key in each row, header); ``lines``: the summary as a person reads it (``table`` only);
    ``summary``: the same as data (``json``); ``more_in``: where every row is kept (named when a table is cut)."""

    columns: list[tuple[str, str]]
    rows: list[dict] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    more_in: str = ""
    after: list[str] = field(default_factory=list)  # lines printed after the table (``table`` only)
    data_columns: list[str] | None = None  # the keys ``csv`` writes (None: the table's); ``json`` writes every key


def cell(v) -> str:
    """A value as a table shows it: ``-`` for none, numbers and text as they are."""
    if v is None or v == "":
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def table(
    columns: list[tuple[str, str]], rows: list[dict], limit: int | None = TABLE_LIMIT, more_in: str = ""
) -> list[str]:
    """``rows`` aligned under their headers (numbers to the right), at most ``limit`` of them (None: all), then
    "... N more in ``more_in``" when some were left out."""
    shown = rows if limit is None else rows[:limit]
    cells = [[cell(r.get(k)) for k, _h in columns] for r in shown]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, (_k, h) in enumerate(columns)]
    right = [bool(shown) and all(isinstance(r.get(k), int) or r.get(k) is None for r in shown) for k, _h in columns]

    def line(values: list[str]) -> str:
        return " ".join(v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right)).rstrip()

    out = [line([h for _k, h in columns])] + [line(c) for c in cells]
    if len(rows) > len(shown):
        out.append(f"... {len(rows) - len(shown)} more" + (f" in {more_in}" if more_in else ""))
    return out


def render(listing: Listing, fmt: str, limit: int | None = TABLE_LIMIT) -> str:
    """The listing in ``fmt`` (one of :data:`FORMATS`), ending with a newline."""
    if fmt == "json":
        return json.dumps({**listing.summary, "rows": listing.rows}, indent=2, default=str) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        if not listing.columns:  # a result without rows: its summary, a key and a value a line
            w.writerow(["key", "value"])
            for k, v in listing.summary.items():
                w.writerow([k, v if isinstance(v, (str, int, float)) or v is None else json.dumps(v, default=str)])
            return buf.getvalue()
        keys = listing.data_columns or [k for k, _h in listing.columns]
        w.writerow(keys)
        for r in listing.rows:
            w.writerow(["" if r.get(k) is None else r.get(k) for k in keys])
        return buf.getvalue()
    if fmt != "table":
        raise ValueError(f"output format {fmt!r}: expected one of {', '.join(FORMATS)}")
    out = list(listing.lines)
    if listing.columns and (listing.rows or not listing.lines):
        out += ([""] if out else []) + table(listing.columns, listing.rows, limit, listing.more_in)
    if listing.after:
        out += [""] + listing.after
    return "\n".join(out) + "\n"
