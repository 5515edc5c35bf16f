"""Rollback rules (pure): undo exactly what a failover wrote, and nothing else.

1. **Scope** - the backup holds only the partitions apply wrote (their commit before and the commit written); a
   rollback touches those and nothing else (a group the run skipped is never rewound).
2. **Same cluster** - a backup taken on another cluster (cluster id) is refused.
3. **Nothing moved since** - when a partition's commit is neither what the failover wrote nor what was there
   before (a consumer committed on the target since), the rollback is refused naming each difference, unless
   forced.
4. **Restore** - a partition that had a commit gets it back (offset and metadata); a partition that had none must
   lose its commit. Kafka does that with OffsetDelete, which confluent-kafka does not offer: the (empty) group is
   deleted and re-committed with every commit it must keep - its backed-up commits and its current commits
   outside the backup (:func:`recommit_after_delete`).
5. **Journal first** - that re-commit list is written to a journal (named by a hash of the group id) before the
   delete; a retry that finds a journal resumes from it (the group may already be gone) and rule 3 does not apply
   to it. The journal is removed once the re-commit succeeded.
6. **One journal per backup** - the journals of a backup live in one folder keyed on the backup's content and the
   target cluster (:func:`journal_dir`), whoever rolls back (the DAG, the CLI, a retry, a new run): a rollback that
   another entry point started is finished from the same journal. A rollback is refused while another backup's
   journal is pending on the same target (:func:`mm2_failover.stages.roll_back.pending_elsewhere`): finish that one first.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from mm2_failover.rules.values import TP, Commit, commit_from_json, commit_to_json, tp_map_from_json, tp_map_to_json
from mm2_failover.rules.words import listed


@dataclass
class BackupEntry:
    before: Commit | None  # the commit before the run (None: the group had none on this partition)
    after: Commit  # what apply wrote


@dataclass
class Backup:
    """What apply overwrote, per partition it wrote: the only undo record. Taken before the first write, never
    replaced by a retry."""

    taken_at: str
    cluster: str  # bootstrap servers (for people)
    cluster_id: str  # the target's cluster id (checked by rollback)
    dag_id: str
    run_id: str
    groups: dict[str, dict[TP, BackupEntry]] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "taken_at": self.taken_at,
            "cluster": self.cluster,
            "cluster_id": self.cluster_id,
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "format": 2,
            "groups": {
                g: tp_map_to_json(
                    {
                        tp: {"before": commit_to_json(e.before), "after": commit_to_json(e.after)}
                        for tp, e in parts.items()
                    }
                )
                for g, parts in sorted(self.groups.items())
            },
        }

    @classmethod
    def from_dict(cls, d: Any, path: Any = "backup") -> "Backup":
        try:
            if not isinstance(d, dict) or not isinstance(d.get("groups"), dict):
                raise ValueError("it has no 'groups' object")
            groups = {}
            for g, topics in d["groups"].items():
                parts = {}
                for tp, e in tp_map_from_json(topics).items():
                    if not isinstance(e, dict) or "after" not in e:
                        raise ValueError(f"group {g!r} {tp[0]}[{tp[1]}]: expected {{before, after}}, got {e!r}")
                    parts[tp] = BackupEntry(commit_from_json(e["before"]), commit_from_json(e["after"]))
                groups[g] = parts
            return cls(
                str(d.get("taken_at", "")),
                str(d.get("cluster", "")),
                str(d.get("cluster_id", "")),
                str(d.get("dag_id", "")),
                str(d.get("run_id", "")),
                groups,
            )
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise ValueError(f"backup {path} is not a backup written by apply_group_offsets: {e}") from None


@dataclass
class GroupRollback:
    group: str
    restore: dict[TP, Commit] = field(default_factory=dict)  # partitions to commit again
    remove: list[TP] = field(default_factory=list)  # partitions that had no commit before

    @property
    def needs_delete(self) -> bool:
        return bool(self.remove)


def _same(a: Commit | None, b: Commit | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.same_as(b)


def actions(backup: Backup, current: dict[str, dict[TP, Commit]]) -> dict[str, GroupRollback]:
    """Rule 4: per group, what to restore and what to remove to get back to the backup (groups already there are
    absent)."""
    out = {}
    for g, parts in backup.groups.items():
        now = current.get(g, {})
        a = GroupRollback(g)
        for tp, e in sorted(parts.items()):
            if e.before is None:
                if tp in now:
                    a.remove.append(tp)
            elif not _same(now.get(tp), e.before):
                a.restore[tp] = e.before
        if a.restore or a.remove:
            out[g] = a
    return out


def moved_since_failover(
    backup: Backup, current: dict[str, dict[TP, Commit]], skip: set[str] = frozenset()
) -> list[tuple[str, TP, BackupEntry, Commit | None]]:
    """Rule 3: partitions whose commit is neither what the failover wrote nor what was there before."""
    out = []
    for g, parts in sorted(backup.groups.items()):
        if g in skip:
            continue
        now = current.get(g, {})
        for tp, e in sorted(parts.items()):
            got = now.get(tp)
            if not _same(got, e.after) and not _same(got, e.before):
                out.append((g, tp, e, got))
    return out


def describe_moved(moved) -> str:
    def c(x: Commit | None) -> str:
        return "no commit" if x is None else str(x.offset) + (f" ({x.metadata!r})" if x.metadata else "")

    return listed(
        (
            f"{g} {t}[{p}]: the failover wrote {c(e.after)}, now {c(got)} (before the failover: {c(e.before)})"
            for g, (t, p), e, got in moved
        ),
        sep="; ",
    )


def recommit_after_delete(backup: Backup, group: str, current: dict[TP, Commit]) -> dict[TP, Commit]:
    """Rule 4: what the group must hold after it was deleted: its commits outside the backup, as they are now, and
    its backed-up prior commits."""
    parts = backup.groups[group]
    keep = {tp: c for tp, c in current.items() if tp not in parts}
    return {**keep, **{tp: e.before for tp, e in parts.items() if e.before is not None}}


def remaining(backup: Backup, current: dict[str, dict[TP, Commit]]) -> list[str]:
    """What still differs from the backup (empty when the rollback is complete)."""
    return [f"{g}: restore {sorted(a.restore)}, remove {a.remove}" for g, a in sorted(actions(backup, current).items())]


JOURNALS = ".rollback-journals"
POINTER = "pointer.json"  # in each journal folder: which backup it belongs to (for people, and for the refusal)


def backup_key(backup: Backup) -> str:
    """The backup's identity: a hash of its content (the same backup read from any path has the same key)."""
    return hashlib.sha256(json.dumps(backup.as_dict(), sort_keys=True).encode()).hexdigest()[:32]


def journal_dir(root: Any, backup: Backup) -> Any:
    """Rule 6: the folder of ``backup``'s journals, under ``root`` (the artifacts folder, beside the writer locks: a
    ``Path`` or an object store's ``UPath``; the same kind is returned)."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in backup.cluster_id) or "unknown"
    return root.joinpath(JOURNALS, safe, backup_key(backup))


def journal_name(group: str) -> str:
    """The journal file of a group: a hash, so that no group id can leave the folder or overflow a file name."""
    return "group-" + hashlib.sha256(group.encode()).hexdigest()[:40] + ".json"
