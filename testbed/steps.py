"""A run folder for step-level tests (plan, apply, verify, rollback on a real bed): a scenario whose checkpoints real
MM2 wrote, its snapshot and latest checkpoints, and the run's context as the CLI builds it."""

from __future__ import annotations

from mm2_failover.adapters.runfolder import RunFolder
from mm2_failover.rules.run_params import RunParams
from mm2_failover.stages.context import RunContext
from mm2_failover.stages.snapshot import capture_snapshot
from testbed import scenario
from testbed.scenario import write_latest


class StepRun:
    def __init__(self, bed, source, target, names, run_root, groups, prep_by_group):
        self.bed, self.source, self.target, self.names = bed, source, target, names
        self.groups = groups
        self.prep = prep_by_group
        self.art = RunFolder(run_root / "steps" / names["group"])

    def params(self, **kw) -> RunParams:
        return RunParams(**{"groups_regex": "|".join(self.groups), "drain_quiet_seconds": 1, **kw})

    def ctx(self, **kw) -> RunContext:
        """The run as the CLI builds it, on this run folder, with these parameters."""
        return self.bed.run_context(self.art.dir, **{"groups_regex": "|".join(self.groups), **kw})

    def snapshot_and_checkpoints(self, **kw):
        snap = capture_snapshot(self.ctx(**kw))
        cps = [
            c
            for k, c in scenario.read_checkpoints(self.target, self.bed.checkpoints_topic).items()
            if k.group in self.groups
        ]
        write_latest(self.art, cps)
        return snap
