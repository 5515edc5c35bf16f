"""Readiness: what a failover would do *now*, for every selected group and partition, computed read-only every
interval by the ``mm2_failover_readiness`` DAG (the I/O: :mod:`mm2_failover.stages.assess_readiness`). Pure functions over
what that run read; every rule lives here once, tested rule by rule in ``tests/unit/test_readiness.py``.

1. **The answer** of a (group, replica partition) is the rule the plan a failover would build now uses, in one of
   four kinds: ``exact`` (a rule of :data:`mm2_failover.rules.translate.EXACT_RULES`, the one classification the report
   uses too: the rule names which), ``floor`` (safe, not exact: the offset-sync floor, or the first copy of a record
   MM2 copied again later), ``checkpoint`` (MM2's checkpoint as it is, or clamped into the log), ``none``
   (a failover would not move it: the plan row's reason). A group is *exact* when every partition it would move is.
2. **Re-read** is the plan's own estimate (:func:`mm2_failover.rules.report.estimate_reread`): records the group would
   read again on the target; unknown where the plan cannot say.
3. **Not yet replicated** (RPO exposure) per source partition: the records MM2 has not copied yet - the source end
   minus MM2's progress (its last replicated offset + 1), or, when MM2's progress is unknown, minus the replica's
   end (aligned offsets); 0 when the drain check found nothing after MM2's progress but markers. In seconds: the age
   of the oldest record not yet replicated (0 when there is none; unknown when it could not be read, or when the
   source is lost). A group's exposure is the worst of the partitions it consumes.
4. **Ages**: the archive's (since ``mm2_sync_archive`` last succeeded for the alias: a failover's own capture, and
   this check's, append to the archive too, so its newest append says nothing about the archive DAG), with the
   archive DAG's runs that failed since (recorded by its failure notifier: a run whose state refresh failed after
   its archive task succeeded is a failed run), and each group's newest checkpoint's, at compute time.
5. **Degrading** (what is told, against the previous interval): a group that was exact and no longer is (not while
   records of it are not replicated yet: that is its exposure; told once it has caught up and is still not), exposure
   above ``rpo_seconds``, an audit finding that is new (by its alias and rule: its numbers may change; never a
   setting not given), the archive DAG failing (a failed run since its last success), the archive older than
   ``archive_stale_intervals`` intervals. The first interval tells what is wrong already, except an archive that
   has never succeeded (nor failed) and its audit finding: the archive DAG is unpaused with this one and may not have
   ended its first run; they are told once that has lasted ``archive_stale_intervals`` intervals, as a stale archive
   is (the soak found the false alert).
   Each is said once per change: a group that stays not exact, or a finding that stays, is not told again; the
   exposure is told again only once it had come back under the objective.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Iterable

from mm2_failover.rules.translate import is_exact
from mm2_failover.rules.values import age_seconds, to_ms
from mm2_failover.rules.words import listed

EXACT, FLOOR, CHECKPOINT, NONE = "exact", "floor", "checkpoint", "none"
KINDS = (EXACT, FLOOR, CHECKPOINT, NONE)
GROUP_COLUMNS = (
    "group",
    "answer",
    "partitions",
    *KINDS,
    "rules",
    "reread",
    "reread_unknown",
    "not_replicated",
    "exposure_seconds",
    "exposure_unknown",
    "checkpoint_age_seconds",
    "exact_before_lag",
)
PARTITION_COLUMNS = (
    "group",
    "topic",
    "partition",
    "kind",
    "rule",
    "reason",
    "planned",
    "reread",
    "not_replicated",
    "exposure_seconds",
    "checkpoint_age_seconds",
)


def kind_of(row: dict) -> str:
    """Rule 1: the kind of answer a plan row gives."""
    if row.get("planned_offset") is None or row.get("action") == "skip":
        return NONE
    rule = row.get("rule") or CHECKPOINT
    if rule == CHECKPOINT:
        return CHECKPOINT
    return EXACT if is_exact(rule) else FLOOR


def answer_counts(rows: Iterable[dict]) -> dict[str, int]:
    """Rule 1: plan rows by kind of answer, every kind present (a run's report: ``partitions_by_answer``)."""
    out = dict.fromkeys(KINDS, 0)
    for r in rows:
        out[kind_of(r)] += 1
    return out


def not_replicated(row: dict) -> int | None:
    """Rule 3: records of one source partition MM2 has not copied yet, from one drain observation's row."""
    se, rep, re_ = row.get("source_end"), row.get("replicated"), row.get("replica_end")
    if se is None:
        return None  # the source is lost: what it holds beyond the replica is not known
    if row.get("state", "").startswith("drained"):
        return 0
    if rep is not None:
        return max(0, se - rep - 1)
    return None if re_ is None else max(0, se - re_)


def exposure_seconds(records: int | None, oldest_ms: int | None, now_ms: int) -> float | None:
    """Rule 3: the age of the oldest record not yet replicated."""
    if records is None:
        return None
    if records == 0:
        return 0.0
    return None if oldest_ms is None else round(max(0, now_ms - oldest_ms) / 1000, 1)


def _worst(a, b):
    return b if a is None else a if b is None else max(a, b)


@dataclass
class Readiness:
    """One interval's answer (``readiness.json``): a summary, one row per group, one per (group, partition)."""

    computed_at: str
    run_id: str
    rpo_seconds: int
    summary: dict
    groups: list[dict]
    partitions: list[dict]
    findings: list[dict] = field(default_factory=list)  # {key, text}: the audit's warnings, the plan's refusal
    archive: dict = field(default_factory=dict)  # alias -> {updated_at, age_seconds}: mm2_sync_archive's last success

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Readiness":
        return cls(
            d["computed_at"],
            d["run_id"],
            int(d["rpo_seconds"]),
            dict(d["summary"]),
            list(d["groups"]),
            list(d["partitions"]),
            list(d.get("findings") or []),
            dict(d.get("archive") or {}),
        )


def assess(
    *,
    run_id: str,
    now_ms: int,
    rpo_seconds: int,
    plan_rows: Iterable[dict],
    reread: Iterable[dict],
    drain_rows: Iterable[dict],
    oldest_unreplicated_ms: dict[tuple[str, int], int],
    checkpoint_ms: dict[tuple[str, str, int], int],
    archive_updated: dict[str, str | None],
    findings: Iterable[dict],
    archive_failures: Iterable[dict] = (),
    drain_observed_ms: int | None = None,
    positions_read: dict[str, str | None] | None = None,
) -> Readiness:
    """Rules 1-4 over one interval's reads, in one pass over the rows. ``drain_rows``: the drain observation's rows
    (replica topic, partition, ...); ``oldest_unreplicated_ms``: (replica topic, partition) -> the timestamp of the
    oldest record not yet replicated, where read; ``checkpoint_ms``: (group, replica topic, partition) -> its newest
    checkpoint's record timestamp; ``drain_observed_ms``: when the drain observation was made - the exposure is the
    oldest record's age then (an interval assessed minutes later, after retries, must not age records MM2 copied
    a second after the observation); None: ``now_ms``. ``positions_read``: per alias whose source the archive reads,
    when its newest reading of the groups' source commits ended (None: none kept; plan rule 1a)."""
    rr = {(e["group"], e["topic"], int(e["partition"])): e.get("reread") for e in reread}
    exposure: dict[tuple[str, int], tuple[int | None, float | None]] = {}
    for d in drain_rows:
        n = not_replicated(d)
        key = (d.get("replica_topic"), int(d["partition"]))
        exposure[key] = (
            n,
            exposure_seconds(
                n, oldest_unreplicated_ms.get(key), now_ms if drain_observed_ms is None else drain_observed_ms
            ),
        )
    parts, groups = [], {}
    for r in plan_rows:
        key = (r["group"], r["topic"], int(r["partition"]))
        kind = kind_of(r)
        n, secs = exposure.get(key[1:], (None, None))
        cp_age = age_seconds(checkpoint_ms.get(key), now_ms)
        reread_n = rr.get(key)
        parts.append(
            {
                "group": key[0],
                "topic": key[1],
                "partition": key[2],
                "kind": kind,
                "rule": r.get("rule") if kind != NONE else None,
                "reason": r.get("reason") or "",
                "planned": r.get("planned_offset"),
                "reread": reread_n,
                "not_replicated": n,
                "exposure_seconds": secs,
                "checkpoint_age_seconds": cp_age,
            }
        )
        g = groups.setdefault(
            key[0],
            {
                "group": key[0],
                "partitions": 0,
                **{k: 0 for k in KINDS},
                "reread": 0,
                "reread_unknown": 0,
                "not_replicated": 0,
                "exposure_seconds": None,
                "exposure_unknown": 0,
                "checkpoint_age_seconds": None,
                "rules": {},
                "exact_before_lag": False,
            },
        )
        g["partitions"] += 1
        g[kind] += 1
        if kind != NONE:
            g["rules"][r.get("rule") or CHECKPOINT] = g["rules"].get(r.get("rule") or CHECKPOINT, 0) + 1
        if reread_n is None:
            g["reread_unknown"] += kind != NONE
        else:
            g["reread"] += reread_n
        if n is None:
            g["exposure_unknown"] += 1
        else:
            g["not_replicated"] += n
        g["exposure_seconds"] = _worst(g["exposure_seconds"], secs)
        g["checkpoint_age_seconds"] = _worst(g["checkpoint_age_seconds"], cp_age)
    for g in groups.values():
        g["answer"] = group_answer(g)
    rows = [groups[k] for k in sorted(groups)]
    archive = {a: archive_health(u, archive_failures, now_ms) for a, u in sorted(archive_updated.items())}
    for a, read_at in (positions_read or {}).items():
        if a in archive:
            archive[a].update(positions_read_at=read_at, positions_age_seconds=age_seconds(read_at, now_ms))
    findings = list(findings)
    computed = datetime.fromtimestamp(now_ms / 1000, timezone.utc).isoformat(timespec="seconds")
    return Readiness(
        computed,
        run_id,
        rpo_seconds,
        summarize(rows, parts, archive, findings, rpo_seconds),
        rows,
        parts,
        findings,
        archive,
    )


def archive_health(updated_at: str | None, failures: Iterable[dict], now_ms: int) -> dict:
    """Rule 4: the archive of one alias - when its archive last succeeded, how old that is, and the archive DAG's
    runs that failed since (a run whose state refresh failed after the archive task succeeded is a failed run)."""
    since = to_ms(updated_at)
    failed = sorted({f["run_id"] for f in failures if since is None or (to_ms(f.get("at")) or 0) > since})
    last = max(failures, key=lambda f: to_ms(f.get("at")) or 0, default=None) if failed else None
    return {
        "updated_at": updated_at,
        "age_seconds": age_seconds(updated_at, now_ms),
        "failed_runs_since": len(failed),
        "last_failure": None if last is None else f"{last.get('task_id')}: {last.get('reason', '')[:200]}",
    }


def group_answer(g: dict) -> str:
    """Rule 1, for a group: ``exact`` when every partition it would move is exact, else the weakest kind it uses
    (``none`` when it would move nothing)."""
    moved = g["partitions"] - g[NONE]
    if not moved:
        return NONE
    for kind in (CHECKPOINT, FLOOR):
        if g[kind]:
            return kind
    return EXACT


def summarize(groups: list[dict], parts: list[dict], archive: dict, findings: list[str], rpo_seconds: int) -> dict:
    secs = [g["exposure_seconds"] for g in groups if g["exposure_seconds"] is not None]
    ages = [a["age_seconds"] for a in archive.values() if a["age_seconds"] is not None]
    cp_ages = [g["checkpoint_age_seconds"] for g in groups if g["checkpoint_age_seconds"] is not None]
    return {
        "groups": len(groups),
        "partitions": len(parts),
        **{f"groups_{k}": sum(1 for g in groups if g["answer"] == k) for k in KINDS},
        "groups_not_exact": sum(1 for g in groups if g["answer"] != EXACT),
        **{f"partitions_{k}": sum(1 for p in parts if p["kind"] == k) for k in KINDS},
        "reread_records": sum(g["reread"] for g in groups),
        "partitions_reread_unknown": sum(g["reread_unknown"] for g in groups),  # not in reread_records: unknown
        "not_replicated_records": sum({(p["topic"], p["partition"]): p["not_replicated"] or 0 for p in parts}.values()),
        "worst_exposure_seconds": max(secs) if secs else None,
        "groups_over_rpo": sum(1 for s in secs if s > rpo_seconds),
        "groups_exposure_unknown": sum(1 for g in groups if g["exposure_unknown"]),
        "archive_age_seconds": max(ages) if ages else None,
        "checkpoint_age_max_seconds": max(cp_ages) if cp_ages else None,
        "findings": len(findings),
    }


# ------------------------------------------------------------------------------------------ rule 5: degrading


@dataclass(frozen=True)
class Degradation:
    what: str  # fell_back | over_rpo | new_finding | archive_failing | archive_stale | positions_stale
    text: str


def degradations(
    prev: Readiness | None, now: Readiness, *, interval_seconds: int, archive_stale_intervals: int
) -> list[Degradation]:
    """Rule 5: what got worse since the previous interval (``prev``; None: the first interval, which tells what is
    wrong already - but for the archive's absence, whose intervals waited are marked ``deferred`` on ``now``: call it
    before ``now`` is saved)."""
    out: list[Degradation] = []
    # a group not exact while records of it are not replicated yet has not fallen back: nothing can prove where it
    # resumes before its records are copied, and a failover waits for them (its exposure is told, by rpo_seconds);
    # it carries "was exact" to the interval where it has caught up (``exact_before_lag``)
    was_exact = (
        {g["group"] for g in prev.groups if g["answer"] == EXACT or g.get("exact_before_lag")} if prev else set()
    )
    fell = []
    for g in now.groups:
        if g["group"] in was_exact and g["answer"] != EXACT:
            if g.get("not_replicated"):
                g["exact_before_lag"] = True
            else:
                fell.append(g)
    if fell:
        out.append(
            Degradation(
                "fell_back",
                f"{len(fell)} group(s) no longer provable exactly: "
                + listed(f"{g['group']} ({g['answer']})" for g in fell),
            )
        )
    over = {
        g["group"]: g["exposure_seconds"]
        for g in now.groups
        if g["exposure_seconds"] is not None and g["exposure_seconds"] > now.rpo_seconds
    }
    was_over = (
        {
            g["group"]
            for g in prev.groups
            if g["exposure_seconds"] is not None and g["exposure_seconds"] > prev.rpo_seconds
        }
        if prev
        else set()
    )
    newly = sorted(set(over) - was_over)
    if newly:
        out.append(
            Degradation(
                "over_rpo",
                f"{len(newly)} group(s) would lose more than rpo_seconds="
                f"{now.rpo_seconds} s if the source were lost now (records not yet replicated, the "
                "oldest " + f"{max(over[g] for g in newly):.0f} s old): " + listed(newly),
            )
        )
    # an archive that has never succeeded nor failed is told once it has been so for archive_stale_intervals
    # intervals, as a stale one: the archive DAG is unpaused with this one and may not have ended its first run yet
    # (the intervals waited are marked ``deferred`` on ``now``; its sync_history finding waits with it)
    waiting = set()
    for a, x in now.archive.items():
        before = (prev.archive.get(a) or {}) if prev else {}
        if x.get("age_seconds") is None and not x.get("failed_runs_since") and before.get("age_seconds") is None:
            n = (before.get("deferred") or 0) + 1
            if n < archive_stale_intervals:
                x["deferred"] = n
                waiting.add(a)
    known = {f["key"] for f in (prev.findings if prev else []) if not f.get("deferred")}
    for f in now.findings:
        if f["key"] in known or f.get("setup"):  # a setting never given is shown, not told
            continue
        if f["key"].endswith(":sync_history") and f["key"].split(":")[1] in waiting:
            f["deferred"] = True
            continue
        out.append(Degradation("new_finding", f["text"]))
    for alias, a in sorted(now.archive.items()):
        before = (prev.archive.get(alias) or {}).get("failed_runs_since") if prev else 0
        if a.get("failed_runs_since") and not before:
            out.append(
                Degradation(
                    "archive_failing",
                    f"alias {alias}: mm2_sync_archive failed "
                    f"{a['failed_runs_since']} run(s) since it last succeeded ({a.get('last_failure')})",
                )
            )
    stale = interval_seconds * archive_stale_intervals
    for alias, a in sorted(now.archive.items()):
        age = a.get("age_seconds")
        before = (prev.archive.get(alias) or {}).get("age_seconds") if prev else None
        if alias in waiting:
            continue
        told_before = (
            prev
            and (before is None or before > stale)
            and alias in prev.archive
            and not prev.archive[alias].get("deferred")
        )
        if (age is None or age > stale) and not told_before:
            out.append(
                Degradation(
                    "archive_stale",
                    f"alias {alias}: mm2_sync_archive "
                    + ("has never succeeded" if age is None else f"last succeeded {age:.0f} s ago")
                    + f" (more than {archive_stale_intervals} archive intervals): a failover with the "
                    "source lost falls back to MM2's checkpoints for the offset syncs it did not keep",
                )
            )
    for alias, a in sorted(now.archive.items()):  # the archive fresh, its reading of the source's commits not
        if "positions_read_at" not in a or alias in waiting or a.get("age_seconds") is None or a["age_seconds"] > stale:
            continue
        age = a.get("positions_age_seconds")
        before = (prev.archive.get(alias) or {}) if prev else {}
        was = "positions_read_at" in before and (
            before.get("positions_age_seconds") is None or before["positions_age_seconds"] > stale
        )
        if (age is None or age > stale) and not was:
            out.append(
                Degradation(
                    "positions_stale",
                    f"alias {alias}: mm2_sync_archive "
                    + ("has never read" if age is None else f"last read {age:.0f} s ago")
                    + " the groups' commits on the source (more than "
                    f"{archive_stale_intervals} archive intervals; its log says why): with the source "
                    "lost, a failover places a group rewound since at MM2's checkpoints, and a group "
                    "MM2 never checkpointed at that older reading (re-reads) or, created since, not at "
                    "all (plan rule 1a)",
                )
            )
    return out


def history_line(r: Readiness) -> dict:
    """One interval in the history (the Readiness page's trends): the summary, small whatever the group count."""
    return {
        "computed_at": r.computed_at,
        "run_id": r.run_id,
        **{
            k: r.summary.get(k)
            for k in (
                "groups",
                "groups_exact",
                "groups_not_exact",
                "worst_exposure_seconds",
                "not_replicated_records",
                "groups_over_rpo",
                "reread_records",
                "archive_age_seconds",
                "findings",
            )
        },
    }
