"""Stage 4, the gate: groups with live members (the broker refuses their commits) on the target and the sources."""

from __future__ import annotations


from mm2_failover.kafka_io import Cluster, GroupState
from mm2_failover.run import RunContext
from mm2_failover.stages.checkpoints import selected_checkpoints
from mm2_failover.stages.snapshot import source_commits

def live_groups(cluster: Cluster, groups: list[str]) -> list[GroupState]:
    """Groups that have members (or are mid-rebalance) on ``cluster``: the broker would refuse their commits."""
    return [s for s in cluster.describe_groups(groups).values() if not s.is_safe_to_move]


def groups_to_move(ctx: RunContext) -> list[str]:
    """The selected groups of the run: those with checkpoints and those with commits on a source."""
    groups = {c.group for c in selected_checkpoints(ctx)}
    if ctx.folder.snapshot.exists():
        groups |= set(source_commits(ctx, ctx.folder.load_snapshot()))
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
