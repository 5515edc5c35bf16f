"""Run reports (pure): totals and a per-group table, as JSON (machines) and Markdown (people)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from mm2_failover.plan import CLAMP, COMMIT, SKIP, Mismatch, Plan


def build_report(
    *,
    dag_id: str,
    run_id: str,
    params: dict,
    plan: Plan,
    committed: dict[str, dict[tuple[str, int], int]],
    log_end: dict[tuple[str, int], int],
    mismatches: list[Mismatch],
    refused: dict[str, str] | None = None,
    dry_run: bool = False,
    checkpoints_summary: dict | None = None,
    warnings: list[str] | None = None,
) -> dict:
    """``committed``: what the target holds after the run; ``log_end``: replica end offsets now (for lag)."""
    refused = refused or {}
    per_group: dict[str, dict] = defaultdict(lambda: {
        "partitions": 0, "committed": 0, "skipped": 0, "clamped": 0, "retention_lost": 0, "lag": 0,
        "mismatches": 0, "refused": "", "source_alias": ""})
    partitions = []
    mism = {(m.group, m.topic, m.partition) for m in mismatches}
    for r in plan.rows:
        g = per_group[r.group]
        g["source_alias"] = r.source_alias
        g["partitions"] += 1
        got = committed.get(r.group, {}).get((r.topic, r.partition))
        end = log_end.get((r.topic, r.partition), r.log_end)
        lag = (end - got) if (got is not None and end is not None) else None
        if r.action == SKIP:
            g["skipped"] += 1
        elif r.action == CLAMP:
            g["clamped"] += 1
        if r.writes and not dry_run and (r.group, r.topic, r.partition) not in mism:
            g["committed"] += 1
        g["retention_lost"] += r.retention_gap
        g["lag"] += lag or 0
        if (r.group, r.topic, r.partition) in mism:
            g["mismatches"] += 1
        partitions.append({**r.as_dict(), "committed_after": got, "lag": lag,
                           "verified": (r.group, r.topic, r.partition) not in mism if r.writes and not dry_run else None})
    for g, why in refused.items():
        per_group[g]["refused"] = why
    groups = [{"group": g, **v} for g, v in sorted(per_group.items())]
    counts = plan.counts()
    totals = {
        "groups": len(groups),
        "groups_moved": 0 if dry_run else sum(1 for g in groups if g["committed"] and not g["refused"]),
        "partitions": len(plan.rows),
        "committed": 0 if dry_run else sum(g["committed"] for g in groups),
        "planned_commits": counts[COMMIT] + counts[CLAMP],
        "skipped": counts[SKIP],
        "clamped": counts[CLAMP],
        "refused_groups": len(refused),
        "mismatches": len(mismatches),
        "records_lost_to_retention": sum(r.retention_gap for r in plan.rows),
        "lag": sum(g["lag"] for g in groups),
    }
    outcome = ("dry_run" if dry_run else
               "failed" if mismatches or refused else "succeeded")
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "outcome": outcome,
        "dry_run": dry_run,
        "params": params,
        "totals": totals,
        "checkpoints": checkpoints_summary or {},
        "warnings": warnings or [],
        "groups": groups,
        "partitions": partitions,
        "mismatches": [m.__dict__ for m in mismatches],
    }


def md_table(columns: Iterable[tuple[str, str]], rows: Iterable[Iterable[Any]]) -> list[str]:
    """Markdown table lines. ``columns``: (title, "l" or "r" alignment); a None cell renders empty and a ``|``
    inside a cell (a group name may hold one) is escaped so it cannot split the row."""
    columns = list(columns)

    def cell(v: Any) -> str:
        return "" if v is None else str(v).replace("|", "\\|")

    return (["| " + " | ".join(t for t, _ in columns) + " |",
             "|" + "|".join("---:" if a == "r" else "---" for _, a in columns) + "|"]
            + ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows])


def render_markdown(report: dict) -> str:
    t = report["totals"]
    lines = [
        f"# mm2-failover report: {report['dag_id']} / {report['run_id']}",
        "",
        f"**Outcome: {report['outcome'].upper()}**" + (" (dry run: nothing was written)" if report["dry_run"] else ""),
        "",
        *md_table([(c, "r") for c in ("groups", "moved", "partitions", "committed", "skipped", "clamped",
                                       "refused groups", "mismatches", "lost to retention", "lag")],
                  [[t["groups"], t["groups_moved"], t["partitions"], t["committed"], t["skipped"], t["clamped"],
                    t["refused_groups"], t["mismatches"], t["records_lost_to_retention"], t["lag"]]]),
        "",
    ]
    for w in report.get("warnings", []):
        lines.append(f"> WARNING: {w}")
    cs = report.get("checkpoints") or {}
    if cs:
        lines += ["", f"Checkpoints read: {cs.get('records_read', '?')} records, {cs.get('checkpoints', '?')} latest, "
                      f"{cs.get('tombstones', 0)} tombstones, {cs.get('quarantined', 0)} quarantined "
                      f"{cs.get('quarantined_by_reason') or ''}".rstrip(), ""]
    lines += ["## Groups", ""]
    lines += md_table([("group", "l"), ("alias", "l"), ("partitions", "r"), ("committed", "r"), ("skipped", "r"),
                       ("clamped", "r"), ("lost to retention", "r"), ("lag", "r"), ("refused", "l")],
                      ([g["group"], g["source_alias"], g["partitions"], g["committed"], g["skipped"], g["clamped"],
                        g["retention_lost"], g["lag"], g["refused"] or None] for g in report["groups"]))
    lines += ["", "## Partitions", ""]
    lines += md_table([("group", "l"), ("topic", "l"), ("partition", "r"), ("upstream", "r"), ("downstream", "r"),
                       ("before", "r"), ("planned", "r"), ("after", "r"), ("action", "l"), ("reason", "l"),
                       ("lag", "r")],
                      ([p["group"], p["topic"], p["partition"], p["upstream_offset"], p["downstream_offset"],
                        p["current_offset"], p["planned_offset"], p["committed_after"], p["action"], p["reason"],
                        p["lag"]] for p in report["partitions"]))
    if report["mismatches"]:
        lines += ["", "## Mismatches (committed != planned)", ""]
        for m in report["mismatches"]:
            lines.append(f"- {m['group']} {m['topic']}[{m['partition']}]: planned {m['planned']}, committed {m['committed']}")
    return "\n".join(lines) + "\n"
