"""Fixtures for step-level tests: a scenario whose checkpoints real MM2 wrote, and a run folder holding the
snapshot and the latest checkpoints, ready for plan/apply/verify/rollback."""

from __future__ import annotations

import threading
import time

import pytest

from testbed import scenario
from testbed.steps import StepRun


@pytest.fixture
def prepared(bed, source, target, names, run_root):
    """One group (names['group']) on a 3-partition topic: 100 records, consumed 20/50/100."""
    prep = scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        group=names["group"],
        topic=names["topic"],
        partitions=3,
        produced=100,
        consumed_upto={0: 20, 1: 50, 2: 100},
    )
    return StepRun(bed, source, target, names, run_root, [names["group"]], {names["group"]: prep})


class LiveConsumer:
    """A real consumer that stays a member of ``group`` (polling in a thread) until stopped."""

    def __init__(self, bootstrap: str, group: str, topic: str, client_id: str = "live-consumer"):
        from confluent_kafka import Consumer

        self.c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": client_id,
                "enable.auto.commit": False,
                "auto.offset.reset": "latest",
                "log_level": 3,
            }
        )
        self.c.subscribe([topic])
        self._stop = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self._stop.is_set():
            self.c.poll(0.2)
        self.c.close()

    def wait_stable(self, cluster, group: str, timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = cluster.describe_groups([group])[group]
            if st.members and st.state == "STABLE":
                return st
            time.sleep(0.3)
        raise TimeoutError(f"{group} did not become Stable")

    def stop(self):
        self._stop.set()
        self.t.join(15)


@pytest.fixture
def live_consumer():
    started = []

    def start(bootstrap, group, topic, client_id="live-consumer"):
        lc = LiveConsumer(bootstrap, group, topic, client_id)
        started.append(lc)
        return lc

    yield start
    for lc in started:
        lc.stop()
