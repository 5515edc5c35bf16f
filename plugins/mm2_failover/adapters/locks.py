"""One writer per target cluster: failover apply, rollback, a drill that writes, and the CLI take the same lock
before they write offsets, so that a rollback can never interleave with another run's apply.

The lock is an exclusive ``flock`` on ``$MM2_FAILOVER_ARTIFACTS/.locks/<target cluster id>.lock``: the kernel
releases it when its holder exits, also when it is killed, so a crash never leaves a stale lock. Its holder writes
who it is (run, task, host, pid, since) into the file, and a writer that waits longer than ``lock_wait_seconds``
is refused with that record. All writers must share the artifacts folder (one host, or a shared filesystem whose
locks work across hosts, e.g. NFSv4).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import time
from pathlib import Path

from mm2_failover.adapters.runfolder import now_iso

log = logging.getLogger(__name__)


class Locked(RuntimeError):
    """Another writer holds the target's lock; the message names it."""


def lock_path(root: Path, cluster_id: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in cluster_id) or "unknown"
    return Path(root) / ".locks" / f"{safe}.lock"


@contextlib.contextmanager
def writer_lock(root: Path, cluster_id: str, owner: dict, wait_s: float, poll_s: float = 0.5):
    """Hold the writer lock of target ``cluster_id`` for the ``with`` block; wait up to ``wait_s`` for it."""
    with file_lock(lock_path(root, cluster_id), f"target cluster {cluster_id}", owner, wait_s, poll_s) as rec:
        yield rec


@contextlib.contextmanager
def file_lock(path: Path, what: str, owner: dict, wait_s: float, poll_s: float = 0.5):
    """Hold the exclusive lock ``path`` (of ``what``) for the ``with`` block; wait up to ``wait_s`` for it, then
    :class:`Locked` naming the holder. Released by the kernel when the holder dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + max(0.0, wait_s)
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _read(fd)
                if time.monotonic() >= deadline:
                    raise Locked(
                        f"another writer holds the lock of {what} ({path}): {holder}. "
                        f"Waited {wait_s:.0f} s. Let it finish (or stop it), then retry."
                    ) from None
                if not said:
                    log.warning("waiting for the lock of %s, held by %s", what, holder)
                    said = True
                time.sleep(poll_s)
        record = {**owner, "host": socket.gethostname(), "pid": os.getpid(), "since": now_iso()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        log.info("holding the lock of %s (%s)", what, path)
        try:
            yield record
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _read(fd: int) -> str:
    try:
        raw = os.pread(fd, 4096, 0).decode(errors="replace")
        return raw or "(a writer that has not said who it is yet)"
    except OSError:
        return "(unknown)"
