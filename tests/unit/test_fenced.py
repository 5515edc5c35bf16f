"""mm2_failover.adapters.fenced without a broker: the helper dies with its holder (a real parent process killed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

PARENT = """
import subprocess, sys, threading, time
from mm2_failover.adapters import fenced
# a thread running, as the lease's renewal runs while the writer starts its helper
threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
p = subprocess.Popen(["sleep", "60"], preexec_fn=fenced._die_with_parent)
print(p.pid, flush=True)
time.sleep(60)
"""


def test_the_helper_is_killed_when_its_holder_is_sigkilled():
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [os.path.join(os.path.dirname(__file__), "..", "..", "plugins"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, env=env)
    try:
        child = int(parent.stdout.readline())
        os.kill(child, 0)  # alive while its parent is
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                return  # gone with its parent (reaped by init)
            with open(f"/proc/{child}/stat") as f:
                if f.read().split()[2] == "Z":
                    return  # killed, a zombie until init reaps it
            time.sleep(0.05)
        raise AssertionError(f"the helper {child} outlived its SIGKILLed parent")
    finally:
        if parent.poll() is None:
            parent.kill()
