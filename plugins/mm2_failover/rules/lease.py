"""One writer per target cluster across hosts (pure): a lease kept as records in a topic of the target cluster itself
- the one service every writer must reach wherever it runs. :mod:`mm2_failover.adapters.kafka_lock` reads and writes the
records; this module decides, from the records alone, who holds the lease, and when a holder must stop writing.

Every record of one lock (one key: the target cluster's id) says what a writer asked: ``claim`` (take the lease for
``lease_ms``), ``renew`` (extend it) or ``release``. Its time is the **broker's** (the topic's
``message.timestamp.type=LogAppendTime``), and its place in the log is the order everyone agrees on, so every reader
of the same records reaches the same answer - no client clock is compared with another.

The rules:

1. **Claim.** A claim is granted iff nobody holds the lease at the claim's time (never held, released, or its lease
   ran out: ``expires_ms <= ts``); otherwise it is ignored (the claimant lost and waits). A claim by the holder
   itself renews.
2. **Renew.** A renew is granted iff its writer holds the lease, its time is before the lease ran out, and the
   holder has held it for less than :data:`MAX_HOLD_MS` (no writer holds a target forever: a failover's apply has
   an hour). Granted: the lease runs ``lease_ms`` from the renew's time. A renew that comes too late is ignored: the
   lease is lost, and another claim may already have been granted.
3. **Release.** A release by the holder frees the lease at once; by anyone else it is ignored.
4. **Holder's stop** (:func:`valid_until`, the fencing): a holder measures its lease on its own monotonic clock from
   the moment *before it sent* the granted claim or renew, and stops writing ``margin`` before ``lease_ms`` have
   passed. The broker stamped that record later than it was sent, so on the broker's clock the lease runs until at
   least ``sent + lease_ms``: the holder stops at least ``margin`` before any other claim can be granted. ``margin``
   must exceed one write's longest duration (its request timeout), so that a write begun in time has ended before
   another writer may begin. A holder that cannot renew (the broker unreachable, the process paused) stops when its
   time runs out; a holder that learns its renew was not granted stops at once.
5. **Bounded release of a dead holder.** A holder that dies stops renewing: its lease runs out ``lease_ms`` after
   its last granted record, and the next claim after that is granted.
6. **The topic's history.** Records older than the topic's retention (7 days) are gone; the replay starts with
   nobody holding the lease. Every lease ends within :data:`MAX_HOLD_MS` + ``lease_ms`` of its claim, so a lease
   granted before the oldest record kept has ended long ago - provided the topic keeps every record at least that
   long (:func:`topic_problems`): a compacted topic keeps only the newest record of the one key, and a shorter
   retention drops a holder's claim while it still renews; either way the replay forgets the holder and grants a
   second writer's claim.
"""

from __future__ import annotations

from dataclasses import dataclass

CLAIM, RENEW, RELEASE = "claim", "renew", "release"
OPS = (CLAIM, RENEW, RELEASE)
MAX_HOLD_MS = 6 * 3600 * 1000


@dataclass(frozen=True)
class Record:
    """One record of the lock's key: what ``holder`` (unique per acquisition) asked, at the broker's ``ts_ms``."""

    op: str
    holder: str
    ts_ms: int
    lease_ms: int = 0
    offset: int = -1  # its place in the log (the token of a granted claim)
    who: dict | None = None  # run, task, host, pid: for the messages


@dataclass(frozen=True)
class State:
    """After a replay: who holds the lease (None: nobody), since when, until when (broker time), and the offset of
    the claim that granted it (the fencing token, in logs and messages)."""

    holder: str | None = None
    since_ms: int = 0
    expires_ms: int = 0
    token: int = -1
    who: dict | None = None

    def held_at(self, ts_ms: int) -> bool:
        return self.holder is not None and ts_ms < self.expires_ms


def step(s: State, r: Record) -> tuple[State, bool]:
    """Rules 1-3: the state after record ``r``, and whether ``r`` was granted."""
    if r.op == CLAIM:
        if s.held_at(r.ts_ms) and s.holder != r.holder:
            return s, False
        if s.held_at(r.ts_ms):  # the holder claiming again: a renew
            return step(s, Record(RENEW, r.holder, r.ts_ms, r.lease_ms, r.offset, r.who))
        return State(r.holder, r.ts_ms, r.ts_ms + r.lease_ms, r.offset, r.who), True
    if r.op == RENEW:
        if s.holder != r.holder or not s.held_at(r.ts_ms) or r.ts_ms - s.since_ms >= MAX_HOLD_MS:
            return s, False
        return State(s.holder, s.since_ms, r.ts_ms + r.lease_ms, s.token, s.who), True
    if r.op == RELEASE:
        if s.holder != r.holder:
            return s, False
        return State(None, 0, r.ts_ms, -1, None), True
    return s, False  # an unknown op (a newer writer's): ignored


def replay(records: list[Record]) -> tuple[State, dict[int, bool]]:
    """Rules 1-3 and 6 over the records in log order: the final state, and for each record's offset whether it
    was granted."""
    s, granted = State(), {}
    for r in records:
        s, ok = step(s, r)
        granted[r.offset] = ok
    return s, granted


def topic_problems(config: dict[str, str], lease_ms: int) -> list[str]:
    """Rule 6's premises on the lock topic's configuration (every setting as the broker describes it): the broker's
    time on every record, deletion only by age, and an age that holds the longest hold plus a lease. Each problem
    names the setting, its value, what it must be and why (empty: none)."""
    out = []
    ts = config.get("message.timestamp.type", "")
    if ts != "LogAppendTime":
        out.append(
            f"message.timestamp.type={ts}: the lease needs the broker's time on every record (set "
            "message.timestamp.type=LogAppendTime)"
        )
    policy = config.get("cleanup.policy", "")
    if policy != "delete":
        out.append(
            f"cleanup.policy={policy}: compaction keeps only the newest record of the lock's one key, so a "
            "holder's claim is forgotten while it renews and a second writer's claim is granted (set "
            "cleanup.policy=delete)"
        )
    need = MAX_HOLD_MS + lease_ms
    try:
        retention = int(config.get("retention.ms", ""))
    except ValueError:
        retention = None
    if retention is None or (retention != -1 and retention < need):
        out.append(
            f"retention.ms={config.get('retention.ms', '')}: records younger than the longest hold plus a "
            f"lease ({need} ms) must be kept, or a holder's claim is dropped while it renews (set "
            "retention.ms=604800000, 7 days)"
        )
    if config.get("retention.bytes", "-1") != "-1":
        out.append(
            f"retention.bytes={config.get('retention.bytes')}: deletion by size can drop a holder's claim "
            "while it renews; the lock's records are small and few (set retention.bytes=-1)"
        )
    return out


def valid_until(sent_monotonic: float, lease_ms: int, margin_s: float) -> float:
    """Rule 4: the holder's own deadline for its next write, on its monotonic clock."""
    return sent_monotonic + lease_ms / 1000.0 - margin_s


def check_timing(lease_s: float, margin_s: float, renew_s: float, write_timeout_s: float) -> None:
    """The settings rule 4 needs; a ValueError naming what to change."""
    if not (0 < renew_s < lease_s - margin_s):
        raise ValueError(
            f"the lease's renew interval ({renew_s:g} s) must be above 0 and below the lease "
            f"({lease_s:g} s) minus its margin ({margin_s:g} s), or the holder stops between renewals"
        )
    if margin_s <= write_timeout_s:
        raise ValueError(
            f"the lease's margin ({margin_s:g} s) must exceed one write's timeout "
            f"({write_timeout_s:g} s): a write begun in time must end before another writer may begin"
        )
