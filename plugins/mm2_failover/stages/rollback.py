"""Rollback: restore exactly what a failover's backup saved (the rules: :mod:`mm2_failover.rollback`)."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mm2_failover import faults
from mm2_failover import rollback as rb
from mm2_failover.kafka_io import Cluster, Commit, KafkaConfigError
from mm2_failover.rollback import Backup
from mm2_failover.runfolder import RunFolder, now_iso, read_json, write_json
from mm2_failover.stages.apply import ApplyResult

log = logging.getLogger(__name__)


class RollbackRefused(RuntimeError):
    """The target's commits moved since the failover; a forced rollback would overwrite them."""


def backup_path_of(backup_path: str | None, failover_run_id: str | None) -> Path:
    """The backup a rollback restores: ``backup_path``, or the backup of the mm2_failover run ``failover_run_id``."""
    from mm2_failover.config import run_dir

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
        raise KafkaConfigError(f"backup {path} was taken on cluster {backup.cluster_id} ({backup.cluster}), but the "
                               f"target is cluster {here} ({target.conf.get('bootstrap.servers')}): nothing was "
                               "written. Point the rollback at the cluster the failover wrote to.")


def journal_dir(backup: Backup) -> Path:
    """Where ``backup``'s rollback journals live, for every entry point (rollback rule 6)."""
    from mm2_failover.config import artifacts_root

    return rb.journal_dir(artifacts_root(), backup)


def rollback(target: Cluster, backup: Backup, concurrency: int, force: bool = False,
             backup_path: str = "backup", check=None) -> ApplyResult:
    """Restore exactly the commits ``backup`` saved, on the partitions the failover wrote (see
    :mod:`mm2_failover.rollback` for the rules). Idempotent; refused groups are reported and the others proceed.
    Raises RollbackRefused when commits moved since the failover (unless ``force``), or while another backup's
    journal is pending on the same target. ``check``: the writer lock's, called before each
    group's writes (a writer that lost the target's lease writes nothing more: the error ends the rollback)."""
    from mm2_failover.config import artifacts_root

    check_backup_cluster(target, backup, backup_path)
    others = rb.pending_elsewhere(artifacts_root(), backup)
    if others:
        raise RollbackRefused(
            "another rollback on this target was interrupted and its journal is pending: "
            + "; ".join(f"backup {o.get('backup_path', '?')} ({o['groups']} group(s) deleted and not re-committed yet; "
                        f"journal {o['journal']})" for o in others)
            + ". Nothing was written. Finish that rollback first (run it again with that backup: it resumes from its "
            "journal), then this one.")
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
            "(DAG: force=true) if that is what you want.")
    if moved:
        log.warning("forced rollback overwrites commits made since the failover: %s", rb.describe_moved(moved))
    todo = rb.actions(backup, current)
    res = ApplyResult(unchanged=[g for g in groups if g not in todo and g not in resuming])

    def one(group: str):
        journal = journals[group]
        if check is not None:
            check()
        try:
            if journal.exists():  # a previous attempt saw the group before deleting it: finish what it started
                rec = read_json(journal, "rollback journal")
                recommit = {(t, int(p)): Commit(int(o), m or "") for t, p, o, m in rec["recommit"]}
                target.delete_group(group, missing_ok=True)
                faults.hit("rollback.after_delete_group")
            elif todo[group].needs_delete:
                recommit = rb.recommit_after_delete(backup, group, current.get(group, {}))
                write_json(journal, {"group": group, "written_at": now_iso(),
                                     "recommit": [[t, p, c.offset, c.metadata] for (t, p), c in sorted(recommit.items())]})
                faults.hit("rollback.after_journal")
                target.delete_group(group, missing_ok=True)
                faults.hit("rollback.after_delete_group")
            else:
                recommit = todo[group].restore
            if recommit:
                if check is not None:
                    check()  # a second write of the group (after its delete): checked again
                errs = {tp: e for tp, e in target.alter_offsets(group, recommit).items() if e}
                if errs:
                    return group, None, f"partition errors: {errs}"
            journal.unlink(missing_ok=True)
        except Exception as e:  # noqa: BLE001 - reported per group; the others proceed
            return group, None, f"{type(e).__name__}: {e}"
        return group, len(recommit), None

    jdir.mkdir(parents=True, exist_ok=True)
    pointer = jdir / rb.POINTER
    if not pointer.exists():
        write_json(pointer, {"backup_path": str(backup_path), "dag_id": backup.dag_id, "run_id": backup.run_id,
                             "taken_at": backup.taken_at})
    with ThreadPoolExecutor(max(1, concurrency)) as pool:
        for group, n, err in pool.map(one, sorted(set(todo) | resuming)):
            if err:
                res.refused[group] = err
                log.error("group %s NOT rolled back: %s", group, err)
            else:
                res.applied[group] = n
    return res


def verify_rollback(target: Cluster, backup: Backup, concurrency: int = 32) -> list[str]:
    return rb.remaining(backup, target.commits_many(sorted(backup.groups), concurrency))
