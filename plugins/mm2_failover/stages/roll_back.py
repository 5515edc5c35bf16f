"""Rollback: restore exactly what a failover's backup saved (the rules: :mod:`mm2_failover.rules.rollback`)."""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mm2_failover.adapters import faults
from mm2_failover.adapters.config import artifacts_root, run_dir
from mm2_failover.adapters.kafka.cluster import Cluster
from mm2_failover.adapters.kafka.kafka_errors import KafkaConfigError
from mm2_failover.adapters.kafka_lock import LockLost
from mm2_failover.adapters.runfolder import RunFolder, now_iso, read_json, write_json
from mm2_failover.rules import rollback as rb
from mm2_failover.rules.rollback import Backup
from mm2_failover.rules.values import Commit
from mm2_failover.stages.apply import ApplyResult, HeldLock

log = logging.getLogger(__name__)

CHUNK = 1000  # groups deleted (where needed) and then re-committed together


class RollbackRefused(RuntimeError):
    """The target's commits moved since the failover; a forced rollback would overwrite them."""


def backup_path_of(backup_path: str | None, failover_run_id: str | None) -> Path:
    """The backup a rollback restores: ``backup_path``, or the backup of the mm2_failover run ``failover_run_id``."""
    if backup_path:
        return Path(backup_path)
    if failover_run_id:
        return RunFolder(run_dir("mm2_failover", failover_run_id)).backup
    raise ValueError("give failover_run_id (the mm2_failover run to undo) or backup_path")


def check_backup_cluster(target: Cluster, backup: Backup, path) -> None:
    """Rollback rule 2: a backup is restored only on the cluster it was taken on."""
    if not backup.cluster_id:
        raise KafkaConfigError(f"backup {path} has no cluster id: it was not written by apply_group_offsets")
    here = target.cluster_id()
    if here != backup.cluster_id:
        raise KafkaConfigError(
            f"backup {path} was taken on cluster {backup.cluster_id} ({backup.cluster}), but the "
            f"target is cluster {here} ({target.conf.get('bootstrap.servers')}): nothing was "
            "written. Point the rollback at the cluster the failover wrote to."
        )


def pending_elsewhere(root: Path, backup: Backup) -> list[dict]:
    """Rollback rule 6 (:mod:`mm2_failover.rules.rollback`): the other backups of the same target whose journals still hold groups to re-commit (each as its
    pointer record, with ``groups``: how many)."""
    mine = rb.journal_dir(root, backup)
    out = []
    if not mine.parent.is_dir():
        return out
    for d in sorted(mine.parent.iterdir()):
        if d == mine or not d.is_dir():
            continue
        groups = [f for f in d.iterdir() if f.name.endswith(".json") and f.name != rb.POINTER]
        if groups:
            try:
                rec = json.loads((d / rb.POINTER).read_text())
            except (OSError, ValueError):
                rec = {"journal": str(d)}
            out.append({**rec, "journal": str(d), "groups": len(groups)})
    return out


def journal_dir(backup: Backup) -> Path:
    """Where ``backup``'s rollback journals live, for every entry point (rollback rule 6)."""
    return rb.journal_dir(artifacts_root(), backup)


def rollback(
    target: Cluster, backup: Backup, concurrency: int, force: bool = False, backup_path: str = "backup", held=None
) -> ApplyResult:
    """Restore exactly the commits ``backup`` saved, on the partitions the failover wrote (see
    :mod:`mm2_failover.rules.rollback` for the rules). Idempotent; refused groups are reported and the others proceed.
    Raises RollbackRefused when commits moved since the failover (unless ``force``), or while another backup's
    journal is pending on the same target. ``held``: the writer lock (:class:`mm2_failover.stages.apply.HeldLock`),
    checked before each group's writes (a writer that lost the target's lease writes nothing more: the error ends the
    rollback) and committing them (under the lease: fenced; a group's delete, which Kafka cannot fence, is only
    checked)."""
    check_backup_cluster(target, backup, backup_path)
    others = pending_elsewhere(artifacts_root(), backup)
    if others:
        raise RollbackRefused(
            "another rollback on this target was interrupted and its journal is pending: "
            + "; ".join(
                f"backup {o.get('backup_path', '?')} ({o['groups']} group(s) deleted and not re-committed yet; "
                f"journal {o['journal']})"
                for o in others
            )
            + ". Nothing was written. Finish that rollback first (run it again with that backup: it resumes from its "
            "journal), then this one."
        )
    groups = sorted(backup.groups)
    jdir = journal_dir(backup)
    journals = {g: jdir / rb.journal_name(g) for g in groups}
    resuming = {g for g, j in journals.items() if j.exists()}
    current = target.commits_many(groups, concurrency)
    moved = rb.moved_since_failover(backup, current, skip=resuming)
    if moved and not force:
        raise RollbackRefused(
            f"{len(moved)} partition(s) were committed on the target since the failover: {rb.describe_moved(moved)}. "
            "Nothing was written. A rollback would rewind these consumers; stop them and roll back with --force "
            "(DAG: force=true) if that is what you want."
        )
    if moved:
        log.warning("forced rollback overwrites commits made since the failover: %s", rb.describe_moved(moved))
    todo = rb.actions(backup, current)
    res = ApplyResult(unchanged=[g for g in groups if g not in todo and g not in resuming])

    held = held if held is not None else HeldLock({})

    def prepare(group: str):
        """The group's re-commit, after its delete where one is needed (journal first: rollback rule 6)."""
        journal = journals[group]
        held.check()
        try:
            if journal.exists():  # a previous attempt saw the group before deleting it: finish what it started
                rec = read_json(journal, "rollback journal")
                recommit = {(t, int(p)): Commit(int(o), m or "") for t, p, o, m in rec["recommit"]}
                target.delete_group(group, missing_ok=True)
                faults.hit("rollback.after_delete_group")
            elif todo[group].needs_delete:
                recommit = rb.recommit_after_delete(backup, group, current.get(group, {}))
                write_json(
                    journal,
                    {
                        "group": group,
                        "written_at": now_iso(),
                        "recommit": [[t, p, c.offset, c.metadata] for (t, p), c in sorted(recommit.items())],
                    },
                )
                faults.hit("rollback.after_journal")
                target.delete_group(group, missing_ok=True)
                faults.hit("rollback.after_delete_group")
            else:
                recommit = todo[group].restore
        except LockLost:
            raise  # this writer may write no more: nothing else is tried
        except Exception as e:  # noqa: BLE001 - reported per group; the others proceed
            return group, None, f"{type(e).__name__}: {e}"
        return group, recommit, None

    def commit(ready: dict) -> dict[str, str | None]:
        """The chunk's re-commits in one call (under the lease: one fenced transaction, not one per group)."""
        todo_now = {g: r for g, r in ready.items() if r}
        if not todo_now:
            return {}
        held.check()  # the groups' second write (after their deletes): checked again
        try:
            return held.commit(target, todo_now, window=concurrency)
        except LockLost:
            raise
        except Exception as e:  # noqa: BLE001 - reported per group, as the group's own refusal would be
            return {g: f"{type(e).__name__}: {e}" for g in todo_now}

    jdir.mkdir(parents=True, exist_ok=True)
    pointer = jdir / rb.POINTER
    if not pointer.exists():
        write_json(
            pointer,
            {
                "backup_path": str(backup_path),
                "dag_id": backup.dag_id,
                "run_id": backup.run_id,
                "taken_at": backup.taken_at,
            },
        )
    names = sorted(set(todo) | resuming)
    with ThreadPoolExecutor(max(1, concurrency)) as pool:
        for i in range(0, len(names), CHUNK):  # a group stays deleted at most one chunk's time before its re-commit
            ready = {}
            for group, recommit, err in pool.map(prepare, names[i : i + CHUNK]):
                if err:
                    res.refused[group] = err
                    log.error("group %s NOT rolled back: %s", group, err)
                else:
                    ready[group] = recommit
            errors = commit(ready)
            for group, recommit in ready.items():
                if errors.get(group):
                    res.refused[group] = errors[group]
                    log.error("group %s NOT rolled back: %s", group, errors[group])
                else:
                    journals[group].unlink(missing_ok=True)
                    res.applied[group] = len(recommit)
    return res


def verify_rollback(target: Cluster, backup: Backup, concurrency: int = 32) -> list[str]:
    return rb.remaining(backup, target.commits_many(sorted(backup.groups), concurrency))
