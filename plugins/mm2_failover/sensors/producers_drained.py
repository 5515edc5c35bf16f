"""``verify_producers_drained``: producers on the source stopped, and MirrorMaker 2 replicated everything.

See :mod:`mm2_failover.rules.drain` for the rules and :mod:`mm2_failover.rules.reachability` for when a source counts as lost.
The first poke of a run decides each source's reachability (and records it); each poke logs a table of every
partition in scope (alias, source end, moved, MM2's last replicated offset, replica end, state) and keeps it in the
run's ``drain.json``; on timeout the task fails with the table of what is not drained.
"""

from __future__ import annotations

from mm2_failover.sensors.base import FailoverSensor


class ProducersDrainedSensor(FailoverSensor):
    ui_color = "#e8f4fa"
    timeout_param = "drain_timeout_seconds"

    def poke(self, context) -> bool:
        from mm2_failover.rules.drain import loss_window_text  # lazy: not at DAG parse
        from mm2_failover.stages.drain_check import drain_check

        ctx = self.run_context(context)
        v = drain_check(ctx)  # refuses at once when records never replicated are gone from the source
        for n in v.notes:
            self.log.info(n)
        if v.disaster:
            self.log.warning(
                "WARNING: DISASTER MODE for alias(es) %s: checked the target only. Data-loss window: %s",
                ", ".join(v.disaster_aliases),
                loss_window_text(v.rpo),
            )
        if v.rows:
            self.log.info("drain check for %d group(s), %d topic(s):\n%s", len(v.groups), len(v.topics), v.table())
        self._findings = ("Not drained:\n" + v.table()) if v.not_drained() else ""
        if not v.drained:
            waited, left = self.waited(context)
            self.log.warning(
                "%s: stop the producers on the source and let MM2 catch up; the sensor checks again by itself.",
                v.progress(left, waited),
            )
        return v.drained
