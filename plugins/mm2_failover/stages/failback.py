"""Failing back (``home_alias``): groups' positions on ``<home>.<topic>`` read back to ``<topic>`` by the archived
offset syncs of the home flow (translate rules 8-9, evidence :func:`mm2_failover.rules.evidence.prove_back`)."""

from __future__ import annotations

from mm2_failover.adapters.config import archive_root
from mm2_failover.adapters.runfolder import Snapshot
from mm2_failover.rules import evidence
from mm2_failover.rules import translate as tr
from mm2_failover.stages.context import RunContext
from mm2_failover.stages.translation import Exact, archived_syncs, build_index

HOME_RULE_PREFIX = tr.HOME  # a plan row's rule when a group returns home (failing back): home_<translate rule>


def home_translations(ctx: RunContext, snap: Snapshot, src: dict) -> tuple[dict, list[str]]:
    """Failing back (``home_alias``): (group, home topic, partition) -> :class:`Exact` for each group's position ``D``
    on ``<home_alias>.<topic>`` of the source, read back to ``<topic>`` on the target by the archived offset syncs of
    the ``home_alias`` flow (:meth:`mm2_failover.rules.translate.SyncIndex.back`, rules 8-9; MM2 writes no checkpoint for
    these: the topic is never copied back). A bracket or the tail counts only on its evidence
    (:func:`mm2_failover.rules.evidence.prove_back`), else the sync floor (safe, re-reads)."""
    home = ctx.params.home_alias
    want = {
        (a, g, rt, p): c.offset
        for g, cs in src.items()
        for (a, rt, p), c in cs.items()
        if ctx.policies[a].is_home_topic(rt)
    }
    if not home or not want:
        return {}, []
    raw, unreadable = archived_syncs(home, {(rt, p) for _a, _g, rt, p in want})
    indexes = {tp: build_index(raw, tp) for tp in list(raw)}
    notes: list[str] = []
    if unreadable:
        notes.append(
            f"WARNING: failing back: {len(unreadable)} file(s) of alias {home}'s offset-sync archive cannot "
            f"be read ({'; '.join(unreadable[:3])}): the syncs that could be read are used (fewer syncs only "
            "move a group's position home earlier: more re-reads, never a skipped record)"
        )
    wants: dict[str, list] = {}
    for key, d in want.items():
        a, g, rt, p = key
        st = ctx.policies[a].source_topic(rt)
        state = snap.sources[a]
        r_end = (state.end_offsets or {}).get((st, p)) if state.reachable else None
        idx = indexes.get((rt, p))
        if idx is None or idx.back(d, r_end) is None:
            notes.append(
                f"failing back: {g} on {st}[{p}] at {d}: no archived offset sync of alias {home} for {rt}[{p}] "
                f"at or below it (archive {archive_root()}): it is not taken home"
            )
            continue
        wants.setdefault(a, []).append(evidence.BackWant(key, (st, p), (rt, p), d, idx, r_end))
    # the tail of each partition up to the replica's end: where MM2's last copy came from, and so how many records
    # the target holds that MM2 never copied before the outage (nobody read them on the source)
    tails = {}
    for a, ws in wants.items():
        for w in ws:
            if w.replica_end and (a, w.origin_tp) not in tails:
                tails[(a, w.origin_tp)] = evidence.BackWant(
                    ("tail", a, w.origin_tp), w.replica_tp, w.origin_tp, w.replica_end, w.index, w.replica_end
                )
    out = {}
    for a, ws in wants.items():
        tail_ws = [t for (ta, _tp), t in tails.items() if ta == a]
        got = evidence.prove_back(ws + tail_ws, ctx.source(a), ctx.target)
        for w in ws:
            b = got[w.key]
            out[w.key[1:]] = Exact(b.upstream, HOME_RULE_PREFIX + b.rule, w.position)
        for t in tail_ws:
            b = got[t.key]
            if b is None or b.rule != tr.DRAINED_TAIL:
                continue
            rt, p = t.origin_tp
            copied_to = b.tail_origin(t.replica_end) + 1
            if snap.replica_end.get((rt, p), 0) > copied_to:
                notes.append(
                    f"failing back: {rt}[{p}] holds {snap.replica_end[(rt, p)] - copied_to} record(s) (offsets "
                    f"{copied_to}-{snap.replica_end[(rt, p)] - 1}) that MM2 never copied to {a} before the "
                    "outage: nobody consumed them there; the groups read them now"
                )
    return out, notes
