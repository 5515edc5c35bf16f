"""Approved before it writes (issue 33): the rules of a failover run's approval. Pure functions over plain values;
the failover DAG's ``approve_plan`` task asks (:class:`mm2_failover.operators.plan_approval.PlanApprovalOperator`,
Airflow's own human-in-the-loop ``ApprovalOperator``), :mod:`mm2_failover.stages.approve_plan` reads and writes the
decision, and ``apply_group_offsets`` checks it before its first write.

1. **Who must approve** (:func:`needed`) - a failover run that writes waits for a human's decision, unless its
   ``require_approval`` is false: an automation (or a drill) that has decided already opts out, documented in
   docs/runbook.md. A run in disaster mode that nobody confirmed (``source_reachable=detect`` found no answer: reachability
   rule 3a) always asks - entering disaster mode is never automatic. A dry run writes nothing and asks nothing.
2. **What is approved** (:func:`plan_hash`) - the plan exactly as it was written to ``plan.json``: the snapshot and
   parameters it was built from, and its rows by the SHA-256 of ``plan_rows.parquet`` (which the plan's reader
   verifies). The SHA-256 of ``plan.json``'s bytes; the request shows it and the decision records it.
3. **What the approver sees** (:func:`request_text`) - the plan's summary: groups and partitions, the rules that
   gave the offsets, the re-read and lost estimates, disaster mode or not, every warning, the hash, and a link to
   the plan's page.
4. **The decision** (:func:`decide`) - ``Approve`` -> approved, ``Reject`` -> rejected, no answer before the
   deadline -> timed out. Only approved (or not required) lets apply write; the others leave the target untouched
   and say so in the report.
5. **Apply writes only the approved plan** (:func:`check`) - before its first write, apply refuses unless the
   decision lets it write and names the hash of ``plan.json`` as it is now (a plan rebuilt or edited after the
   approval is a different plan: it needs its own).
6. **Four eyes, where asked** (:func:`self_approved`) - with ``approver_not_triggerer``, an Approve by the user who
   triggered the run is a rejection (nothing is written; the decision says why); a Reject by anyone stands.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

from mm2_failover.rules.translate import RULE_TEXT
from mm2_failover.rules.words import duration, listed

APPROVE, REJECT = "Approve", "Reject"  # Airflow's ApprovalOperator's two options

AWAITING = "awaiting"
APPROVED = "approved"
REJECTED = "rejected"
TIMED_OUT = "timed_out"
NOT_REQUIRED = "not_required"
STATUSES = (AWAITING, APPROVED, REJECTED, TIMED_OUT, NOT_REQUIRED)
LETS_APPLY = (APPROVED, NOT_REQUIRED)

#: the report's outcome from the plan's approval until verify writes the final one (after a decision that writes
#: nothing, for good)
OUTCOMES = {AWAITING: "awaiting_approval", APPROVED: "approved", REJECTED: "rejected", TIMED_OUT: "approval_timed_out"}


def lost_text(t: dict, num=str) -> str:
    """Records lost to retention as what is known: a count, its upper bound where only that is known, and the
    partitions where nothing is known (resuming at the replica's first record, its source record not found)."""
    lost = t.get("records_lost_to_retention")
    bound = t.get("records_lost_to_retention_upper_bound", lost)
    text = num(lost) if lost == bound else f"{num(lost)} (at most {num(bound)})"
    unknown = t.get("partitions_lost_to_retention_unknown") or 0
    return text + (f" + unknown on {unknown} partition(s)" if unknown else "")


def group_reread_text(g: dict, num=str) -> str:
    """A group's re-read: the sum of its partitions' figures, and how many of them are unknown (never a partial sum
    said as the whole)."""
    est, unknown = g.get("reread_estimate"), g.get("reread_unknown") or 0
    if not unknown:
        return "" if est is None else num(est)
    return f"unknown on {unknown}" if est is None else f"{num(est)} + unknown on {unknown}"


def reread_text(t: dict, num=str) -> str:
    """The re-read figure as what it is: a count, or an estimate with what is proven of it. The proven part is an
    offset distance from the floor the offset syncs prove (issue 50 item 4): with transaction markers or aborted
    copies on the replica it counts offsets no ``read_committed`` consumer reads, so it is said in offsets, never
    as "at least N records". The report, report.md and the approval request all say it this way."""
    est = t.get("records_reread_estimate")
    unknown = t.get("partitions_reread_unknown") or 0
    floor = t.get("records_reread_at_least") or 0
    if est is None:  # every partition unknown (or a report written before the count existed)
        return (f"unknown on {unknown} partition(s)" if unknown else "unknown") + (
            f" ({num(floor)} offsets from the proven floor)" if floor else ""
        )
    more = f" + unknown on {unknown} partition(s)" if unknown else ""
    if t.get("records_reread_exact", True) or est is None:
        return num(est) + more
    return f"{num(est)}{more} (estimate; {num(t.get('records_reread_at_least', 0))} offsets from the proven floor)"


class ApprovalRefused(RuntimeError):
    """Apply may not write: no decision that lets it, or one for another plan (rule 5)."""


@dataclass(frozen=True)
class Decision:
    """``approval.json``: what was asked and what was decided, for which plan."""

    status: str
    plan_hash: str
    asked_at: str | None = None
    decided_at: str | None = None
    decided_by: str | None = None
    timeout_seconds: int | None = None
    note: str | None = None  # why the decision is not what was chosen (rule 6)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"approval status {self.status!r} is not one of {', '.join(STATUSES)}")

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Decision":
        return cls(
            d["status"],
            d["plan_hash"],
            d.get("asked_at"),
            d.get("decided_at"),
            d.get("decided_by"),
            d.get("timeout_seconds"),
            d.get("note"),
        )

    def describe(self) -> str:
        who = f" by {self.decided_by}" if self.decided_by else ""
        when = f" at {self.decided_at}" if self.decided_at else ""
        return {
            AWAITING: f"waiting for approval since {self.asked_at}",
            APPROVED: f"approved{who}{when}",
            REJECTED: f"REJECTED{who}{when}{' (' + self.note + ')' if self.note else ''}: nothing was written "
            "to the target",
            TIMED_OUT: f"NOT approved within {self.timeout_seconds} s (asked at {self.asked_at}): nothing was "
            "written to the target",
            NOT_REQUIRED: "no approval asked (require_approval=false)",
        }[self.status] + f" - plan {self.plan_hash}"


def needed(require_approval: bool, dry_run: bool, unconfirmed_disaster: list[str] | tuple = ()) -> bool:
    """Rule 1; ``unconfirmed_disaster``: the source aliases in disaster mode that nobody declared lost."""
    return not dry_run and (bool(require_approval) or bool(unconfirmed_disaster))


def plan_hash(plan_bytes: bytes) -> str:
    """Rule 2: what names a plan in a request and a decision."""
    return "sha256:" + hashlib.sha256(plan_bytes).hexdigest()


def decide(
    chosen: list[str] | None,
    *,
    timed_out: bool,
    plan_hash: str,
    asked_at: str | None,
    decided_at: str,
    decided_by: str | None,
    timeout_seconds: int | None = None,
) -> Decision:
    """Rule 4, from what Airflow's approval task received (its chosen options, or its timeout)."""
    if timed_out:
        status = TIMED_OUT
    elif list(chosen or []) == [APPROVE]:
        status = APPROVED
    elif list(chosen or []) == [REJECT]:
        status = REJECTED
    else:
        raise ValueError(f"an approval is exactly one of {APPROVE!r} or {REJECT!r}, not {chosen!r}")
    return Decision(status, plan_hash, asked_at, decided_at, None if timed_out else decided_by, timeout_seconds)


def self_approved(
    decision: Decision, triggered_by: str | None, responder: tuple[str | None, ...], approver_not_triggerer: bool
) -> Decision:
    """Rule 6: an approval by the user who triggered the run (``responder``: the answering user's id and name as
    Airflow gives them), where ``approver_not_triggerer`` asks for someone else, becomes a rejection saying why. A
    run nobody triggered by name (a schedule, an API call without a user) has no one to exclude."""
    if (
        not approver_not_triggerer
        or decision.status != APPROVED
        or not triggered_by
        or triggered_by not in {r for r in responder if r}
    ):
        return decision
    return Decision(
        REJECTED,
        decision.plan_hash,
        decision.asked_at,
        decision.decided_at,
        decision.decided_by,
        decision.timeout_seconds,
        f"approved by {triggered_by}, who triggered the run: "
        "approver_not_triggerer asks for someone else; trigger a new run for another approver",
    )


def check(decision: Decision | None, current_hash: str) -> Decision:
    """Rule 5: the decision that lets apply write this plan, or :class:`ApprovalRefused` saying why not."""
    if decision is None:
        raise ApprovalRefused(
            "this run's plan was never approved (no approval.json in its run folder): nothing was written. The "
            "approve_plan task asks for it; clear that task to ask again, or trigger a run with "
            "require_approval=false if an automation has decided already."
        )
    if decision.status not in LETS_APPLY:
        raise ApprovalRefused(
            f"the plan may not be applied: {decision.describe()}. Nothing was written; trigger a new run to plan again."
        )
    if decision.plan_hash != current_hash:
        raise ApprovalRefused(
            f"the plan in the run folder is not the one that was approved (approved {decision.plan_hash}, now "
            f"{current_hash}): nothing was written. A plan changed after its approval needs its own: clear "
            "approve_plan to ask again."
        )
    return decision


def _num(v) -> str:
    return "?" if v is None else f"{v:,}" if isinstance(v, int) else str(v)


#: what a warning's consequence is, worst first (the first pattern a warning matches ranks it; none: last)
WARNING_RANKS = (
    ("DISASTER MODE", "never replicated", "lost", "gone", "no commit", "never checkpointed", "NOT rewritten", "refuse"),
    ("re-read", "behind", "stale", "not proven", "superseded", "floor", "old when the plan was built"),
)


def warning_rank(w: str) -> int:
    """Rule 3: warnings ordered by consequence - records lost or groups left without a commit, then re-reads, then
    the rest (a setting not given, notes)."""
    low = w.lower()
    return next((i for i, pats in enumerate(WARNING_RANKS) if any(p.lower() in low for p in pats)), len(WARNING_RANKS))


def worst_groups(groups: list[dict], n: int) -> list[dict]:
    """Rule 3: the groups to name when there are more than ``n``: the most records lost to retention, then those
    whose re-read is unknown on some partition (not counted is not 0), then the most to re-read, then by name."""
    return sorted(
        groups,
        key=lambda g: (
            -(g.get("retention_lost") or 0),
            -(g.get("reread_unknown") or 0),
            -(g.get("reread_estimate") or 0),
            g.get("group") or "",
        ),
    )[:n]


def trigger_line(since_trigger_seconds: float | None, triggered_by: str | None, approver_not_triggerer: bool) -> str:
    """Rule 3: how long the incident has run, by whom it was triggered, and whether that user may approve."""
    when = "" if since_trigger_seconds is None else f" {duration(since_trigger_seconds)} ago"
    who = f" by {triggered_by}" if triggered_by else ""
    rule = (
        f" Approval by {triggered_by} is refused (approver_not_triggerer): someone else decides."
        if approver_not_triggerer and triggered_by
        else ""
    )
    return f"**Triggered**{when}{who}.{rule}"


def moved_line(moved: dict) -> str:
    """Rule 3: the live diff's counts when the request was made - the target's commits now against those the plan
    read (``moved``: partitions and groups that changed, and how many were read)."""
    if moved.get("error"):
        return f"**Since the plan was built:** the target's commits could not be read now ({moved['error']})."
    if not moved.get("partitions"):
        return (
            f"**Since the plan was built:** no commit on the target changed ({_num(moved.get('read'))} "
            "partition(s) read now)."
        )
    return (
        f"**Since the plan was built:** {_num(moved['partitions'])} partition(s) of {_num(moved.get('groups'))} "
        "group(s) were committed on the target by someone else (their consumers read there already): apply "
        "never overwrites them (apply rule 5) - see the plan's live diff."
    )


def request_text(
    *,
    run_id: str,
    totals: dict,
    rules: dict[str, int],
    warnings: list[str],
    disaster_aliases: list[str],
    plan_hash: str,
    page_url: str,
    max_warnings: int = 20,
    unconfirmed: list[str] | tuple = (),
    groups: list[dict] | tuple = (),
    max_groups: int = 20,
    since_trigger_seconds: float | None = None,
    triggered_by: str | None = None,
    moved_since: dict | None = None,
    approver_not_triggerer: bool = False,
) -> tuple[str, str]:
    """Rule 3: the subject and the Markdown body of the approval request. ``unconfirmed``: the aliases in disaster
    mode only because their source did not answer (nobody said it is lost); ``groups``: the report's groups (named
    all up to ``max_groups``, else the worst of them). The subject is short (Airflow's Required Actions list cuts
    it): the counts and the mode; the run is in the body."""
    if unconfirmed:
        mode = (
            f"DISASTER MODE NOT CONFIRMED: source {', '.join(unconfirmed)} did not answer (source_reachable="
            "detect) - approve only if it is really lost; a wrong address looks the same"
        )
    elif disaster_aliases:
        mode = f"DISASTER MODE (source {', '.join(disaster_aliases)} lost: no source-side checks)"
    else:
        mode = "source reachable, drained"
    short = "DISASTER MODE NOT CONFIRMED" if unconfirmed else "DISASTER MODE" if disaster_aliases else ""
    moves = [(g.get("partitions") or 0) > (g.get("skipped") or 0) for g in groups]
    moving = [g for g, m in zip(groups, moves) if m]
    still = [g for g, m in zip(groups, moves) if not m]  # one pass each: at 10k groups `g not in moving` took ~4 s
    # the groups that move (a group the plan skips whole moves nothing: it is counted apart in the body)
    n_moving = len(moving) if groups else totals.get("groups")
    subject = f"Move {_num(n_moving)} group(s), {_num(totals.get('planned_commits'))} commit(s)?" + (
        f" {short}" if short else ""
    )
    reread = reread_text(totals, _num)
    lines = [
        f"**Run** `{run_id}` - {mode}.",
        "",
        *(
            [trigger_line(since_trigger_seconds, triggered_by, approver_not_triggerer), ""]
            if since_trigger_seconds is not None or triggered_by
            else []
        ),
        *([moved_line(moved_since), ""] if moved_since is not None else []),
        "| groups | partitions | commits | skipped | clamped | re-read | lost to retention |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {_num(totals.get('groups'))} | {_num(totals.get('partitions'))} | {_num(totals.get('planned_commits'))} "
        f"| {_num(totals.get('skipped'))} | {_num(totals.get('clamped'))} | {reread} "
        f"| {lost_text(totals, _num)} |",
        "",
    ]
    if moving:
        named = moving if len(moving) <= max_groups else worst_groups(moving, max_groups)
        head = (
            f"**Groups ({len(moving)}):**"
            if len(named) == len(moving)
            else f"**Groups ({len(moving)}), the {len(named)} with the most lost to retention or to re-read (or "
            f"re-read unknown):**"
        )
        lines += [head + " " + ", ".join(f"`{g['group']}`" for g in named), ""]
    if still:
        lines += [
            f"**Not moved ({len(still)}):** "
            + listed((f"`{g['group']}` ({g.get('fate') or 'skipped'})" for g in still), max_groups),
            "",
        ]
    lines.append("**Where each group resumes:**" if rules else "**Where each group resumes:** nothing to write")
    lines += [
        f"- {n:,} partition(s): {RULE_TEXT.get(r, r + ' (safe at best: not exact)')}"
        for r, n in sorted(rules.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    lines.append("")
    if warnings:
        lines.append(f"**Warnings ({len(warnings)}), worst first:**")
        lines += [f"- {w}" for w in sorted(warnings, key=warning_rank)[:max_warnings]]
        if len(warnings) > max_warnings:
            lines.append(f"- ... and {len(warnings) - max_warnings} more on the plan's page")
    else:
        lines.append("**Warnings:** none.")
    lines += [
        "",
        f"Plan `{plan_hash}`: the full plan, per group and partition, on [its page]({page_url}) "
        "(plan.json, plan_rows.parquet, plan.csv). **Approve** applies exactly this plan; **Reject** writes "
        "nothing.",
    ]
    return subject, "\n".join(lines)
