"""``check_groups_empty``: no group to be moved may have live members on the target (nor, when
``source_groups_must_be_empty`` and the source is reachable, on the source).

The broker refuses to alter the offsets of a group with members, and moving a group under a running
consumer would be wrong anyway. While any group is live the sensor keeps waiting (reschedule mode) and
logs group, state, member ids, client ids and hosts; on timeout it fails with that list.
"""

from __future__ import annotations

from mm2_failover.sensors.base import FailoverSensor


class GroupsEmptySensor(FailoverSensor):
    ui_color = "#fdf1e6"
    timeout_param = "groups_empty_timeout_seconds"

    def __init__(self, *, groups_from: str = "checkpoints", **kwargs):
        """``groups_from``: ``checkpoints`` (the failover run's latest checkpoints) or ``backup`` (rollback)."""
        super().__init__(**kwargs)
        if groups_from not in ("checkpoints", "backup"):
            raise ValueError("groups_from must be 'checkpoints' or 'backup'")
        self.groups_from = groups_from

    def groups(self, context) -> list[str]:
        from mm2_failover import steps, tasks

        if self.groups_from == "backup":
            return sorted(steps.load_backup(tasks.rollback_backup_path(context))["groups"])
        _, art, _, _ = tasks.run_context(context)
        return sorted({c.group for c in steps.load_latest_checkpoints(art.checkpoints)})

    def poke(self, context) -> bool:
        from mm2_failover import steps

        groups = self.groups(context)
        if not groups:
            self.log.info("no group to move in this run: nothing to check")
            return True
        live = [("target", s) for s in steps.live_groups(self.cluster(self.target_conn_id, "target"), groups)]
        params = self.run_params(context)
        if self.groups_from == "checkpoints" and params.source_groups_must_be_empty:
            try:
                source = self.cluster(self.source_conn_id, "source")
                live += [("source", s) for s in steps.live_groups(source, groups)]
            except Exception as e:
                self.log.warning("WARNING: source cluster not reachable (%s): cannot check that the groups are stopped "
                                 "there. Make sure the source consumers are stopped.", e)
        if not live:
            self.log.info("all %d group(s) are empty or unknown on the target%s", len(groups),
                          " and the source" if params.source_groups_must_be_empty and self.groups_from == "checkpoints" else "")
            return True
        lines = "\n".join(f"  on {where}: {s.describe()}" for where, s in live)
        self._findings = f"{len(live)} group(s) still have live members:\n{lines}"
        self.log.warning("%s\nStop these consumers; the sensor continues by itself.", self._findings)
        return False
