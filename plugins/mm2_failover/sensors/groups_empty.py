"""``check_groups_empty``: no group to be moved may have live members on the target (nor, when
``source_groups_must_be_empty``, on any source the run decided reachable).

The broker refuses to alter the offsets of a group with members, and moving a group under a running consumer
would be wrong anyway. While any group is live the sensor keeps waiting (reschedule mode) and logs group, state,
member ids, client ids and hosts; on timeout it fails with that list. A source check that fails fails the poke:
it never passes with a warning.
"""

from __future__ import annotations

from mm2_failover.sensors.base import FailoverSensor


class GroupsEmptySensor(FailoverSensor):
    """
    :param groups_from: ``checkpoints`` (the failover run's selected groups) or ``backup`` (a rollback's groups)
    :param backup_path: with ``groups_from="backup"``: the backup file (templated)
    :param failover_run_id: with ``groups_from="backup"``: or the failover run whose backup it is (templated)
    """

    ui_color = "#fdf1e6"
    timeout_param = "groups_empty_timeout_seconds"
    template_fields = (*FailoverSensor.template_fields, "backup_path", "failover_run_id")

    def __init__(self, *, groups_from: str = "checkpoints", backup_path: str = "", failover_run_id: str = "", **kwargs):
        super().__init__(**kwargs)
        if groups_from not in ("checkpoints", "backup"):
            raise ValueError("groups_from must be 'checkpoints' or 'backup'")
        self.groups_from = groups_from
        self.backup_path = backup_path
        self.failover_run_id = failover_run_id

    def poke(self, context) -> bool:
        from mm2_failover.adapters.runfolder import load_backup  # lazy: not at DAG parse
        from mm2_failover.rules.words import duration
        from mm2_failover.stages.gate import check_groups_empty, describe_live, groups_to_move, live_groups
        from mm2_failover.stages.roll_back import backup_path_of

        ctx = self.run_context(context)
        if self.groups_from == "backup":
            groups = sorted(load_backup(backup_path_of(self.backup_path, self.failover_run_id)).groups)
            live = [("target", s) for s in live_groups(ctx.target, groups)]
        else:
            groups = groups_to_move(ctx)
            live = check_groups_empty(ctx, groups)
        if not groups:
            self.log.info("no group to move in this run: nothing to check")
            return True
        if not live:
            where = "the target" + (
                " and the reachable sources"
                if self.groups_from == "checkpoints" and ctx.params.source_groups_must_be_empty
                else ""
            )
            self.log.info("all %d group(s) are empty or unknown on %s", len(groups), where)
            return True
        self._findings = describe_live(live)
        waited, left = self.waited(context)
        self.log.warning(
            "%s\n%d of %d group(s) still have live members; waited %s, %s left. Stop these consumers; "
            "the sensor continues by itself.",
            self._findings,
            len({s.group for _w, s in live}),
            len(groups),
            duration(waited),
            duration(max(0.0, left)),
        )
        return False
