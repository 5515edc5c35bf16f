"""DR drill: run the failover pipeline against the configured clusters as a dry run, while production keeps
running, and record what a real failover would do and how ready the replica is.

The DAG ``mm2_failover_drill`` (dags/mm2_failover_drill.py) reuses the failover's steps, Spark operator and
empty-group sensor; its task bodies are in :mod:`mm2_failover.tasks`. This module is the drill's pure part: what it
writes and what it finds. What differs from a failover:

* ``measure_replication_lag`` replaces the drain sensor: producers and consumers keep running during a drill,
  so it observes once (the same :func:`mm2_failover.stages.drain_check.drain_status`) and records the replication lag instead of
  waiting for a drain that will not come;
* ``plan_group_offsets`` builds the plan and **never writes offsets**, except when the run param
  ``allow_drill_writes_for_prefix`` is a non-empty prefix, and then only for groups whose id starts with it
  (test groups that exercise the write path end to end); a backup is taken first, as in a failover;
* ``drill_report`` writes the usual ``report.json``/``report.md`` (dry run) plus ``drill.json``/``drill.md``:
  groups covered, partitions without checkpoints, checkpoint age, replication lag, estimated re-read per
  group/partition, clamp and retention findings. The UI's trend page reads every ``drill.json``.

Estimated re-read of a partition = the group's committed offset on the source (the checkpoint's upstream
offset when the source commit is unknown) minus the offset planned on the target. It counts records in
offsets, assuming the replica's offsets equal the source's (MM2 replicated the topic from its start, no
transaction markers); when the plan shows they cannot be (planned downstream offset above the upstream
offset), the estimate is left empty rather than guessed.
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from typing import Any, Iterable

from mm2_failover.rules.plan import Plan
from mm2_failover.rules.report import estimate_reread, md_table
from mm2_failover.rules.words import listed

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------ pure parts


def normalize_prefix(prefix: Any) -> str:
    """The write-enabling prefix: a non-empty string, or "" (= never write). Whitespace-only counts as empty."""
    if prefix is None:
        return ""
    if not isinstance(prefix, str):
        raise ValueError(f"allow_drill_writes_for_prefix must be a string, not {type(prefix).__name__}")
    return prefix.strip()


def writable_plan(plan, prefix: Any):
    """The part of ``plan`` a drill may write: rows of groups whose id starts with a non-empty ``prefix``.
    An empty prefix gives an empty plan (the drill writes nothing)."""
    p = normalize_prefix(prefix)
    if not p:
        return Plan([])
    return Plan([r for r in plan.rows if r.group.startswith(p)])


def _as_utc(ts: Any) -> datetime | None:
    if ts is None:
        return None
    if isinstance(ts, datetime):
        return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)
    if isinstance(ts, (int, float)):  # epoch milliseconds (Kafka record timestamps)
        return datetime.fromtimestamp(ts / 1000.0, timezone.utc)
    if isinstance(ts, str):
        d = datetime.fromisoformat(ts.replace("Z", "+00:00"))
        return d if d.tzinfo else d.replace(tzinfo=timezone.utc)
    raise TypeError(f"not a timestamp: {ts!r}")


def checkpoint_ages(checkpoints: Iterable[dict], captured_at: Any) -> list[dict]:
    """Age (seconds, at snapshot time) of each latest checkpoint, from its record timestamp."""
    now = _as_utc(captured_at)
    out = []
    for c in checkpoints:
        ts = _as_utc(c.get("checkpoint_timestamp"))
        out.append(
            {
                "group": c["group"],
                "topic": c["topic"],
                "partition": int(c["partition"]),
                "checkpoint_time": ts.isoformat(timespec="seconds") if ts else None,
                "age_seconds": round((now - ts).total_seconds(), 1) if ts and now else None,
            }
        )
    return out


def replication_lag(drain_rows: Iterable[dict]) -> list[dict]:
    """Per source partition in scope: how far the replica is behind, from one drain observation.
    ``lag_records`` = source end - replica end (aligned offsets); ``mm2_progress_lag`` = source end - (MM2's last
    replicated offset + 1), from MM2's own progress record (flushed periodically, so an upper bound)."""
    out = []
    for r in drain_rows:
        se, re_, rep = r.get("source_end"), r.get("replica_end"), r.get("replicated")
        out.append(
            {
                "topic": r["topic"],
                "partition": int(r["partition"]),
                "replica_topic": r.get("replica_topic"),
                "source_end": se,
                "replica_end": re_,
                "replicated": rep,
                "lag_records": None if se is None or re_ is None else max(0, se - re_),
                "mm2_progress_lag": None if se is None or rep is None else max(0, se - rep - 1),
                "producers_active": bool(r.get("moved")),
                "state": r.get("state"),
            }
        )
    return out


def partitions_without_checkpoints(
    plan_rows: Iterable[dict], source_commits: dict[tuple[str, str, int], int]
) -> list[dict]:
    """Partitions a failover would not move for lack of a checkpoint: plan rows skipped for it (the plan includes
    the partitions the selected groups commit on at the source), and source commits of covered groups that have no
    plan row at all."""
    rows = list(plan_rows)
    have = {(r["group"], r["topic"], int(r["partition"])) for r in rows if r.get("upstream_offset") is not None}
    out = {
        (r["group"], r["topic"], int(r["partition"])): "no checkpoint for this partition"
        for r in rows
        if r.get("reason") in ("no_checkpoint", "group_never_checkpointed")
    }
    covered = {r["group"] for r in rows}
    for k in source_commits:
        if k[0] in covered and k not in have and k not in out:
            out[k] = "committed on the source, never checkpointed"
    return [{"group": g, "topic": t, "partition": p, "why": why} for (g, t, p), why in sorted(out.items())]


def _max_by(items: list[dict], key: str) -> dict | None:
    vals = [i for i in items if i.get(key) is not None]
    return max(vals, key=lambda i: i[key]) if vals else None


def build_drill_report(
    *,
    dag_id: str,
    run_id: str,
    params: dict,
    snapshot: dict,
    plan_rows: list[dict],
    checkpoints: list[dict],
    drain_rows: list[dict] | None,
    live_target_groups: list[str],
    source_commits: dict[tuple[str, str, int], int],
    selected_source_groups: list[str] | None,
    plan_refusal: str | None = None,
    writes: dict | None = None,
    report_warnings: list[str] | None = None,
    finished_at: str | None = None,
    source_aliases: list[str] | None = None,
) -> DrillReport:
    """Pure: the drill's findings from what its tasks observed (all inputs are plain data). ``source_commits``:
    (group, replica topic, partition) -> the group's commit on the source; ``selected_source_groups``: the selected
    groups that commit on a source (None: no source was reachable)."""
    with_checkpoints = {r["group"] for r in plan_rows if r.get("upstream_offset") is not None}
    groups = sorted(with_checkpoints)  # covered: a failover would move them
    reread = estimate_reread(plan_rows, source_commits)
    ages = checkpoint_ages(checkpoints, snapshot.get("captured_at"))
    lag = replication_lag(drain_rows or [])
    missing = partitions_without_checkpoints(plan_rows, source_commits)
    no_cp_groups = sorted(set(selected_source_groups) - with_checkpoints) if selected_source_groups is not None else []
    clamps = [
        {
            "group": r["group"],
            "topic": r["topic"],
            "partition": int(r["partition"]),
            "reason": r["reason"],
            "checkpoint": r.get("downstream_offset"),
            "planned": r.get("planned_offset"),
            "log_start": r.get("log_start"),
            "log_end": r.get("log_end"),
            "retention_gap": r.get("retention_gap", 0),
        }
        for r in plan_rows
        if r.get("action") == "clamp"
    ]

    per_group = []
    for g in groups:
        rows = [r for r in plan_rows if r["group"] == g]
        ga = [a["age_seconds"] for a in ages if a["group"] == g and a["age_seconds"] is not None]
        gr = [e["reread"] for e in reread if e["group"] == g and e["reread"] is not None]
        per_group.append(
            {
                "group": g,
                "partitions": len(rows),
                "planned": sum(1 for r in rows if r.get("planned_offset") is not None),
                "without_checkpoint": sum(1 for m in missing if m["group"] == g),
                "checkpoint_age_max_seconds": max(ga) if ga else None,
                "reread_estimate": sum(gr) if gr else None,
                "clamped": sum(1 for c in clamps if c["group"] == g),
                "retention_lost": sum(c["retention_gap"] or 0 for c in clamps if c["group"] == g),
                "reason": ", ".join(sorted({r["reason"] for r in rows if r.get("reason")})),
                "live_on_target": g in live_target_groups,
            }
        )

    age_vals = [a["age_seconds"] for a in ages if a["age_seconds"] is not None]
    lag_vals = [x["lag_records"] for x in lag if x["lag_records"] is not None]
    rr_vals = [e["reread"] for e in reread if e["reread"] is not None]
    totals = {
        "groups_covered": len(groups),
        "groups_without_checkpoints": len(no_cp_groups),
        "partitions": len(plan_rows),
        "partitions_planned": sum(1 for r in plan_rows if r.get("planned_offset") is not None),
        "partitions_without_checkpoints": len(missing),
        "checkpoint_age_max_seconds": max(age_vals) if age_vals else None,
        "checkpoint_age_median_seconds": round(statistics.median(age_vals), 1) if age_vals else None,
        "replication_lag_max_records": max(lag_vals) if lag_vals else None,
        "replication_lag_total_records": sum(lag_vals) if lag_vals else None,
        # every partition unknown: unknown, never 0 (the report's rule)
        "records_reread_estimate": sum(rr_vals) if rr_vals else None,
        "partitions_reread_unknown": sum(1 for e in reread if e["reread"] is None),
        "partitions_clamped": len(clamps),
        "records_lost_to_retention": sum(c["retention_gap"] or 0 for c in clamps),
        "live_groups_on_target": len(live_target_groups),
        "groups_written": len((writes or {}).get("applied") or {}),
    }

    findings: list[str] = []
    if plan_refusal:
        findings.append(f"A real failover with these params would refuse the plan: {plan_refusal}")
    if no_cp_groups:
        findings.append(
            f"{len(no_cp_groups)} selected group(s) commit on the source but have no checkpoint at all "
            f"(MM2's group filter, or they consume topics MM2 does not replicate): " + listed(no_cp_groups)
        )
    if missing:
        findings.append(
            f"{len(missing)} partition(s) of covered groups have no checkpoint: a failover leaves them "
            "uncommitted (consumers fall back to auto.offset.reset)"
        )
    oldest = _max_by(ages, "age_seconds")
    if oldest:
        findings.append(
            f"oldest checkpoint: {oldest['age_seconds']} s ({oldest['group']} {oldest['topic']}"
            f"[{oldest['partition']}]); MM2 does not re-emit unchanged checkpoints, so an idle group's "
            "checkpoint ages without being wrong"
        )
    worst_lag = _max_by(lag, "lag_records")
    if worst_lag and worst_lag["lag_records"]:
        findings.append(
            f"replication lag: {sum(lag_vals)} record(s) behind on "
            f"{sum(1 for v in lag_vals if v)} partition(s); worst {worst_lag['topic']}"
            f"[{worst_lag['partition']}] {worst_lag['lag_records']} (a failover now would lose these "
            "unless the source comes back)"
        )
    if rr_vals and sum(rr_vals):
        worst = max(per_group, key=lambda g: g["reread_estimate"] or 0)
        findings.append(
            f"estimated re-read on failover: {sum(rr_vals)} record(s); most in {worst['group']} "
            f"({worst['reread_estimate']}). Consumers must be idempotent"
        )
    if clamps:
        lost = totals["records_lost_to_retention"]
        findings.append(
            f"{len(clamps)} partition(s) would be clamped"
            + (f"; {lost} record(s) already lost to retention on the target" if lost else "")
            + ": "
            + listed((f"{c['group']} {c['topic']}[{c['partition']}] {c['reason']}" for c in clamps), 10)
        )
    if live_target_groups:
        findings.append(
            f"{len(live_target_groups)} group(s) have live members on the TARGET: a failover would wait "
            "for them: " + listed(live_target_groups)
        )
    if writes and writes.get("refused"):
        findings.append(
            f"drill writes refused for {len(writes['refused'])} group(s): "
            + listed((f"{g}: {w}" for g, w in sorted(writes["refused"].items())), 10, "; ")
        )
    if writes and writes.get("mismatches"):
        findings.append(f"{len(writes['mismatches'])} drill-written partition(s) did not read back as planned")
    findings += [f"report: {w}" for w in report_warnings or []]
    totals["findings"] = len(findings)
    return DrillReport(
        dag_id=dag_id,
        run_id=run_id,
        captured_at=snapshot.get("captured_at"),
        finished_at=finished_at,
        source_alias=", ".join(source_aliases or sorted(snapshot.get("checkpoints_topics") or {})),
        disaster_mode=bool(snapshot.get("disaster_aliases")),
        params=params,
        totals=totals,
        findings=findings,
        groups=per_group,
        groups_without_checkpoints=no_cp_groups,
        partitions_without_checkpoints=missing,
        checkpoint_ages=ages,
        replication_lag=lag,
        reread=reread,
        clamps=clamps,
        live_groups_on_target=list(live_target_groups),
        writes=writes or {},
    )


@dataclass
class DrillReport:
    """``drill.json``: the drill's findings (:func:`build_drill_report`). Its published form (:meth:`as_dict`, with
    ``kind: drill``) is what the renderers, the metrics and the UI read."""

    dag_id: str
    run_id: str
    captured_at: str | None
    finished_at: str | None
    source_alias: str  # the drilled source alias(es), comma-separated
    disaster_mode: bool
    params: dict
    totals: dict
    findings: list[str]
    groups: list[dict]
    groups_without_checkpoints: list[str]
    partitions_without_checkpoints: list[dict]
    checkpoint_ages: list[dict]
    replication_lag: list[dict]
    reread: list[dict]
    clamps: list[dict]
    live_groups_on_target: list[str]
    writes: dict

    def as_dict(self) -> dict:
        return {"kind": "drill", **asdict(self)}

    @classmethod
    def from_dict(cls, d: dict) -> "DrillReport":
        if d.get("kind") != "drill":
            raise ValueError(f"kind is {d.get('kind')!r}, not 'drill'")
        return cls(**{f.name: d[f.name] for f in fields(cls)})


def render_drill_markdown(d: "DrillReport | dict") -> str:
    """``drill.md`` from a drill report (or its published form)."""
    d = d.as_dict() if isinstance(d, DrillReport) else d
    t = d["totals"]
    prefix = (d.get("writes") or {}).get("prefix")
    lines = [
        f"# mm2-failover DR drill: {d['dag_id']} / {d['run_id']}",
        "",
        f"Captured at {d.get('captured_at') or ''}, source alias {d.get('source_alias') or ''}. Dry run"
        + (f"; writes allowed for groups starting with {prefix!r}" if prefix else ": nothing was written")
        + ".",
        "",
        *md_table(
            [
                (c, "r")
                for c in (
                    "groups covered",
                    "without checkpoints",
                    "partitions",
                    "without checkpoint",
                    "max checkpoint age (s)",
                    "max replication lag",
                    "est. re-read",
                    "clamped",
                    "lost to retention",
                    "live on target",
                )
            ],
            [
                [
                    t["groups_covered"],
                    t["groups_without_checkpoints"],
                    t["partitions"],
                    t["partitions_without_checkpoints"],
                    t["checkpoint_age_max_seconds"],
                    t["replication_lag_max_records"],
                    t["records_reread_estimate"],
                    t["partitions_clamped"],
                    t["records_lost_to_retention"],
                    t["live_groups_on_target"],
                ]
            ],
        ),
        "",
        "## Findings",
        "",
    ]
    lines += [f"- {x}" for x in d["findings"]] or ["- none"]
    lines += ["", "## Groups", ""]
    lines += md_table(
        [
            ("group", "l"),
            ("partitions", "r"),
            ("without checkpoint", "r"),
            ("max checkpoint age (s)", "r"),
            ("est. re-read", "r"),
            ("clamped", "r"),
            ("lost to retention", "r"),
            ("live on target", "l"),
        ],
        (
            [
                g["group"],
                g["partitions"],
                g["without_checkpoint"],
                g["checkpoint_age_max_seconds"],
                g["reread_estimate"],
                g["clamped"],
                g["retention_lost"],
                "yes" if g["live_on_target"] else None,
            ]
            for g in d["groups"]
        ),
    )
    lines += ["", "## Estimated re-read per partition", ""]
    lines += md_table(
        [
            ("group", "l"),
            ("topic", "l"),
            ("partition", "r"),
            ("source commit", "r"),
            ("checkpoint upstream", "r"),
            ("planned", "r"),
            ("re-read", "r"),
        ],
        (
            [
                e["group"],
                e["topic"],
                e["partition"],
                e["source_committed"],
                e["checkpoint_upstream"],
                e["planned"],
                e["reread"],
            ]
            for e in d["reread"]
        ),
    )
    lines += ["", "## Replication lag (snapshot)", ""]
    lines += md_table(
        [
            ("topic", "l"),
            ("partition", "r"),
            ("source end", "r"),
            ("replica end", "r"),
            ("MM2 replicated", "r"),
            ("lag", "r"),
            ("producers active", "l"),
        ],
        (
            [
                x["topic"],
                x["partition"],
                x["source_end"],
                x["replica_end"],
                x["replicated"],
                x["lag_records"],
                "yes" if x["producers_active"] else None,
            ]
            for x in d["replication_lag"]
        ),
    )
    return "\n".join(lines) + "\n"
