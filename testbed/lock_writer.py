"""A writer on its own "host" for the cross-host lock test (tests/integration/test_writer_lock.py): takes the target
cluster's writer lock exactly as apply and rollback do (``stages.apply.writer_lock`` with ``MM2_FAILOVER_LOCK=kafka``
in its environment), then commits offsets to one partition of a group as they do (checking the lock, then
``HeldLock.commit``: under the lease, the fenced writer), and prints one JSON line per event (acquired, wrote,
stopping, lost) with its wall-clock time. Exit 3 when the lock was lost. ``--stop-at-write K``: at the K-th write,
after its check and before its commit, the process stops itself (SIGSTOP: every thread frozen, as in a long GC pause
or a frozen VM) until the test resumes it.

    python -m testbed.lock_writer --bootstrap HOST:PORT --group G --topic T --partition P --name A [--wait 60]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time


def say(**kv) -> None:
    print(json.dumps({"t": time.time(), **kv}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partition", type=int, required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--wait", type=float, default=60.0)
    ap.add_argument("--write-timeout", type=float, default=1.0)
    ap.add_argument("--every", type=float, default=0.2)
    ap.add_argument("--writes", type=int, default=0, help="stop after this many writes (0: until killed)")
    ap.add_argument("--stop-at-write", type=int, default=0, help="SIGSTOP itself after this write's check")
    a = ap.parse_args()
    import logging

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")
    from mm2_failover.adapters.kafka.cluster import Cluster
    from mm2_failover.adapters.kafka_lock import LockLost
    from mm2_failover.stages.apply import writer_lock

    target = Cluster({"bootstrap.servers": a.bootstrap}, "target", a.write_timeout)
    say(event="waiting", name=a.name)
    try:
        with writer_lock(target, f"lock test writer {a.name}", a.wait, run=a.name) as held:
            say(event="acquired", name=a.name, token=held.get("token"))
            i = 0
            while not a.writes or i < a.writes:
                i += 1
                held.check()
                if i == a.stop_at_write:
                    say(event="stopping", name=a.name, offset=i)
                    os.kill(os.getpid(), signal.SIGSTOP)
                err = held.commit(target, {a.group: {(a.topic, a.partition): i}})[a.group]
                say(event="wrote", name=a.name, offset=i, error=err)
                time.sleep(a.every)
    except LockLost as e:
        say(event="lost", name=a.name, why=str(e))
        return 3
    say(event="released", name=a.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
