"""Stage 6, backup and apply, under the target's writer lock: the backup once, then only what the target does not
hold yet and has not moved since (plan rule 5)."""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field

from mm2_failover.adapters import config, faults, locks
from mm2_failover.adapters.fenced import FencedWriter
from mm2_failover.adapters.kafka.cluster import Cluster
from mm2_failover.adapters.kafka_lock import KafkaLease
from mm2_failover.adapters.runfolder import APPLY, now_iso
from mm2_failover.rules import plan as planmod
from mm2_failover.rules.rollback import Backup, BackupEntry
from mm2_failover.rules.values import TP, Commit
from mm2_failover.stages.context import RunContext

log = logging.getLogger(__name__)

FENCED_BATCH = 500  # groups per lock check and per transaction under the lease


class HeldLock(dict):
    """What the ``with writer_lock(...)`` block gets: the holder's record, :meth:`check`, called before every
    write - a no-op under the file lock (the kernel never takes an ``flock`` from a live holder), and under the
    target's lease (``MM2_FAILOVER_LOCK=kafka``) :class:`mm2_failover.adapters.kafka_lock.LockLost` once this writer may no
    longer write - and :meth:`commit`, through which every offset commit of the block goes: the target's
    ``alter_many`` under the file lock, the lease's :class:`mm2_failover.adapters.fenced.FencedWriter` under the lease (a
    holder that lost the lease cannot commit even once: :class:`mm2_failover.adapters.fenced.Fenced`)."""

    def __init__(self, rec: dict, check=None, commit=None):
        super().__init__(rec)
        self._check = check
        self._commit = commit

    def commit(
        self, target: Cluster, offsets: dict[str, dict[TP, "int | Commit"]], window: int = 32
    ) -> dict[str, str | None]:
        """Commit every group's offsets on ``target``: group -> error text (None: committed)."""
        if self._commit is not None:
            return self._commit(offsets)
        return target.alter_many(offsets, window=window)

    @property
    def fenced(self) -> bool:
        """Whether this lock can be lost while held (the lease) - then every batch of writes is checked."""
        return self._check is not None

    def check(self) -> None:
        if self._check is not None:
            self._check()


@contextlib.contextmanager
def writer_lock(ctx_or_target, what: str, wait_s: float, run: str = ""):
    """Hold the target cluster's writer lock while writing offsets: the file lock (:mod:`mm2_failover.adapters.locks`) or the
    lease in the target itself (:mod:`mm2_failover.adapters.kafka_lock`), as ``MM2_FAILOVER_LOCK`` says
    (:class:`mm2_failover.adapters.config.WriterLockSettings`). Yields a :class:`HeldLock`."""
    target = ctx_or_target.target if isinstance(ctx_or_target, RunContext) else ctx_or_target
    run = run or (f"{ctx_or_target.dag_id}/{ctx_or_target.run_id}" if isinstance(ctx_or_target, RunContext) else "")
    owner = {"writer": what, "run": run}
    settings = config.WriterLockSettings.from_env()
    if settings.kind == "file":
        with locks.writer_lock(config.artifacts_root(), target.cluster_id(), owner, wait_s) as rec:
            yield HeldLock(rec)
        return
    held = KafkaLease(
        target.conf,
        settings.topic,
        target.cluster_id(),
        owner,
        settings.lease_s,
        settings.margin_s,
        settings.renew_s,
        write_timeout_s=float(target.timeout),
    )
    rec = held.acquire(wait_s)
    try:
        # granted: take the target's transactional id before reading anything to decide on (every earlier holder's
        # open transaction is aborted, and its later commits refused)
        writer = FencedWriter(target, settings.transactional_id(target.cluster_id()), int(settings.lease_s * 1000))
        try:
            yield HeldLock(rec, held.check, writer.commit)
        finally:
            writer.close()
    finally:
        held.release()


def take_backup(ctx: RunContext, plan: planmod.Plan, planned: dict[str, dict[TP, Commit]] | None = None) -> Backup:
    """Store, for every partition apply will write, the target's commit before the run (or none) and the commit
    apply writes. Taken before the first write; never replaced (a retry keeps the state from before the run).
    ``planned``: ``plan.commits()`` when the caller has it."""
    f = ctx.folder
    existing = f.load_backup()
    if existing is not None:
        return existing
    writes = plan.commits() if planned is None else planned
    current = ctx.target.commits_many(sorted(writes), ctx.params.apply_concurrency)
    backup = Backup(
        now_iso(),
        str(ctx.target.conf.get("bootstrap.servers")),
        ctx.target.cluster_id(),
        ctx.dag_id,
        ctx.run_id,
        {g: {tp: BackupEntry(current.get(g, {}).get(tp), c) for tp, c in parts.items()} for g, parts in writes.items()},
    )
    f.save_backup(backup)
    return backup


@dataclass
class ApplyResult:
    applied: dict[str, int] = field(default_factory=dict)  # group -> partitions written now
    unchanged: list[str] = field(default_factory=list)  # groups that already held the plan
    refused: dict[str, str] = field(default_factory=dict)  # group -> broker's error
    moved_since: dict[str, list[str]] = field(default_factory=dict)  # group -> partitions committed since (plan rule 5)

    def as_dict(self) -> dict:
        return {
            "applied": self.applied,
            "unchanged": self.unchanged,
            "refused": self.refused,
            "moved_since": self.moved_since,
        }


def befores(backup: Backup) -> dict[str, dict[TP, Commit | None]]:
    return {g: {tp: e.before for tp, e in parts.items()} for g, parts in backup.groups.items()}


def describe_moved(
    moved: dict, plan: planmod.Plan, planned: dict[str, dict[TP, Commit]] | None = None
) -> dict[str, list[str]]:
    if not moved:
        return {}
    want = plan.commits() if planned is None else planned

    def show(c) -> str:
        return "none" if c is None else str(c.offset if isinstance(c, Commit) else c)

    return {
        g: [
            f"{t}[{p}]: was {show(was)} before the run, planned {want[g][(t, p)].offset}, now {show(now)}"
            for (t, p), (was, now) in sorted(parts.items())
        ]
        for g, parts in sorted(moved.items())
    }


def as_read(backup: Backup) -> dict[str, dict[TP, Commit]]:
    """The backup's ``before`` commits in the shape of :meth:`Cluster.commits_many` (a partition with none left out):
    what the target held on the planned partitions when the backup read it."""
    return {g: {tp: c for tp, c in parts.items() if c is not None} for g, parts in befores(backup).items()}


def apply_plan(
    target: Cluster,
    plan: planmod.Plan,
    concurrency: int = 32,
    backup: Backup | None = None,
    held: HeldLock | None = None,
    current: dict[str, dict[TP, Commit]] | None = None,
    planned: dict[str, dict[TP, Commit]] | None = None,
) -> ApplyResult:
    """One ``alter_consumer_group_offsets`` request per group, ``concurrency`` at a time. Writes only what
    differs from the target's current commits (offset and metadata), and, given the run's ``backup``, never a
    partition committed since the backup (plan rule 5: reported in ``moved_since``); a refused group does not stop
    the others. ``held``: the writer lock, whose :meth:`HeldLock.check` runs before every batch of writes (under the
    lease: a writer that lost it writes nothing more) and whose :meth:`HeldLock.commit` writes them (under the lease:
    fenced). ``current``: the target's commits on the planned partitions
    as read just before (:func:`as_read` of a backup taken in this same try, under the same lock), else read here.
    ``planned``: ``plan.commits()`` when the caller has it."""
    planned = plan.commits() if planned is None else planned
    groups = sorted(planned)
    if current is None:
        current = target.commits_many(groups, concurrency)
    before = None if backup is None else befores(backup)
    todo = planmod.diff_to_apply(plan, current, before, planned)
    moved = (
        describe_moved(planmod.moved_since(plan, current, before, planned), plan, planned) if before is not None else {}
    )
    for g, what in moved.items():
        log.warning(
            "group %s: NOT rewritten, committed on the target since this run's backup (its consumers read there): %s",
            g,
            "; ".join(what),
        )
    res = ApplyResult(unchanged=[g for g in groups if g not in todo and g not in moved], moved_since=moved)
    t0, done = time.monotonic(), 0
    held = held if held is not None else HeldLock({})
    # under the lease: the lock checked before each batch, and each batch one fenced transaction (~0.1 s each, and
    # ~1 ms per group inside it: docs/architecture.md, "One writer across hosts")
    batch = FENCED_BATCH if held.fenced else 1000
    names = sorted(todo)
    for i in range(0, len(names), batch):
        chunk = names[i : i + batch]
        held.check()
        faults.hit("apply.before_commit")  # drills: a writer paused after its check, before its request is sent
        for group, err in held.commit(target, {g: todo[g] for g in chunk}, window=concurrency).items():
            if err:
                res.refused[group] = err
                log.error("group %s NOT moved: %s", group, err)
            else:
                res.applied[group] = len(todo[group])
        done += len(chunk)
        if done // 1000 > (done - len(chunk)) // 1000 or done == len(names):
            log.info(
                "apply progress: %d/%d group(s), %d refused, %.1f s",
                done,
                len(names),
                len(res.refused),
                time.monotonic() - t0,
            )
    return res


def backup_and_apply(ctx: RunContext, plan: planmod.Plan) -> ApplyResult:
    """Under the target's writer lock: the backup (once), then apply, then the result in ``apply.json``."""
    with writer_lock(ctx, "failover apply", ctx.params.lock_wait_seconds) as held:
        faults.hit("apply.locked")
        fresh = not ctx.folder.backup.exists()
        planned = plan.commits()  # once: each rule below needs it (0.15 s at 100k rows)
        backup = take_backup(ctx, plan, planned)
        log.info(
            "backup of the target's commits before this run: %s (rollback restores exactly this)", ctx.folder.backup
        )
        faults.hit("apply.after_backup")
        # a backup taken just now read the target's commits under this lock: apply starts from that read (one
        # read of every group less: ~3 s at 10k groups); a retry's backup is older, so a retry reads them again
        res = apply_plan(
            ctx.target,
            plan,
            ctx.params.apply_concurrency,
            backup,
            held=held,
            current=as_read(backup) if fresh else None,
            planned=planned,
        )
        faults.hit("apply.after_commits")  # drills: killed between apply and verify
        ctx.folder.save(APPLY, res.as_dict())
    log.info(
        "applied: %d group(s) written, %d already as planned, %d refused",
        len(res.applied),
        len(res.unchanged),
        len(res.refused),
    )
    return res
