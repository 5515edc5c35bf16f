"""The fenced writer of a target cluster: under the target's lease (``MM2_FAILOVER_LOCK=kafka``), every offset
commit goes through one Kafka transactional producer whose transactional id belongs to the target
(:meth:`mm2_failover.adapters.config.WriterLockSettings.transactional_id`), so that a holder that lost the lease cannot write,
not even once.

The lease (:mod:`mm2_failover.rules.lease`) decides who may write and tells a holder when to stop; but a holder paused after
its last check and before its request is on the wire would still write once when it resumes. The fence closes that
window with Kafka's own mechanism:

1. A new holder, once its claim is granted and before it reads anything it will decide on, takes the transactional id
   (``initTransactions``): the coordinator bumps the id's epoch, aborts the previous holder's open transaction, and
   refuses every later request of an older epoch (``ProducerFencedException``).
2. Every commit is ``sendOffsetsToTransaction`` inside a transaction: it lands only if its ``commitTransaction`` is
   accepted, which the coordinator does only for the newest epoch. A zombie's commit either completed before the new
   holder took the id (and the new holder's reads see it) or never lands.
3. A transaction is open for one batch of groups only, and its timeout is the lease's: a holder that dies mid-batch
   leaves nothing visible, and its open transaction is aborted by the coordinator within a lease (at once when the
   next holder takes the id).

The commits are Kafka's Java producer's (``jvm/KafkaOffsets.java``, mode ``fenced``): a long-lived process per lock,
driven over its standard input. Its metadata is sent byte for byte, as the Java AdminClient's.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import subprocess
import tempfile
import threading
import time

from mm2_failover.adapters.kafka.cluster import Cluster
from mm2_failover.adapters.kafka.java_bridge import commit_lines, java_offsets_program, unb64
from mm2_failover.adapters.kafka.kafka_errors import KafkaAuthError, KafkaConfigError, KafkaUnavailable
from mm2_failover.adapters.kafka_lock import LockLost
from mm2_failover.rules.acls import phrase
from mm2_failover.rules.values import TP, Commit

log = logging.getLogger(__name__)

READY_S = 60.0  # the JVM's start (and the helper's compilation, the first time) and initTransactions


def _prctl():
    """libc's ``prctl``, found in this process (never in the forked child: importing or loading there, while another
    thread - the lease's renewal - may hold a lock, could deadlock the child before it runs Java). None off Linux."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def _die_with_parent() -> None:
    """In the helper, before Java starts: the kernel kills it when its parent dies (PR_SET_PDEATHSIG), so a holder
    killed mid-batch leaves no helper to finish the batch; its open transaction is aborted (rule 3). Only a call into
    what the parent resolved: no import, no allocation of note in the child."""
    if _PRCTL is not None:
        _PRCTL(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


class Fenced(LockLost):
    """A newer writer took this target's transactional id: this writer's open batch was not committed, and it can
    never commit again. The message says what to do."""


class FencedWriter:
    """Commit offsets to ``target`` as the one writer of transactional id ``transactional_id``. Starting it fences
    every earlier writer of that id. Thread-safe: one batch at a time."""

    def __init__(self, target: Cluster, transactional_id: str, transaction_timeout_ms: int):
        self.target, self.transactional_id, self._timeout_ms = target, transactional_id, transaction_timeout_ms
        self._lock = threading.Lock()
        self._buf = b""
        self._stderr = tempfile.TemporaryFile()  # never a pipe: a helper that logs much would block on it
        what = "commits under the target's lease (MM2_FAILOVER_LOCK=kafka)"
        # the transaction's timeout: the lease (rule 3 above)
        with java_offsets_program(target, what, {"transaction.timeout.ms": int(transaction_timeout_ms)}) as (
            command,
            props,
            _no_archive,  # the fenced writer never uses the helper's class archive
        ):
            self._proc = subprocess.Popen(
                [*command, "fenced", str(props), transactional_id],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                preexec_fn=_die_with_parent if _PRCTL is not None else None,
            )
            try:
                # taking the id may wait for the previous holder's transaction, which a lease bounds (the helper's
                # takeId)
                first = self._line(READY_S + target.timeout + transaction_timeout_ms / 1000)
            except BaseException:
                self.close()
                raise
        if first != ["READY"]:
            err = self._failure(first, "taking the transactional id")
            self.close()
            raise err
        log.info(
            "fenced writer of %s ready: transactional id %s (every earlier writer of it is fenced)",
            target.name,
            transactional_id,
        )

    def _line(self, timeout_s: float) -> list[str]:
        """The helper's next output line, split on tabs ([] at its end); KafkaUnavailable after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self._proc.kill()
                raise KafkaUnavailable(
                    f"{self.target.name}: the fenced writer (Kafka's Java producer, transactional "
                    f"id {self.transactional_id}) did not answer within {timeout_s:.0f} s"
                )
            ready, _w, _x = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return []
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode().split("\t")

    def _failure(self, f: list[str], doing: str) -> Exception:
        if f and f[0] == "FENCED":
            return Fenced(
                f"a newer writer of target cluster {self.target.name} took its transactional id "
                f"{self.transactional_id} while this one was {doing} ({unb64(f[1])}): this writer lost the "
                "target's lock; nothing of this batch was committed, and nothing more will be. Re-run the "
                "task: it converges to the plan (apply writes only what differs)."
            )
        why = unb64(f[1]) if len(f) > 1 else self._stderr_tail()
        if "InvalidTxnTimeout" in why or "transaction.max.timeout.ms" in why:
            return KafkaConfigError(
                f"{self.target.name}: the lease's fenced writer could not take transactional id "
                f"{self.transactional_id}: its transactions time out with the lease ({self._timeout_ms / 1000:g} s), "
                f"longer than the target's brokers allow ({why}). Lower MM2_FAILOVER_LOCK_LEASE_SECONDS below the "
                "brokers' transaction.max.timeout.ms (900 s unless changed), or raise that"
            )
        if "TransactionalIdAuthorization" in why:
            need = phrase("Write", "TransactionalId", self.transactional_id)
            return KafkaAuthError(
                f"{self.target.name}: {doing} as the lease's fenced writer was refused ({why}). The "
                f"connection's principal needs {need} (docs/reference.md, Least-privilege ACLs, row 14)"
            )
        return KafkaUnavailable(
            f"{self.target.name}: the fenced writer (transactional id {self.transactional_id}) "
            f"failed while {doing}: {why}"
        )

    def _stderr_tail(self) -> str:
        try:
            self._proc.wait(10)
            self._stderr.seek(0)
            return (
                " | ".join(self._stderr.read().decode(errors="replace").strip().splitlines()[-5:])
                or f"exit {self._proc.returncode}"
            )
        except (subprocess.TimeoutExpired, OSError, ValueError):
            return "no answer"

    def commit(self, offsets: dict[str, dict[TP, "int | Commit"]]) -> dict[str, str | None]:
        """Commit every group's offsets (in transactions of this writer's epoch). Returns group -> error text (None:
        committed). :class:`Fenced` if a newer writer took the id: then nothing of this call was committed."""
        if not offsets:
            return {}
        with self._lock:
            try:
                self._proc.stdin.write("".join(line + "\n" for line in commit_lines(offsets)).encode() + b"COMMIT\n")
                self._proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                raise self._failure(self._line(self.target.timeout), "committing") from None
            out: dict[str, str | None] = {}
            while True:
                f = self._line(self.target.timeout * (2 + len(offsets) / 100))
                if f == ["DONE"]:
                    break
                if f and f[0] == "OK":
                    out[unb64(f[1])] = None
                elif f and f[0] == "ERR":
                    out[unb64(f[1])] = unb64(f[2])
                else:
                    raise self._failure(f, "committing")
        missing = sorted(set(offsets) - set(out))
        if missing:
            raise KafkaUnavailable(f"{self.target.name}: the fenced writer did not answer for {', '.join(missing[:5])}")
        return out

    def close(self) -> None:
        """End the helper (its producer closes; nothing is open between batches)."""
        p = self._proc
        try:
            if p.stdin and not p.stdin.closed:
                p.stdin.close()
            p.wait(self.target.timeout + 5)
        except (OSError, subprocess.TimeoutExpired):
            p.kill()
            p.wait(5)
        finally:
            self._stderr.close()
