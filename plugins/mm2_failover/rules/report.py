"""Run reports (pure): totals, the fate of every selected group, per-partition rows, warnings; as JSON (machines)
and Markdown (people). The rules that only describe a run live here, once:

* **re-read estimate** (:func:`estimate_reread`) - records a moved group reads again on the target;
* **stale checkpoints** (:func:`stale_checkpoints`) - a checkpoint behind the group's last commit on the source;
* **checkpoint warnings** (:func:`checkpoint_warnings`) - quarantined records, regressions;
* **lost to retention** - ``log start - checkpoint`` is only an upper bound (the checkpoint is conservative);
  where the group's source commit is known and the source offset of the replica's first record was found, the
  exact number of records the group had not read and that are gone (``lost_exact``);
* **group fate** (:func:`group_fates`) - moved / skipped (why) / refused / dry run, for every selected group.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, fields
from typing import Any, Iterable

from mm2_failover.rules import approval
from mm2_failover.rules.plan import (
    CHECKPOINT_AHEAD_OF_SOURCE,
    CLAMP,
    COMMIT,
    EXISTING_TARGET_OFFSETS,
    GROUP_NEVER_CHECKPOINTED,
    NO_CHECKPOINT,
    SKIP,
    TARGET_AHEAD,
    Mismatch,
    Plan,
)
from mm2_failover.rules.readiness import answer_counts
from mm2_failover.rules.translate import ARCHIVE_FLOOR, FIRST_COPY, HOME, REPLICA_START, SUPERSEDED_SYNC, is_exact
from mm2_failover.rules.words import listed

#: ``report.json``'s per-partition rows, in ``report_partitions.parquet`` (column -> Arrow type): the plan's row
#: (:class:`mm2_failover.rules.plan.PlanRow`) and what verify found. ``report.json`` keeps the totals, the groups and the
#: warnings (kilobytes to a few MB at 10k groups); the 100k rows of 10k groups x 10 partitions were 65-83 MB of JSON.
PARTITION_COLUMNS: dict[str, str] = {
    "source_alias": "string",
    "group": "string",
    "topic": "string",
    "partition": "int64",
    "upstream_offset": "int64",
    "downstream_offset": "int64",
    "current_offset": "int64",
    "planned_offset": "int64",
    "action": "string",
    "reason": "string",
    "log_start": "int64",
    "log_end": "int64",
    "retention_gap": "int64",
    "metadata": "string",
    "rule": "string",
    "source_position": "int64",
    "exact_offset": "int64",
    "position_at_least": "int64",
    # verify's
    "committed_after": "int64",
    "lag": "int64",
    "reread_estimate": "int64",
    "lost_to_retention_exact": "int64",
    "verified": "bool",
}
#: the rows of :func:`stale_checkpoints` (one per partition whose checkpoint lags the source commit: commonly most of
#: them while the groups consume), in ``report_stale_checkpoints.parquet``
STALE_COLUMNS: dict[str, str] = {
    "group": "string",
    "topic": "string",
    "partition": "int64",
    "source_committed": "int64",
    "checkpoint_upstream": "int64",
}
#: the report's fields kept as Parquet rows beside report.json (field -> its columns)
ROW_COLUMNS: dict[str, dict[str, str]] = {"partitions": PARTITION_COLUMNS, "stale_checkpoints": STALE_COLUMNS}

#: (group, replica topic, partition) -> the group's committed offset on the source
SourceCommits = dict[tuple[str, str, int], int]

#: the outcomes of a report written before apply, while or because the plan's approval decided
APPROVAL_OUTCOMES = tuple(approval.OUTCOMES.values())

STALE_SNAPSHOT_S = 900  # a snapshot older than this when the plan is built is called out


_SCALARS = frozenset({str, int, float, bool, type(None)})


def plain(v: Any) -> Any:
    """A copy of JSON-like data (dicts, lists, tuples, sets and scalars), nested containers copied too. A scalar
    inside a dict or a list is taken as it is, without a call per value: a report at 10k groups x 10 partitions
    holds ~2M of them, and that call was most of the ~0.5 s each :meth:`Report.as_dict` took."""
    if isinstance(v, dict):
        if _SCALARS.issuperset(map(type, v.values())):  # a row of scalars: one copy, the check in C
            return dict(v)
        return {k: x if type(x) in _SCALARS else plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [x if type(x) in _SCALARS else plain(x) for x in v]
    if isinstance(v, tuple):
        return type(v)(*map(plain, v)) if hasattr(v, "_fields") else tuple(plain(x) for x in v)
    if isinstance(v, set):
        return {plain(x) for x in v}
    return v


@dataclass
class Report:
    """``report.json``: one run's verified report (:func:`build_report`; ``artifacts``, ``rpo`` and ``moved_since``
    are added by the verify stage). The renderers (:func:`render_markdown`, :func:`run_summary`, the metrics, the UI)
    read its published form, :meth:`as_dict`, which is what a later reader of the file has too."""

    dag_id: str
    run_id: str
    outcome: str  # succeeded | failed | dry_run | awaiting_approval | approved | rejected | approval_timed_out
    dry_run: bool
    params: dict
    snapshot: dict  # captured_at, age_seconds, disaster_aliases of the snapshot the plan was built from
    totals: dict
    checkpoints: dict  # the Spark job's summary
    warnings: list[str]
    groups: list[dict]
    partitions: list[dict]
    stale_checkpoints: list[dict]
    mismatches: list[dict]
    artifacts: str = ""  # the run folder
    rpo: dict | None = None  # disaster mode: the data-loss window
    moved_since: dict = field(default_factory=dict)  # group -> what moved since the backup (apply rule 5)
    approval: dict | None = None  # approval.json as the report was written (mm2_failover.rules.approval.Decision)

    def as_dict(self) -> dict:
        """A copy of every field (what ``dataclasses.asdict`` gives, without its deep copy of 100k rows through
        ``copy.deepcopy``: a minute at 10k groups x 10 partitions)."""
        return {f.name: plain(getattr(self, f.name)) for f in fields(self)}

    def view(self) -> dict:
        """Every field as it is, nothing copied: :meth:`as_dict`'s form for a reader that changes nothing in it (the
        report's publishing, the metrics, the Asset events). Each copy of 100k rows took ~0.3 s, and at 1M rows it
        held ~1 GB more while the report was written (tests/unit/test_report.py checks that they change nothing)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict) -> "Report":
        return cls(**{f.name: d[f.name] for f in fields(cls)})


_FLOOR_NOTES = {
    SUPERSEDED_SYNC: "first copy of a record MM2 copied again later: re-reads what lies between (this many offsets "
    "at least: an offset distance, markers and aborted copies included)",
    FIRST_COPY: "the first of several copies of the group's next record, no later one anchored: may re-read what lies "
    "between (counted from the floor the offset syncs prove, in offsets)",
    REPLICA_START: "at the replica's first record (no offset sync at or below the group's position): re-reads what "
    "the replica holds before it (not counted); what retention took before it is counted as lost",
    ARCHIVE_FLOOR: "the source lost: at the newest archived offset sync at or below the group's position (MM2's own "
    "rule over every archived sync): re-reads what lies between (not counted: the source's records "
    "cannot be read)",
}


def estimate_reread(rows: Iterable[dict], source_commits: SourceCommits) -> list[dict]:
    """Per planned partition: records the group will read again on the target.

    ``rows``: plan rows (dicts with group, topic = replica topic, partition, upstream_offset, planned_offset);
    ``source_commits``: the group's committed offset on the source when known. Where the replica offset of the
    group's position is known exactly (``exact_offset``, from the offset syncs), ``reread`` = exact - planned (0 when
    the plan resumes there) and ``reread_by_checkpoint`` = what MM2's checkpoint alone would re-read. Otherwise
    ``behind_commit`` = source commit -
    checkpoint upstream (records consumed after MM2's newest checkpoint); ``reread`` = source commit - planned
    offset, counting records in offsets and assuming the replica's offsets equal the source's (MM2 replicated the
    topic from its start, no transaction markers); when the plan shows they cannot be (planned downstream offset
    above the upstream offset), or the group's source commit is not known (the source lost: MM2's checkpoint's own
    upstream offset says nothing of the copies MM2 made twice - a real bed showed 703 estimated where 1,424 were
    re-read), it is left empty ("unknown") rather than guessed. A row at a floor (the sync floor, a superseded sync's
    first copy, the lookup's first copy, the replica's start) is not counted either: ``reread`` is empty and
    ``reread_at_least`` says what is proven (issue 50 item 7; the truth harness, tests/unit/test_truth.py, holds
    every figure to within 10 % of the truth or empty). Where the offset syncs prove a lower bound on
    the group's position (``position_at_least``: MM2 copied the records again, or its checkpoint lags), every row
    without an exact position says ``reread_at_least`` = that bound - planned, and an estimate below it is raised to
    it (offsets alone undercount after MM2 copied records twice); a row without an estimate stays unknown (the bound
    is no estimate: the exact drill's retention groups re-read 51 where it said 0). ``exact`` says whether
    ``reread`` is a count."""
    out = []
    for r in rows:
        up, planned, exact = r.get("upstream_offset"), r.get("planned_offset"), r.get("exact_offset")
        if planned is not None and exact is not None and r.get("rule") == "home_sync_floor":
            # failing back at the sync floor: safe, but where the group really is was not proven
            out.append(
                {
                    "group": r["group"],
                    "topic": r["topic"],
                    "partition": int(r["partition"]),
                    "source_committed": r.get("source_position"),
                    "checkpoint_upstream": up,
                    "planned": planned,
                    "behind_commit": None,
                    "reread": None,
                    "note": "home at the offset-sync floor: re-reads what the group read after that sync",
                }
            )
            continue
        at_least = (
            None if planned is None or r.get("position_at_least") is None else max(0, r["position_at_least"] - planned)
        )
        if planned is not None and r.get("rule") != "checkpoint" and not is_exact(r.get("rule")):
            # a superseded sync's first copy (the later history's copies between the two are read again), or the
            # sync floor (the records between the sync and the position are read again): counted from below only
            out.append(
                {
                    "group": r["group"],
                    "topic": r["topic"],
                    "partition": int(r["partition"]),
                    "source_committed": r.get("source_position"),
                    "checkpoint_upstream": up,
                    "planned": planned,
                    "behind_commit": None,
                    "reread": None,
                    "reread_at_least": at_least,
                    "exact": False,
                    "note": _FLOOR_NOTES.get(
                        r.get("rule"),
                        "at the offset-sync floor: re-reads what lies "
                        "between the sync and the group's position (not counted)",
                    ),
                }
            )
            continue
        key = (r["group"], r["topic"], int(r["partition"]))
        if (
            planned is not None
            and exact is not None
            and is_exact(r.get("rule"))
            and key not in source_commits
            and not str(r.get("rule")).startswith(HOME)
        ):
            # the source lost: exact from MM2's checkpoint's upstream offset, which lags the group wherever MM2 did
            # not re-emit (it does only when its translation moves: the drill, a group at 62 checkpointed at 1), or
            # from the archive's reading of the group's commit (plan rule 1a), as old as the archive's last run
            out.append(
                {
                    "group": r["group"],
                    "topic": r["topic"],
                    "partition": int(r["partition"]),
                    "source_committed": None,
                    "checkpoint_upstream": up,
                    "planned": planned,
                    "behind_commit": None,
                    "reread": None,
                    "reread_at_least": max(0, exact - planned),
                    "exact": False,
                    "note": "exact from the group's last known position (MM2's checkpoint, or "
                    "the archive's reading of its commit: plan rule 1a); its commit now is not known (the source "
                    "lost): it may have read on since, not counted",
                }
            )
            continue
        if planned is not None and exact is not None and is_exact(r.get("rule")):  # known: re-read exactly
            out.append(
                {
                    "group": r["group"],
                    "topic": r["topic"],
                    "partition": int(r["partition"]),
                    "source_committed": source_commits.get(key, r.get("source_position")),
                    "checkpoint_upstream": up,
                    "planned": planned,
                    "behind_commit": None,
                    "reread": max(0, exact - planned),
                    "exact": True,
                    "reread_by_checkpoint": None
                    if r.get("downstream_offset") is None
                    else max(0, exact - r["downstream_offset"]),
                    "note": "",
                }
            )
            continue
        if planned is None or up is None:
            continue
        key = (r["group"], r["topic"], int(r["partition"]))
        src = source_commits.get(key)
        aligned = planned <= up  # MM2 translates conservatively: downstream <= upstream when offsets align
        guess = max(0, src - planned) if aligned and src is not None else None
        note = (
            ""
            if guess is not None
            else "replica offsets differ from the source's: not estimated"
            if src is not None
            else "the group's source commit is not known (the source lost, or no commit there): not estimated"
        )
        if at_least is not None and guess is not None and guess < at_least:
            guess, note = (
                at_least,
                (
                    "this many offsets from the floor the offset syncs prove (an offset distance): "
                    "the checkpoint's offsets undercount"
                ),
            )
        elif at_least is not None and guess is None:  # a proven floor is no estimate (the drill: 0 said, 51 read)
            note += f"; at least {at_least} offset(s) from the floor the offset syncs prove"
        out.append(
            {
                "group": r["group"],
                "topic": r["topic"],
                "partition": int(r["partition"]),
                "source_committed": src,
                "checkpoint_upstream": up,
                "planned": planned,
                "behind_commit": None if src is None else src - up,
                "reread": guess,
                "reread_at_least": at_least,
                "exact": False,
                "note": note,
            }
        )
    return out


#: the plan per partition as the command line prints it: (key, header) of its table, and the keys -o csv writes
PLAN_LINE_COLUMNS = [
    ("group", "GROUP"),
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("new_offset", "NEW-OFFSET"),
    ("checkpoint", "CHECKPOINT"),
    ("re_read", "RE-READ"),
    ("rule", "RULE"),
]
PLAN_LINE_DATA = [
    "group",
    "topic",
    "partition",
    "new_offset",
    "checkpoint",
    "reread",
    "reread_exact",
    "reread_at_least",
    "action",
    "rule",
    "reason",
]


def plan_lines(rows: Iterable[dict], reread: Iterable[dict]) -> list[dict]:
    """The plan per partition, in ``kafka-consumer-groups``' order (group, topic, partition): the offset it commits
    (``new_offset``; none where skipped), MM2's checkpoint (its downstream offset), the records the group reads again
    from there (:func:`estimate_reread`: ``reread`` and whether it is a count, ``reread_exact``, or a proven floor,
    ``reread_at_least``) and the rule that chose the offset, or why the partition is skipped. ``re_read`` is that
    figure as the table shows it: ``12`` counted, ``~12`` estimated, ``>=12`` at least, ``?`` not known."""
    said = {(e["group"], e["topic"], int(e["partition"])): e for e in reread}
    out = []
    for r in sorted(rows, key=lambda r: (r["group"], r["topic"], int(r["partition"]))):
        e = said.get((r["group"], r["topic"], int(r["partition"])), {})
        n, floor, exact = e.get("reread"), e.get("reread_at_least"), bool(e.get("exact"))
        skipped = r.get("planned_offset") is None
        shown = (
            "-"
            if skipped
            else str(n)
            if n is not None and exact
            else f"~{n}"
            if n is not None
            else f">={floor}"
            if floor is not None
            else "?"
        )
        out.append(
            {
                "group": r["group"],
                "topic": r["topic"],
                "partition": int(r["partition"]),
                "new_offset": r.get("planned_offset"),
                "checkpoint": r.get("downstream_offset"),
                "reread": None if skipped else n,
                "reread_exact": exact and n is not None,
                "reread_at_least": None if skipped else floor,
                "re_read": shown,
                "action": r.get("action"),
                "rule": f"skip: {r.get('reason') or '-'}" if skipped else r.get("rule"),
                "reason": r.get("reason") or "",
            }
        )
    return out


def stale_checkpoints(rows: Iterable[dict], source_commits: SourceCommits) -> list[dict]:
    """Rows whose checkpoint's upstream offset differs from the group's commit on the source at capture time: MM2
    had not (yet, or could not) checkpoint the newest commit."""
    out = []
    for r in rows:
        if r.get("upstream_offset") is None:
            continue
        src = source_commits.get((r["group"], r["topic"], int(r["partition"])))
        if src is not None and src != r["upstream_offset"]:
            out.append(
                {
                    "group": r["group"],
                    "topic": r["topic"],
                    "partition": int(r["partition"]),
                    "source_committed": src,
                    "checkpoint_upstream": r["upstream_offset"],
                }
            )
    return out


def checkpoint_warnings(summary: dict) -> list[str]:
    out = []
    if summary.get("quarantined"):
        out.append(
            f"{summary['quarantined']} checkpoint record(s) could not be used {summary['quarantined_by_reason']}: "
            f"listed in {summary.get('quarantine_output')}"
        )
    if summary.get("regressions"):
        out.append(
            f"{summary['regressions']} checkpoint(s) went backwards within the read range (policy "
            f"{summary.get('policy')}: {'the highest was kept' if summary.get('policy') == 'max' else 'the latest was kept'}); "
            f"listed in {summary.get('regressions_output')}"
        )
    return out


_SKIP_WHY = {
    GROUP_NEVER_CHECKPOINTED: "MM2 never checkpointed it (no commit written on the target)",
    NO_CHECKPOINT: "no checkpoint for its partitions",
    EXISTING_TARGET_OFFSETS: "it already has different commits on the target (on_existing_target_offsets)",
    TARGET_AHEAD: "its commits on the target are ahead of the checkpoints (allow_rewind=false)",
    CHECKPOINT_AHEAD_OF_SOURCE: "rewound on the source after MM2's newest checkpoint, no floor proven (no commit "
    "written on the target)",
}


#: how a group the plan would move is shown while the run's outcome is its approval's (the report is built once, as a
#: dry run's, before the decision; the outcome changes with it)
FATE_BY_APPROVAL = {
    approval.OUTCOMES[approval.AWAITING]: "will move once approved",
    approval.OUTCOMES[approval.APPROVED]: "approved: moved once apply succeeds (see the run's tasks)",
    approval.OUTCOMES[approval.REJECTED]: "not moved: the plan was rejected",
    approval.OUTCOMES[approval.TIMED_OUT]: "not moved: approval timed out",
}
DRY_RUN_FATE = "would move (dry run)"


def fate_shown(fate: str | None, outcome: str | None) -> str:
    """A group's fate as a reader should read it now: a run waiting for its approval says its groups will move once
    approved, not that they would move in a dry run (the report page; report.md keeps the fate as built, so that a
    decision rewrites its outcome line only: :func:`restate_outcome`)."""
    if fate == DRY_RUN_FATE and outcome in FATE_BY_APPROVAL:
        return FATE_BY_APPROVAL[outcome]
    return fate or ""


def group_fates(plan: Plan, refused: dict[str, str], mismatched: set[str], dry_run: bool) -> dict[str, str]:
    """Every group of the plan: ``moved``, ``would move (dry run)``, ``refused by the broker: ...``,
    ``not as planned: ...``, or ``skipped: <why>``."""
    rows = defaultdict(list)
    for r in plan.rows:
        rows[r.group].append(r)
    out = {}
    for g, rs in sorted(rows.items()):
        writes = [r for r in rs if r.writes]
        if not writes:
            reasons = sorted({r.reason for r in rs}, key=lambda x: list(_SKIP_WHY).index(x) if x in _SKIP_WHY else 99)
            out[g] = "skipped: " + "; ".join(_SKIP_WHY.get(x, x) for x in reasons)
        elif dry_run:
            out[g] = DRY_RUN_FATE
        elif g in refused:
            out[g] = f"refused by the broker: {refused[g]}"
        elif g in mismatched:
            out[g] = "not as planned after apply (see mismatches)"
        else:
            missing = sum(1 for r in rs if not r.writes)
            out[g] = "moved" if not missing else f"moved ({missing} partition(s) skipped: see partitions)"
    return out


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
    source_commits: SourceCommits | None = None,
    lost_exact: dict[tuple[str, str, int], int] | None = None,
    snapshot: dict | None = None,
    outcome: str | None = None,
) -> Report:
    """``committed``: what the target holds after the run; ``log_end``: replica end offsets now (for lag);
    ``source_commits``: the groups' source commits (re-read estimate, stale checkpoints); ``lost_exact``: records
    lost to retention where they could be counted exactly; ``snapshot``: ``captured_at``, ``age_seconds``,
    ``disaster_aliases`` of the snapshot the plan was built from."""
    refused = refused or {}
    source_commits = source_commits or {}
    lost_exact = lost_exact or {}
    per_group: dict[str, dict] = defaultdict(
        lambda: {
            "partitions": 0,
            "committed": 0,
            "skipped": 0,
            "clamped": 0,
            "retention_lost": 0,
            "lag": 0,
            "mismatches": 0,
            "refused": "",
            "source_aliases": set(),
            "reread_estimate": None,
            "reread_unknown": 0,
        }
    )
    partitions = []
    mism = {(m.group, m.topic, m.partition) for m in mismatches}
    row_dicts = [r.as_dict() for r in plan.rows]  # once (read only below): 100k rows at 10k groups x 10 partitions
    estimates = estimate_reread([d for d, r in zip(row_dicts, plan.rows) if r.writes], source_commits)
    reread = {(e["group"], e["topic"], e["partition"]): e["reread"] for e in estimates}
    by_checkpoint = [e.get("reread_by_checkpoint") for e in estimates if e.get("reread_by_checkpoint") is not None]
    lost_total = lost_unclamped = lost_unknown = 0
    for r, row in zip(plan.rows, row_dicts):
        g = per_group[r.group]
        key = (r.group, r.topic, r.partition)
        if r.source_alias:
            g["source_aliases"].add(r.source_alias)
        g["partitions"] += 1
        got = committed.get(r.group, {}).get((r.topic, r.partition))
        got = getattr(got, "offset", got)
        end = log_end.get((r.topic, r.partition), r.log_end)
        lag = (end - got) if (got is not None and end is not None) else None
        if r.action == SKIP:
            g["skipped"] += 1
        elif r.action == CLAMP:
            g["clamped"] += 1
        if r.writes and not dry_run and key not in mism:
            g["committed"] += 1
        if r.rule == REPLICA_START:  # behind retention: lost before the replica's first record
            lost = lost_exact.get(key, 0)
            lost_unclamped += lost
            lost_unknown += r.writes and key not in lost_exact  # that record not found on the source: not known
        else:
            lost = min(lost_exact[key], r.retention_gap) if key in lost_exact else r.retention_gap
        lost_total += lost
        g["retention_lost"] += lost
        g["lag"] += lag or 0
        if reread.get(key) is not None:
            g["reread_estimate"] = (g["reread_estimate"] or 0) + reread[key]
        elif key in reread:  # a writing partition whose re-read is not estimated
            g["reread_unknown"] += 1
        if key in mism:
            g["mismatches"] += 1
        row.update(  # the row's own dict (a copy of the plan's row): one dict per partition, not two
            committed_after=got,
            lag=lag,
            reread_estimate=reread.get(key),
            lost_to_retention_exact=lost_exact.get(key),
            verified=key not in mism if r.writes and not dry_run else None,
        )
        partitions.append(row)
    for g, why in refused.items():
        per_group[g]["refused"] = why
    fates = group_fates(plan, refused, {m.group for m in mismatches}, dry_run)
    groups = [
        {"group": g, **v, "source_aliases": sorted(v["source_aliases"]), "fate": fates.get(g, "")}
        for g, v in sorted(per_group.items())
    ]
    counts = plan.counts()
    rr = [v for v in reread.values() if v is not None]
    totals = {
        "groups": len(groups),
        "groups_moved": 0 if dry_run else sum(1 for g in groups if g["fate"].startswith("moved")),
        "groups_skipped": sum(1 for g in groups if g["fate"].startswith("skipped")),
        "partitions": len(plan.rows),
        "committed": 0 if dry_run else sum(g["committed"] for g in groups),
        "planned_commits": counts[COMMIT] + counts[CLAMP],
        "skipped": counts[SKIP],
        "clamped": counts[CLAMP],
        "refused_groups": len(refused),
        "mismatches": len(mismatches),
        "records_lost_to_retention_upper_bound": sum(r.retention_gap for r in plan.rows) + lost_unclamped,
        "records_lost_to_retention": lost_total,
        # partitions resuming at the replica's first record whose loss could not be counted (never shown as 0)
        "partitions_lost_to_retention_unknown": lost_unknown,
        "records_reread_estimate": sum(rr) if rr else (0 if not reread else None),
        # writing partitions whose re-read is not estimated (never shown as 0: approval.reread_text)
        "partitions_reread_unknown": sum(1 for v in reread.values() if v is None),
        # every writing row's re-read counted exactly (else the estimate above is one, and this is proven from below)
        "records_reread_exact": all(e.get("exact") for e in estimates),
        "records_reread_at_least": sum(
            (e["reread"] if e.get("exact") else e.get("reread_at_least")) or 0 for e in estimates
        ),
        # what MM2's checkpoints alone would have re-read on the partitions whose exact position is known
        "records_reread_by_checkpoints": sum(by_checkpoint) if by_checkpoint else None,
        "partitions_exact": sum(1 for r in plan.rows if r.writes and is_exact(r.rule)),
        # every partition by the kind of answer it got: exact, floor, checkpoint, none (readiness rule 1)
        "partitions_by_answer": answer_counts(row_dicts),
        "lag": sum(g["lag"] for g in groups),
    }
    snapshot = snapshot or {}
    if snapshot.get("age_seconds") is not None:
        totals["snapshot_age_seconds"] = snapshot["age_seconds"]
    outcome = outcome or ("dry_run" if dry_run else "failed" if mismatches or refused else "succeeded")
    stale = stale_checkpoints(row_dicts, source_commits)
    warnings = list(warnings or []) + checkpoint_warnings(checkpoints_summary or {})
    never_checkpointed = {r.group for r in plan.rows if r.reason == GROUP_NEVER_CHECKPOINTED}
    never = [g["group"] for g in groups if g["group"] in never_checkpointed]  # one pass (was groups x rows)
    if never:
        warnings.append(
            f"{len(never)} selected group(s) commit on the source but MM2 never checkpointed them; they "
            "were NOT moved and will start without a commit on the target: " + listed(never)
        )
    no_cp = [r for r in plan.rows if r.reason == NO_CHECKPOINT]
    if no_cp:
        warnings.append(
            f"{len(no_cp)} partition(s) of moved groups have no checkpoint and get no commit on the target "
            "(consumers fall back to auto.offset.reset): "
            + listed((f"{r.group} {r.topic}[{r.partition}]" for r in no_cp), 10)
        )
    rewound = [r for r in plan.rows if r.reason == CHECKPOINT_AHEAD_OF_SOURCE]
    if rewound:
        warnings.append(
            f"{len(rewound)} partition(s) of groups rewound on the source after MM2's newest checkpoint "
            "were NOT moved (accept_groups_without_checkpoints): MM2's checkpoint would skip records the "
            "group has not read and no offset sync proves a floor; their consumers keep the target's commit "
            "or fall back to auto.offset.reset: "
            + listed((f"{r.group} {r.topic}[{r.partition}] (target commit {r.current_offset})" for r in rewound), 10)
        )
    if stale:
        warnings.append(
            f"{len(stale)} partition(s) have a checkpoint behind the group's last commit on the source "
            "(MM2 had not checkpointed the newest commit): "
            + listed(
                (
                    f"{x['group']} {x['topic']}[{x['partition']}] (checkpoint at {x['checkpoint_upstream']}, "
                    f"the source's commit at {x['source_committed']})"
                    for x in stale
                ),
                10,
            )
        )
    if (snapshot.get("age_seconds") or 0) > STALE_SNAPSHOT_S:
        warnings.append(
            f"the end-offset snapshot was {snapshot['age_seconds']:.0f} s old when the plan was built "
            f"(captured {snapshot.get('captured_at')}): checkpoints written since were not used"
        )
    return Report(
        dag_id=dag_id,
        run_id=run_id,
        outcome=outcome,
        dry_run=dry_run,
        params=params,
        snapshot=snapshot,
        totals=totals,
        checkpoints=checkpoints_summary or {},
        warnings=warnings,
        groups=groups,
        partitions=partitions,
        stale_checkpoints=stale,
        mismatches=[m.__dict__ for m in mismatches],
    )


def run_summary(dag_id: str, run_id: str, rep: dict | None, drill: dict | None, time: str) -> dict:
    """The few fields of a run the reports index and the drill trend show (``summary.json``, a few hundred bytes: the
    index never parses whole reports), from its report and/or drill report."""
    t = (rep or {}).get("totals") or {}
    dt = (drill or {}).get("totals") or {}
    kind = "drill" if drill is not None or "drill" in dag_id else "failover"
    outcome = "drill" if drill is not None else (rep or {}).get("outcome", "unknown")
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "kind": kind,
        "outcome": outcome,
        "time": (drill or {}).get("captured_at") or time,
        "groups": dt.get("groups_covered", t.get("groups")),
        "moved": t.get("groups_moved"),
        "partitions": t.get("partitions", dt.get("partitions")),
        "committed": t.get("committed"),
        "skipped": t.get("skipped"),
        "clamped": t.get("clamped", dt.get("partitions_clamped")),
        "lost": t.get("records_lost_to_retention", dt.get("records_lost_to_retention")),
        "mismatches": t.get("mismatches"),
        "reread": dt.get("records_reread_estimate", t.get("records_reread_estimate")),
        "reread_unknown": dt.get("partitions_reread_unknown", t.get("partitions_reread_unknown")) or 0,
        "findings": dt.get("findings"),
        "drill_totals": dt,
    }


def md_table(columns: Iterable[tuple[str, str]], rows: Iterable[Iterable[Any]]) -> list[str]:
    """Markdown table lines. ``columns``: (title, "l" or "r" alignment); a None cell renders empty and a ``|``
    inside a cell (a group name may hold one) is escaped so it cannot split the row."""
    columns = list(columns)

    def cell(v: Any) -> str:
        return "" if v is None else str(v).replace("|", "\\|").replace("\n", "\\n")

    return [
        "| " + " | ".join(t for t, _ in columns) + " |",
        "|" + "|".join("---:" if a == "r" else "---" for _, a in columns) + "|",
    ] + ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]


def state_lines(checkpoints_summary: dict) -> list[str]:
    """How the Spark job got the latest checkpoints, per alias: from a state version and a tail, or a full pass
    (and why)."""
    sp = checkpoints_summary.get("spark") or {}
    route = [f"computed by {sp['route']}" + (f" on {sp['remote']}" if sp.get("remote") else "")] if sp else []
    st = checkpoints_summary.get("state")
    if not st:
        return route + ["latest checkpoints by a full pass over the captured range (no latest-checkpoint state)"]
    out = route + [
        f"latest checkpoints of {alias}: {c['reason']}" for alias, c in sorted((st.get("aliases") or {}).items())
    ]
    lay = checkpoints_summary.get("output_layout") or {}
    if lay.get("layout") == "state+delta":
        out.append(
            f"answers written as state+delta: {lay['delta_answers']} answer(s) of the {lay['touched_keys']} "
            f"key(s) the tail touched, the others the state version's ({lay['base_files']})"
        )
    elif lay:
        out.append(f"answers written in full: {lay['why']}")
    return out


def outcome_note(report: dict) -> str:
    """What the outcome line adds: the approval's state while (or because) nothing was written, or that a dry run
    wrote nothing."""
    if report.get("approval") and report["outcome"] in APPROVAL_OUTCOMES:
        return approval.Decision.from_dict(report["approval"]).describe()
    return "dry run: nothing was written" if report["dry_run"] else ""


MD_PARTITION_ROWS = 10_000  # report.md's partition table: at most this many rows (all rows are in the Parquet file)


def worst_first(groups: Iterable[dict]) -> list[dict]:
    """The report's groups as on-call reads them: refused first, then those with partitions not as planned, then
    records lost to retention (most first), then by re-read (most first; a group whose re-read is not known before
    those that re-read nothing), then by name - never alphabetically alone, where at 10,000 groups the few that matter
    sit in the middle."""

    def key(g: dict):
        rr = g.get("reread_estimate")
        unknown = bool(g.get("reread_unknown")) or (rr is not None and _number(rr) is None)  # not a number: unknown
        return (
            not g.get("refused"),
            not g.get("mismatches"),
            -(_number(g.get("retention_lost")) or 0),
            -(_number(rr) or 0),
            not unknown,
            str(g.get("group")),
        )

    return sorted(groups, key=key)


def _number(v) -> int | float | None:
    """``v`` when it is a number (a report.json read back may hold anything: edited by hand, another version's), else
    None: the orders above rank it as unknown instead of failing the page that sorts it."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def worst_partitions_first(partitions: Iterable[dict]) -> list[dict]:
    """The report's partitions in the same spirit: not as planned after apply first, then lost to retention (most
    first), skipped, clamped, then by re-read (most first), then group, topic, partition."""

    def key(p: dict):
        lost = _number(p.get("lost_to_retention_exact")) or _number(p.get("retention_gap")) or 0
        return (
            p.get("verified") is not False,
            -lost,
            p.get("action") != SKIP,
            p.get("action") != CLAMP,
            -(_number(p.get("reread_estimate")) or 0),
            str(p.get("group")),
            str(p.get("topic")),
            str(p.get("partition") or 0).rjust(12, "0"),  # numbers in their order, anything else still a key
        )

    return sorted(partitions, key=key)


def markdown_partitions(partitions: list[dict], limit: int = MD_PARTITION_ROWS) -> tuple[list[dict], int]:
    """The rows report.md lists, in the report's order, and how many it leaves out: every row that is not a plain
    commit read back as planned (a skip, a clamp, a reason, a mismatch, records lost), then plain rows up to
    ``limit`` in all. At 10k groups x 10 partitions the whole table was 11.7 MB of Markdown, rendered twice a run."""

    def notable(p: dict) -> bool:
        return (
            p.get("action") != COMMIT
            or bool(p.get("reason"))
            or p.get("verified") is False
            or bool(p.get("retention_gap"))
            or bool(p.get("lost_to_retention_exact"))
        )

    if len(partitions) <= limit:
        return list(partitions), 0
    room = max(0, limit - sum(1 for p in partitions if notable(p)))
    shown = []
    for p in partitions:
        if notable(p):
            shown.append(p)
        elif room > 0:
            shown.append(p)
            room -= 1
    return shown, len(partitions) - len(shown)


def outcome_line(report: dict) -> str:
    """``report.md``'s outcome line (its third line)."""
    return f"**Outcome: {report['outcome'].upper()}**" + (f" ({note})" if (note := outcome_note(report)) else "")


def restate_outcome(markdown: str, report: Report | dict) -> str:
    """``markdown`` (what :func:`render_markdown` wrote for this report) with the outcome line of ``report``: the
    approval's decision changes that line only, and the rows of a report at 10k groups x 10 partitions take ~2 s
    to load and render again. ValueError when ``markdown`` is not such a report."""
    report = report.as_dict() if isinstance(report, Report) else report
    lines = markdown.split("\n", 3)
    if len(lines) < 4 or not lines[0].startswith("# mm2-failover report: ") or not lines[2].startswith("**Outcome: "):
        raise ValueError("not a report.md written by render_markdown")
    return "\n".join([lines[0], lines[1], outcome_line(report), lines[3]])


def render_markdown(report: Report | dict) -> str:
    """``report.md`` from a report (or its published form)."""
    report = report.view() if isinstance(report, Report) else report
    t = report["totals"]
    snap = report.get("snapshot") or {}
    lines = [
        f"# mm2-failover report: {report['dag_id']} / {report['run_id']}",
        "",
        outcome_line(report),
        "",
    ]
    if snap.get("captured_at"):
        lines += [
            f"End offsets captured at {snap['captured_at']}"
            + (
                f" ({snap['age_seconds']:.0f} s before the plan was built)"
                if snap.get("age_seconds") is not None
                else ""
            )
            + ".",
            "",
        ]
    if t.get("records_reread_by_checkpoints") is not None:
        lines += [
            f"Exact translation: {t.get('partitions_exact', 0)} partition(s) resume at the exact record their "
            f"offset syncs prove (estimated re-read {approval.reread_text(t)}; MM2's checkpoints alone: "
            f"{t['records_reread_by_checkpoints']} offsets further back - an offset distance: transaction "
            "markers and aborted copies in it are not records a read_committed consumer reads).",
            "",
        ]
    lines += [
        *md_table(
            [
                (c, "r")
                for c in (
                    "groups",
                    "moved",
                    "skipped",
                    "partitions",
                    "committed",
                    "skipped partitions",
                    "clamped",
                    "refused groups",
                    "mismatches",
                    "lost to retention",
                    "est. re-read",
                    "lag",
                )
            ],
            [
                [
                    t["groups"],
                    t["groups_moved"],
                    t.get("groups_skipped"),
                    t["partitions"],
                    t["committed"],
                    t["skipped"],
                    t["clamped"],
                    t["refused_groups"],
                    t["mismatches"],
                    approval.lost_text(t),
                    approval.reread_text(t),
                    t["lag"],
                ]
            ],
        ),
        "",
        "Lost to retention: records the group had not read whose replicas are gone; where the source offset of the "
        "replica's first record could not be found, it is at most log start - checkpoint (the checkpoint is "
        "conservative).",
        "",
    ]
    for w in report.get("warnings", []):
        lines.append(f"> WARNING: {w}")
    cs = report.get("checkpoints") or {}
    if cs:
        lines += [
            "",
            f"Checkpoints read: {cs.get('records_read', '?')} records, {cs.get('checkpoints', '?')} latest, "
            f"{cs.get('tombstones', 0)} tombstones, {cs.get('quarantined', 0)} quarantined "
            f"{cs.get('quarantined_by_reason') or ''}".rstrip(),
            "",
        ]
        lines += [f"- {line}" for line in state_lines(cs)] + ([""] if state_lines(cs) else [])
    lines += ["## Groups", ""]
    lines += md_table(
        [
            ("group", "l"),
            ("aliases", "l"),
            ("fate", "l"),
            ("partitions", "r"),
            ("committed", "r"),
            ("skipped", "r"),
            ("clamped", "r"),
            ("lost to retention", "r"),
            ("est. re-read", "r"),
            ("lag", "r"),
        ],
        (
            [
                g["group"],
                ",".join(g.get("source_aliases") or []),
                g.get("fate"),
                g["partitions"],
                g["committed"],
                g["skipped"],
                g["clamped"],
                g["retention_lost"],
                approval.group_reread_text(g),
                g["lag"],
            ]
            for g in worst_first(report["groups"])
        ),
    )
    shown, left_out = markdown_partitions(worst_partitions_first(report["partitions"]))
    lines += ["", "## Partitions", ""]
    lines += md_table(
        [
            ("group", "l"),
            ("topic", "l"),
            ("partition", "r"),
            ("upstream", "r"),
            ("checkpoint", "r"),
            ("exact", "r"),
            ("rule", "l"),
            ("before", "r"),
            ("planned", "r"),
            ("after", "r"),
            ("action", "l"),
            ("reason", "l"),
            ("lag", "r"),
        ],
        (
            [
                p["group"],
                p["topic"],
                p["partition"],
                p["upstream_offset"],
                p["downstream_offset"],
                p.get("exact_offset"),
                p.get("rule"),
                p["current_offset"],
                p["planned_offset"],
                p["committed_after"],
                p["action"],
                p["reason"],
                p["lag"],
            ]
            for p in shown
        ),
    )
    if left_out:
        lines += [
            "",
            f"... and {left_out} more partition(s) committed and read back as planned, not listed here: every "
            f"row is in report_partitions.parquet and on the run's page, every planned offset in plan.csv.",
        ]
    if report["mismatches"]:
        lines += ["", "## Mismatches (committed != planned)", ""]
        for m in report["mismatches"]:
            lines.append(
                f"- {m['group']} {m['topic']}[{m['partition']}]: planned {m['planned']}, committed {m['committed']}"
            )
    return "\n".join(lines) + "\n"
