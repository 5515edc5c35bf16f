"""Stage 4, the gate: groups with live members (the broker refuses their commits) on the target and the sources.

1. A group is live when its coordinator describes members or a state other than empty, dead or unknown
   (:attr:`~mm2_failover.adapters.kafka.groups.GroupState.is_safe_to_move`).
2. Each cluster's group listing comes first (one request per broker, with every group's state): a group it lists as
   ``EMPTY`` or ``DEAD`` has no members and is not described. Every other group is described - listed in another
   state, or not listed at all: a listing leaves out the groups the principal may not Describe, so that a group is
   missing from it proves nothing. The coordinator's answer, read, is the evidence either way.
"""

from __future__ import annotations

from mm2_failover.adapters.kafka.cluster import Cluster
from mm2_failover.adapters.kafka.groups import GroupState
from mm2_failover.stages.compute_checkpoints import selected_checkpoint_groups
from mm2_failover.stages.context import RunContext
from mm2_failover.stages.snapshot import archived_commits, source_commits

#: rule 2: the listed states that prove a group has no members
LISTED_EMPTY = frozenset({"EMPTY", "DEAD"})


def unproven(groups: list[str], listed: dict[str, str]) -> list[str]:
    """Rule 2: the groups the listing ``listed`` (group -> state) does not prove empty, to be described."""
    return [g for g in groups if listed.get(g) not in LISTED_EMPTY]


def live_groups(cluster: Cluster, groups: list[str]) -> list[GroupState]:
    """Rule 1 over the groups rule 2 leaves: those that have members (or are mid-rebalance) on ``cluster``, whose
    commits the broker would refuse."""
    groups = sorted(set(groups))
    if not groups:
        return []
    return [
        s for s in cluster.describe_groups(unproven(groups, cluster.group_states())).values() if not s.is_safe_to_move
    ]


def groups_to_move(ctx: RunContext) -> list[str]:
    """The selected groups of the run: those with checkpoints and those with commits on a source (read now, or, the
    source lost, as the archive last read them: plan rule 1a may place them)."""
    groups = selected_checkpoint_groups(ctx)
    if ctx.folder.snapshot.exists():
        snap = ctx.folder.load_snapshot()
        groups |= set(source_commits(ctx, snap)) | set(archived_commits(ctx, snap))
    return sorted(groups)


def check_groups_empty(ctx: RunContext, groups: list[str], sources: bool | None = None) -> list[tuple[str, GroupState]]:
    """``(where, state)`` of every group with live members on the target, and (``source_groups_must_be_empty``) on
    every source the run decided reachable. A source check that fails raises: it never passes with a warning."""
    if not groups:
        return []
    live = [("target", s) for s in live_groups(ctx.target, groups)]
    if ctx.params.source_groups_must_be_empty if sources is None else sources:
        for alias, source in ctx.sources().items():
            live += [(f"source {alias}", s) for s in live_groups(source, groups)]
    return live


def early_gate(ctx: RunContext) -> list[tuple[str, GroupState]]:
    """Before the (slow) computation: live members of any selected group known to the target or a source."""
    candidates = set(ctx.selection.select(ctx.target.groups()))
    for source in ctx.sources().values():
        candidates |= set(ctx.selection.select(source.groups()))
    return check_groups_empty(ctx, sorted(candidates))


def describe_live(live: list[tuple[str, GroupState]]) -> str:
    return f"{len(live)} group(s) still have live members:\n" + "\n".join(f"  on {w}: {s.describe()}" for w, s in live)
