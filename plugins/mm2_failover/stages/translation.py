"""Exact translation, the I/O side: the archived syncs of the wanted partitions, indexed a chunk at a time, and the
proof read and decided by :mod:`mm2_failover.rules.evidence` (the rules: :mod:`mm2_failover.rules.translate`)."""

from __future__ import annotations

import functools
import logging
from collections import defaultdict
from dataclasses import dataclass

from mm2_failover.adapters.config import archive_root
from mm2_failover.adapters.runfolder import Snapshot
from mm2_failover.adapters.syncs import SyncArchive
from mm2_failover.rules import evidence
from mm2_failover.rules import translate as tr
from mm2_failover.rules.values import TP
from mm2_failover.stages.context import RunContext

log = logging.getLogger(__name__)


@dataclass
class Exact:
    """The exact translation of one (group, replica partition): where to resume, by which rule."""

    offset: int
    rule: str
    source_position: int  # the group's position on the source it translates


PROVE_SYNCS = 2_000_000  # syncs whose partitions' indexes are built and positions proven at a time (~100 MB)


def prove_chunks(sizes: list[tuple[object, int]], budget: int = PROVE_SYNCS) -> list[list]:
    """Partitions (with their sync counts) cut into consecutive chunks of at most ``budget`` syncs (a partition larger
    than that is a chunk of its own)."""
    out: list[list] = []
    total = budget
    for key, n in sizes:
        if total + n > budget and out and out[-1]:
            out.append([])
            total = 0
        elif not out:
            out.append([])
            total = 0
        out[-1].append(key)
        total += n
    return out


def archived_syncs(alias: str, wanted: set[TP], end: dict[int, int] | None = None) -> tuple[dict, list[str]]:
    """(source topic, partition) -> its archived syncs as (upstream, downstream) arrays, for the wanted partitions of
    ``alias`` (those below ``end`` per sync-topic partition, when given), and the archive files that could not be
    read."""
    return SyncArchive(archive_root(), alias).partition_syncs(wanted, end)


def build_index(raw: dict, tp: TP):
    got = raw.pop(tp, None)  # built once, when its positions are proven; the arrays go with it
    return None if got is None else tr.SyncIndex.from_arrays(*got)


def drain_checked(ctx: RunContext) -> set[tuple[str, str, int]] | None:
    """The (alias, source topic, partition) the run's drain check observed (``drain.json``): only their end offsets
    count as the ends of a finished replication - the proofs that need it (a drained tail, the sync floor, the
    replica's start, a later MM2 history's range) are not given to a partition the check never looked at
    (``topics_regex`` narrower than the groups' topics). A failover's check passed every partition it observed (its
    gate); readiness and the drill observe without waiting, and take the captured ends as a failover's would be once
    drained (what it would do now). None: no drain check in this run (every captured partition counts, as before)."""
    verdict = ctx.folder.load_drain()
    if verdict is None:
        return None
    return {(r.get("alias"), r["topic"], int(r["partition"])) for r in verdict.rows}


def exact_translations(ctx: RunContext, snap: Snapshot, cps: list, src: dict) -> tuple[dict, list[str], dict, dict]:
    """(group, replica topic, partition) -> :class:`Exact`, for every position MM2's archived offset syncs prove
    (see :mod:`mm2_failover.rules.translate` for the rules and :mod:`mm2_failover.rules.evidence` for what counts as proof),
    notes for the report, and where no exact position is proven, the replica offset the position is proven to be at
    or after (re-reads counted from below), and where it is below every sync of a drained partition, the replica's log
    start (plan rule 1b's last floor). The group's position is its source commit at capture time when known, else its
    checkpoint's upstream offset."""
    if ctx.params.translation != "exact":
        return {}, [], {}, {}
    notes: list[str] = []
    policies = ctx.policies
    # decided once per (alias, replica topic), not once per row
    source_topic = functools.cache(lambda a, rt: policies[a].source_topic(rt))
    is_home = functools.cache(lambda a, rt: policies[a].is_home_topic(rt))

    want: dict[tuple[str, str, str, int], int] = {}
    for c in cps:
        want[(c.source_alias, c.group, c.topic, c.partition)] = c.upstream_offset
    for g, commits in src.items():
        for (a, rt, p), commit in commits.items():
            if not is_home(a, rt):  # failing back: home_translations
                want[(a, g, rt, p)] = commit.offset
    raw: dict[str, dict] = {}
    for alias in sorted({a for a, *_ in want}):
        info = snap.syncs.get(alias) or {}
        if not info.get("topic"):
            notes.append(
                f"alias {alias}: no offset syncs ({info.get('why', 'not captured')}): MM2's checkpoints are "
                "used as they are"
            )
            continue
        parts = {(source_topic(a, rt), p) for a, _g, rt, p in want if a == alias}
        got, unreadable = archived_syncs(alias, parts, {int(p): int(o) for p, o in (info.get("end") or {}).items()})
        if unreadable:
            notes.append(
                f"WARNING: alias {alias}: {len(unreadable)} file(s) of the offset-sync archive cannot be read "
                f"({'; '.join(unreadable[:3])}): exact translation is off for this alias, MM2's checkpoints "
                "are used as they are. Restore or delete the file(s) named (the archive is re-read from "
                "MM2's topic where it still holds them)."
            )
            continue
        raw[alias] = got
    by_part: dict[tuple, list] = defaultdict(list)
    for (a, g, rt, p), u in want.items():
        st = source_topic(a, rt)
        if (st, p) in raw.get(a, {}):
            by_part[(a, st, p)].append(((a, g, rt, p), u))
    sources = {a: ctx.source(a) for a in raw}
    checked = drain_checked(ctx)
    outcomes: dict = {}
    chunks = prove_chunks([(k, raw[k[0]].rows(k[1:])) for k in sorted(by_part)])
    done = 0
    for chunk in chunks:  # a chunk of partitions' indexes at a time
        wants = []
        for a, st, p in chunk:
            idx = build_index(raw[a], (st, p))
            for key, u in by_part[(a, st, p)]:
                rt = key[2]
                state = snap.sources[a]
                drained = None
                if (
                    state.reachable
                    and state.end_offsets
                    and (st, p) in state.end_offsets
                    and (rt, p) in snap.replica_end
                    and (checked is None or (a, st, p) in checked)
                ):
                    drained = (state.end_offsets[(st, p)], snap.replica_end[(rt, p)])  # captured after the drain check
                wants.append(evidence.Want(key, a, (st, p), (rt, p), u, idx, drained, snap.replica_start.get((rt, p))))
        outcomes.update(evidence.prove(wants, sources, ctx.target))
        done += len(chunk)
        if len(chunks) > 1:
            log.info("exact translation: %d/%d partition(s) proven", done, len(by_part))
    out = {}
    at_least = {}
    below: dict[tuple, int] = {}
    gone: dict[tuple, tuple[int, int]] = {}
    unproven: dict[str, int] = {}
    floors = archive_floors = cut_short = 0
    checkpointed = {(c.source_alias, c.group, c.topic, c.partition): c.downstream_offset for c in cps}
    for key, o in outcomes.items():
        a, g, rt, p = key
        if o.source_log_start is not None:
            gone[(a, rt, p)] = (min(want[key], gone.get((a, rt, p), (want[key],))[0]), o.source_log_start)
        if o.position_at_least is not None:
            at_least[key[1:]] = o.position_at_least
        elif o.answer is None and o.replica_start is not None:  # below every sync, drained (plan rule 1b's last floor)
            below[key[1:]] = o.replica_start
        resume = evidence.resume_at(o, key in checkpointed, checkpointed.get(key))
        if resume is not None:
            out[key[1:]] = Exact(resume[0], resume[1], want[key])
            floors += resume[1] == tr.SYNC_FLOOR
            archive_floors += resume[1] == tr.ARCHIVE_FLOOR
            cut_short += resume[1] == tr.ARCHIVE_FLOOR and o.cut_short
        elif o.why:
            unproven[o.why.split(":")[0]] = unproven.get(o.why.split(":")[0], 0) + 1
    for (a, rt, p), (lowest, start) in sorted(gone.items()):
        notes.append(
            f"alias {a}: {ctx.policies[a].source_topic(rt)}[{p}]: group position(s) down to {lowest} are below "
            f"the source's log start {start} (retention or DeleteRecords took records those groups had not "
            "read): only target-side proofs answered them, else MM2's checkpoint (their copies on the replica "
            "are read; what is gone from the replica too is counted as lost to retention)"
        )
    if floors:
        notes.append(
            f"{floors} position(s) without a checkpoint and not proven exactly resume at the sync floor "
            "(sync_floor: the newest offset sync at or below the position, on a drained partition: every "
            "record after it has a copy after it - loses nothing, re-reads what lies between)"
        )
    if archive_floors:
        notes.append(
            f"{archive_floors} position(s) of a lost source not proven exactly resume at the archive floor "
            "(archive_floor: the newest archived offset sync at or below the position - MM2's own rule over "
            "every archived sync, where its checkpoint uses a sparse store)"
            + (
                f"; on {cut_short} of them MM2's newest history was cut short by the outage before it got as "
                "far as an earlier one, whose floor is taken (MM2's checkpoint would skip the records only the "
                "earlier history copied)"
                if cut_short
                else ""
            )
        )
    starts = sum(1 for e in out.values() if e.rule == tr.REPLICA_START)
    if starts:
        notes.append(
            f"{starts} position(s) below every offset sync and without a checkpoint (behind the source's "
            "retention, typically: MM2 never checkpointed them) resume at the replica's first record "
            "(replica_start): nothing left anywhere is before it; left without a commit, their consumers "
            "would fall to auto.offset.reset (latest skips every replicated record)"
        )
    superseded = sum(1 for e in out.values() if e.rule == tr.SUPERSEDED_SYNC)
    if superseded:
        notes.append(
            f"{superseded} partition(s) resume at the first copy of a record MM2 copied again later "
            "(superseded_sync): safe, but they re-read what the later copy repeats (at least the figure in "
            "their rows)"
        )
    for why, n in sorted(unproven.items()):
        notes.append(f"{n} position(s) not proven exactly ({why}): MM2's checkpoint answers them")
    return out, notes, at_least, below
