"""A small plan of every action (commits, a clamp, a skip) over groups a drill's prefix does and does not cover, for
the drill's and the report's unit tests."""

from __future__ import annotations

from mm2_failover.rules.plan import CLAMP, COMMIT, SKIP, PlanRow


def rows():
    return [
        PlanRow("primary", "drill-a", "primary.t", 0, 40, 40, None, 40, COMMIT),
        PlanRow("primary", "drill-a", "primary.t", 1, 50, 1, None, 1, COMMIT),
        PlanRow("primary", "drill-a", "primary.t", 2, None, None, None, None, SKIP, "no_checkpoint"),
        PlanRow("primary", "orders", "primary.u", 0, 10, 3, None, 10, CLAMP, "retention_gap", 10, 90, 7),
        PlanRow("primary", "drilling", "primary.u", 0, 20, 20, None, 20, COMMIT),
    ]
