"""``verify_producers_drained``: producers on the source stopped, and MirrorMaker 2 replicated everything.

See :mod:`mm2_failover.drain` for the rules. Each poke logs a table of every partition in scope (source end,
moved, MM2's last replicated offset, replica end, state) and keeps it in the run's ``drain.json``; on timeout
the task fails with the table of what is not drained. When the source cannot be reached (``source_reachable``
detect/no) it runs in DISASTER MODE: target-side evidence only, with an estimate of the data-loss window.
"""

from __future__ import annotations

from mm2_failover.sensors.base import FailoverSensor


class ProducersDrainedSensor(FailoverSensor):
    ui_color = "#e8f4fa"
    timeout_param = "drain_timeout_seconds"

    def poke(self, context) -> bool:
        from mm2_failover import steps, tasks

        params, art, _, _ = tasks.run_context(context)
        source = steps.connect_source(self.cluster(self.source_conn_id, "source", timeout=5.0), params)
        v = steps.drain_status(source, self.cluster(self.target_conn_id, "target"), params)
        steps.write_json(art.dir / "drain.json", v.as_dict())
        for n in v.notes:
            self.log.info(n)
        if v.disaster:
            self.log.warning("WARNING: DISASTER MODE: the source is not reachable; checked the target only. "
                             "Data-loss window: %s", v.rpo)
        if v.rows:
            self.log.info("drain check for %d group(s), %d topic(s):\n%s", len(v.groups), len(v.topics), v.table())
        not_drained = [r for r in v.rows if r["state"] not in ("drained",) and not r["state"].startswith("drained")]
        self._findings = ("Not drained:\n" + v.table()) if not_drained else ""
        if not v.drained:
            self.log.warning("%d partition(s) not drained yet: stop the producers on the source and let MM2 catch "
                             "up; the sensor checks again by itself.", len(not_drained))
        return v.drained
