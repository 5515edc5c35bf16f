"""The pipeline's steps as plain functions: the Airflow tasks and the CLI call exactly these.

Each step reads and writes the run's artifacts folder (see :class:`RunArtifacts`) so that a retry or a re-run
of a step converges: the snapshot is captured once, the plan is built once, the backup is taken before the
first write and never replaced, and apply writes only what the target does not hold yet.
"""

from __future__ import annotations

import json
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from mm2_failover import plan as planmod
from mm2_failover import report as reportmod
from mm2_failover.config import RunParams
from mm2_failover.kafka_io import TP, Cluster, GroupState, KafkaUnavailable
from mm2_failover.naming import (
    compile_regex,
    group_selected,
    is_internal_topic,
    source_alias_of_checkpoints_topic,
)

log = logging.getLogger(__name__)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
    os.replace(tmp, path)  # atomic: a crash never leaves half a file


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def tp_map_to_json(m: dict[TP, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (t, p), o in sorted(m.items()):
        out.setdefault(t, {})[str(p)] = o
    return out


def tp_map_from_json(d: dict[str, dict[str, int]]) -> dict[TP, int]:
    return {(t, int(p)): o for t, parts in d.items() for p, o in parts.items()}


@dataclass(frozen=True)
class RunArtifacts:
    """The files of one run. Local paths: the Spark job's output must be readable here too."""

    dir: Path

    @property
    def snapshot(self) -> Path:
        return self.dir / "snapshot.json"

    @property
    def checkpoints(self) -> Path:
        return self.dir / "latest_checkpoints.parquet"

    @property
    def checkpoints_summary(self) -> Path:
        return self.dir / "latest_checkpoints.summary.json"

    @property
    def plan_json(self) -> Path:
        return self.dir / "plan.json"

    @property
    def plan_csv(self) -> Path:
        return self.dir / "plan.csv"

    @property
    def backup(self) -> Path:
        return self.dir / "backup.json"

    @property
    def apply_result(self) -> Path:
        return self.dir / "apply.json"

    @property
    def report_json(self) -> Path:
        return self.dir / "report.json"

    @property
    def report_md(self) -> Path:
        return self.dir / "report.md"


# ------------------------------------------------------------------------------------------ 1. drain


def selected_groups(cluster: Cluster, params: RunParams) -> list[str]:
    inc = compile_regex(params.groups_regex, "groups_regex")
    exc = compile_regex(params.groups_exclude_regex, "groups_exclude_regex") if params.groups_exclude_regex else None
    return [g for g in cluster.groups() if group_selected(g, inc, exc)]


def topics_in_scope(source: Cluster, groups: list[str]) -> list[str]:
    """The source topics the selected groups consume (their committed offsets on the source)."""
    topics: set[str] = set()
    for g in groups:
        topics.update(t for t, _ in source.committed(g))
    return sorted(t for t in topics if not is_internal_topic(t))


def connect_source(source: Cluster | None, params: RunParams) -> Cluster | None:
    """The source cluster, or None in disaster mode (``source_reachable``: detect | yes | no)."""
    if source is None or params.source_reachable == "no":
        return None
    try:
        source.topics()
        return source
    except KafkaUnavailable as e:
        if params.source_reachable == "yes":
            raise
        log.warning("WARNING: DISASTER MODE - the source cluster is not reachable (%s). Source-side checks are "
                    "skipped; only target-side evidence is used.", e)
        return None


def mm2_progress(target: Cluster, alias: str, topic: str | None = None) -> dict[TP, int] | None:
    """MM2's record of replication progress: the MirrorSourceConnector's committed source offsets, from the Connect
    offsets topic on the target (dedicated mode: ``mm2-offsets.<alias>.internal``; JSON key
    ``[connector, {cluster, partition, topic}]``, value ``{"offset": N}`` = last replicated source offset).
    None when the topic does not exist (e.g. MM2 in a Connect cluster with other names)."""
    topic = topic or f"mm2-offsets.{alias}.internal"
    if topic not in target.topics():
        return None
    parts = target.partitions([topic])
    out: dict[TP, int] = {}
    for _t, _p, _o, key, value, _ts in target.read(target.offsets(parts)):
        try:
            connector, part = json.loads(key)
        except (TypeError, ValueError):
            continue
        if not isinstance(part, dict) or part.get("cluster") != alias or "topic" not in part:
            continue  # checkpoint/heartbeat connectors keep dummy offsets here too
        tp = (part["topic"], int(part["partition"]))
        if value is None:
            out.pop(tp, None)
        else:
            out[tp] = int(json.loads(value)["offset"])
    return out


def last_record_ms(cluster: Cluster, ends: dict[TP, int]) -> dict[TP, int]:
    """Timestamp of the last record of each partition (empty partitions are absent)."""
    out = {}
    for t, p, _o, _k, _v, ts in cluster.read({tp: e for tp, e in ends.items() if e > 0},
                                             start={tp: e - 1 for tp, e in ends.items() if e > 0}):
        out[(t, p)] = ts
    return out


def drain_status(source: Cluster | None, target: Cluster, params: RunParams, quiet_s: float | None = None):
    """Observe, wait the quiet window, observe again, and evaluate (see :mod:`mm2_failover.drain`).
    ``source`` None = disaster mode. Returns a DrainVerdict with ``groups``/``topics`` attributes."""
    from mm2_failover import drain

    policy = params.policies()[0]  # kafka_source is one cluster: the first alias's
    quiet = params.drain_quiet_seconds if quiet_s is None else quiet_s
    disaster = source is None
    target_topics = target.topics()
    groups: list[str] = []
    if params.topics_regex:
        rx = compile_regex(params.topics_regex, "topics_regex")
        if disaster:
            topics = sorted(policy.source_topic(t) for t in target_topics
                            if not is_internal_topic(t) and policy.source_topic(t) and rx.fullmatch(policy.source_topic(t)))
        else:
            topics = sorted(t for t in source.topics() if not is_internal_topic(t) and rx.fullmatch(t))
    elif disaster:
        topics = sorted(policy.source_topic(t) for t in target_topics if not is_internal_topic(t) and policy.source_topic(t))
    else:
        groups = selected_groups(source, params)
        topics = topics_in_scope(source, groups)
    if not topics:
        return drain.DrainVerdict(True, disaster, notes=["nothing in scope: no selected group has committed offsets "
                                                         "on the source for a replicated topic"], groups=groups)

    replicas = {t: policy.replica_topic(t) for t in topics}
    present = [t for t in topics if replicas[t] in target_topics]
    if disaster:
        parts = target.partitions([replicas[t] for t in present])
        src_parts = [(policy.source_topic(rt), p) for rt, p in parts]
    else:
        src_parts = source.partitions(topics)
    rparts = [(replicas[t], p) for t, p in src_parts if t in present]

    def observe():
        src = source.offsets(src_parts) if not disaster else {}
        rep = target.offsets(rparts)
        prog = mm2_progress(target, policy.source_alias)
        return src, rep, prog

    src1, rep1, prog1 = observe()
    time.sleep(quiet)
    src2, rep2, prog2 = observe()
    notes = []
    if prog2 is None:
        notes.append(f"MM2 progress topic mm2-offsets.{policy.source_alias}.internal not found on the target: "
                     "falling back to comparing replica and source end offsets")
    elif not disaster:
        notes.append("MM2 writes its progress on each offset flush (offset.flush.interval.ms, 60 s by default): "
                     "a partition can look behind for up to that long after replication finished")
    tails = last_record_ms(target, rep2) if disaster else {}
    obs = []
    for t, p in src_parts:
        rt = replicas[t]
        o = drain.PartitionObservation(t, p, rt, src1.get((t, p)), src2.get((t, p)),
                                       (prog2 or {}).get((t, p)), None,
                                       rep1.get((rt, p)), rep2.get((rt, p)) if t in present else None,
                                       tails.get((rt, p)))
        o.progress_moved = (prog1 or {}).get((t, p)) != (prog2 or {}).get((t, p))
        if not disaster and o.replicated is not None and o.source_end is not None and o.replicated + 1 < o.source_end:
            # only transaction markers / aborted records after the last replicated offset?
            data = list(source.read({(t, p): o.source_end}, start={(t, p): o.replicated + 1},
                                    extra={"isolation.level": "read_committed"}))
            o.data_after_replicated = bool(data)
        obs.append(o)
    v = drain.evaluate(obs, disaster)
    v.notes = notes
    if disaster:
        hb = None
        if "heartbeats" in target_topics:
            hb_parts = target.partitions(["heartbeats"])
            hb = max(last_record_ms(target, target.offsets(hb_parts)).values(), default=None)
        v.rpo = drain.rpo_estimate(obs, int(time.time() * 1000), hb)
    v.groups, v.topics = groups, topics
    return v


# ------------------------------------------------------------------------------------------ 2. snapshot


def capture_snapshot(target: Cluster, params: RunParams, art: RunArtifacts, source: Cluster | None = None) -> dict:
    """Capture end offsets once per run; a re-run returns the snapshot already captured, unchanged."""
    if art.snapshot.exists():
        snap = json.loads(art.snapshot.read_text())
        log.info("snapshot already captured at %s for this run: reusing it unchanged (%s)", snap["captured_at"], art.snapshot)
        return snap
    policies = params.policies()
    topics = target.topics()
    cp_topics = [p.checkpoints_topic for p in policies]
    missing = [t for t in cp_topics if t not in topics]
    if missing:
        candidates = sorted(t for t in topics if source_alias_of_checkpoints_topic(t))
        raise planmod.PlanError(
            f"checkpoints topic(s) {', '.join(missing)} for source alias(es) {params.source_alias!r} not found on the "
            f"target ({target.conf.get('bootstrap.servers')}). Checkpoint topics that do exist: {candidates or 'none'}. "
            "Check the source_alias param and that MM2's MirrorCheckpointConnector runs for this flow."
        )
    cp_end = target.offsets(target.partitions(cp_topics))
    replicas = sorted({t for t in topics if not is_internal_topic(t)
                       for p in policies if p.source_topic(t) is not None})
    rparts = target.partitions(replicas)
    r_end, r_start = target.offsets(rparts, "latest"), target.offsets(rparts, "earliest")
    snap = {
        "captured_at": now_iso(),
        "source_alias": params.source_alias,
        "checkpoints_topics": cp_topics,
        "checkpoints_end_offsets": tp_map_to_json(cp_end),
        "replica_partitions": {t: n for t, n in topics.items() if t in replicas},
        "replica_log_start": tp_map_to_json(r_start),
        "replica_log_end": tp_map_to_json(r_end),
        "source_end_offsets": None,
    }
    if source is not None:  # the source behind the kafka_source connection: the first alias
        src_topics = sorted({policies[0].source_topic(t) for t in replicas if policies[0].source_topic(t)})
        existing = source.topics()
        snap["source_end_offsets"] = tp_map_to_json(source.offsets(source.partitions([t for t in src_topics if t in existing])))
        # the selected groups' commits on the source: checkpoint freshness and re-read estimates
        groups = selected_groups(source, params)
        snap["source_group_offsets"] = {g: tp_map_to_json(o) for g, o in
                                        committed_offsets(source, groups, params.apply_concurrency).items()}
    else:
        snap["source_group_offsets"] = None
        snap["disaster_mode"] = True
    write_json(art.snapshot, snap)
    log.info("captured snapshot: checkpoint end offsets %s; %d replica topic(s)", snap["checkpoints_end_offsets"],
             len(replicas))
    return snap


# ------------------------------------------------------------------------------------------ 3. checkpoints


def load_latest_checkpoints(path: Path) -> list[planmod.LatestCheckpoint]:
    import pyarrow.parquet as pq

    t = pq.read_table(str(path), columns=["source_alias", "group", "topic", "partition", "upstream_offset",
                                          "downstream_offset", "metadata"])
    return [planmod.LatestCheckpoint(**r) for r in t.to_pylist()]


# ------------------------------------------------------------------------------------------ 4. gate


def live_groups(target: Cluster, groups: list[str]) -> list[GroupState]:
    """Groups that have members (or are mid-rebalance) on ``target``: the broker would refuse their commits."""
    return [s for s in target.describe_groups(groups).values() if not s.is_safe_to_move]


# ------------------------------------------------------------------------------------------ 5. apply


def make_plan(target: Cluster, params: RunParams, art: RunArtifacts, snapshot: dict) -> planmod.Plan:
    """Build the plan once per run (a retry reloads it, so 'current' keeps meaning 'before this run')."""
    if art.plan_json.exists():
        log.info("plan already built for this run: reusing %s", art.plan_json)
        return planmod.Plan.from_dicts(json.loads(art.plan_json.read_text())["rows"])
    cps = load_latest_checkpoints(art.checkpoints)
    groups = sorted({c.group for c in cps})
    current = committed_offsets(target, groups, params.apply_concurrency)
    starts = tp_map_from_json(snapshot["replica_log_start"])
    ends = tp_map_from_json(snapshot["replica_log_end"])
    bounds = {tp: planmod.PartitionBounds(starts[tp], ends[tp]) for tp in ends}
    plan = planmod.build_plan(cps, bounds, current, snapshot["replica_partitions"],
                              params.on_existing_target_offsets, params.allow_rewind)
    write_json(art.plan_json, {"built_at": now_iso(), "params": params.as_dict(), "counts": plan.counts(),
                               "rows": plan.as_dicts()})
    write_text(art.plan_csv, plan.to_reset_csv())
    log.info("plan: %d group(s), %s; written to %s and %s", len(plan.groups()), plan.counts(), art.plan_json, art.plan_csv)
    return plan


def committed_offsets(cluster: Cluster, groups: list[str], concurrency: int = 8) -> dict[str, dict[TP, int]]:
    return cluster.committed_many(list(groups), window=concurrency)


def take_backup(target: Cluster, plan: planmod.Plan, art: RunArtifacts, concurrency: int = 8) -> dict:
    """Store the target's commits for every planned partition ("no commit" as null) before the first write.
    Never replaced: a retry keeps the state from before the run."""
    if art.backup.exists():
        return json.loads(art.backup.read_text())
    groups = plan.groups()
    current = committed_offsets(target, groups, concurrency)
    backup = {"taken_at": now_iso(), "cluster": target.conf.get("bootstrap.servers"), "groups": {}}
    for r in plan.rows:
        backup["groups"].setdefault(r.group, {}).setdefault(r.topic, {})[str(r.partition)] = \
            current.get(r.group, {}).get((r.topic, r.partition))
    write_json(art.backup, backup)
    return backup


@dataclass
class ApplyResult:
    applied: dict[str, int] = field(default_factory=dict)  # group -> partitions written now
    unchanged: list[str] = field(default_factory=list)  # groups that already held the plan
    refused: dict[str, str] = field(default_factory=dict)  # group -> broker's error

    def as_dict(self) -> dict:
        return {"applied": self.applied, "unchanged": self.unchanged, "refused": self.refused}


def apply_plan(target: Cluster, plan: planmod.Plan, concurrency: int = 8) -> ApplyResult:
    """One ``alter_consumer_group_offsets`` request per group, ``concurrency`` at a time. Writes only what
    differs from the target's current commits; a refused group does not stop the others."""
    groups = sorted(plan.writes())
    current = committed_offsets(target, groups, concurrency)
    todo = planmod.diff_to_apply(plan, current)
    res = ApplyResult(unchanged=[g for g in groups if g not in todo])
    t0, done = time.monotonic(), 0
    batch = 1000  # progress in the task log every batch
    names = sorted(todo)
    for i in range(0, len(names), batch):
        chunk = names[i:i + batch]
        for group, err in target.alter_many({g: todo[g] for g in chunk}, window=concurrency).items():
            if err:
                res.refused[group] = err
                log.error("group %s NOT moved: %s", group, err)
            else:
                res.applied[group] = len(todo[group])
        done += len(chunk)
        log.info("apply progress: %d/%d group(s), %d refused, %.1f s", done, len(names), len(res.refused),
                 time.monotonic() - t0)
    return res


# ------------------------------------------------------------------------------------------ 6. verify


def stale_checkpoints(plan: planmod.Plan, source_group_offsets: dict | None, params: RunParams) -> list[dict]:
    """Rows whose checkpoint's upstream offset differs from the group's commit on the source at capture time:
    MM2 had not (yet, or could not) checkpoint the newest commit. Only rows of the first alias (the source
    behind ``kafka_source``) can be compared."""
    if not source_group_offsets:
        return []
    policy = params.policies()[0]
    out = []
    for r in plan.rows:
        if r.upstream_offset is None or r.source_alias != policy.source_alias:
            continue
        commits = tp_map_from_json(source_group_offsets.get(r.group, {}))
        src = commits.get((policy.source_topic(r.topic), r.partition))
        if src is not None and src != r.upstream_offset:
            out.append({"group": r.group, "topic": r.topic, "partition": r.partition,
                        "source_committed": src, "checkpoint_upstream": r.upstream_offset})
    return out


def checkpoint_warnings(summary: dict) -> list[str]:
    out = []
    if summary.get("quarantined"):
        out.append(f"{summary['quarantined']} checkpoint record(s) could not be used {summary['quarantined_by_reason']}: "
                   f"listed in {summary.get('quarantine_output')}")
    if summary.get("regressions"):
        out.append(f"{summary['regressions']} checkpoint(s) went backwards within the read range (policy "
                   f"{summary.get('policy')}: {'the highest was kept' if summary.get('policy') == 'max' else 'the latest was kept'}); "
                   f"listed in {summary.get('regressions_output')}")
    return out


def verify_run(target: Cluster, plan: planmod.Plan, art: RunArtifacts, params: RunParams, dag_id: str, run_id: str,
               dry_run: bool = False, refused: dict[str, str] | None = None, warnings: list[str] | None = None) -> dict:
    groups = plan.groups()
    committed = committed_offsets(target, groups, params.apply_concurrency)
    mismatches = [] if dry_run else planmod.verify(plan, committed)
    tps = sorted({(r.topic, r.partition) for r in plan.rows})
    log_end = target.offsets(tps) if tps else {}
    summary = json.loads(art.checkpoints_summary.read_text()) if art.checkpoints_summary.exists() else {}
    warnings = list(warnings or []) + checkpoint_warnings(summary)
    snapshot = json.loads(art.snapshot.read_text()) if art.snapshot.exists() else {}
    drain_obs = json.loads((art.dir / "drain.json").read_text()) if (art.dir / "drain.json").exists() else {}
    if drain_obs.get("disaster") or snapshot.get("disaster_mode"):
        warnings.append("DISASTER MODE: the source cluster was not reachable; producer and source-group checks were "
                        f"skipped. Data-loss window: {drain_obs.get('rpo')}")
    stale = stale_checkpoints(plan, snapshot.get("source_group_offsets"), params)
    if stale:
        warnings.append(f"{len(stale)} partition(s) have a checkpoint behind the group's last commit on the source "
                        f"(MM2 had not checkpointed the newest commit): {stale[:10]}")
    rep = reportmod.build_report(dag_id=dag_id, run_id=run_id, params=params.as_dict(), plan=plan, committed=committed,
                                 log_end=log_end, mismatches=mismatches, refused=refused, dry_run=dry_run,
                                 checkpoints_summary=summary, warnings=warnings)
    rep["artifacts"] = str(art.dir)
    rep["rpo"] = drain_obs.get("rpo")
    rep["stale_checkpoints"] = stale
    write_json(art.report_json, rep)
    write_text(art.report_md, reportmod.render_markdown(rep))
    return rep


# ------------------------------------------------------------------------------------------ rollback


def backup_offsets(backup: dict) -> dict[str, dict[TP, int | None]]:
    """group -> {(topic, partition): offset before the run, or None = no commit then}."""
    return {g: {(t, int(p)): o for t, parts in topics.items() for p, o in parts.items()}
            for g, topics in backup["groups"].items()}


def load_backup(path: Path) -> dict:
    if not path.exists():
        raise FileNotFoundError(f"no backup at {path}: apply_group_offsets writes it before its first write; a run "
                                "that never reached that point changed nothing")
    return json.loads(path.read_text())


def rollback_diff(backup: dict, current: dict[str, dict[TP, int]]) -> dict[str, tuple[dict[TP, int], list[TP]]]:
    """Pure: per group, what to commit and which commits to delete to get back exactly to the backup."""
    out = {}
    for g, before in backup_offsets(backup).items():
        now = current.get(g, {})
        to_set = {tp: o for tp, o in before.items() if o is not None and now.get(tp) != o}
        to_delete = sorted(tp for tp, o in before.items() if o is None and tp in now)
        if to_set or to_delete:
            out[g] = (to_set, to_delete)
    return out


def rollback(target: Cluster, backup: dict, concurrency: int = 8, journal_dir: Path | None = None) -> ApplyResult:
    """Restore the commits in ``backup`` exactly: offsets that existed are committed again, offsets that did not
    exist are removed. Idempotent; refused groups are reported and the others proceed.

    Kafka removes single commits with OffsetDelete, which confluent-kafka does not offer; so a group that needs
    commits removed is deleted (it is empty: the gate checked) and re-committed with its backed-up offsets plus
    its current commits on partitions the backup does not cover. That list is journaled first, so a retry after
    a crash in between still restores it."""
    groups = sorted(backup["groups"])
    current = committed_offsets(target, groups, concurrency)
    todo = rollback_diff(backup, current)
    res = ApplyResult(unchanged=[g for g in groups if g not in todo])
    before = backup_offsets(backup)
    journal_dir = journal_dir or Path(os.environ.get("TMPDIR", "/tmp"))

    def one(group: str):
        to_set, to_delete = todo[group]
        try:
            if to_delete:
                journal = journal_dir / f"rollback-journal-{group}.json"
                if journal.exists():  # a previous attempt deleted the group already: use what it saw
                    keep = {tuple(k): v for k, v in json.loads(journal.read_text())}
                else:
                    keep = {tp: o for tp, o in current.get(group, {}).items() if tp not in before[group]}
                    write_json(journal, [[list(tp), o] for tp, o in keep.items()])
                target.delete_group(group)
                to_set = {**keep, **{tp: o for tp, o in before[group].items() if o is not None}}
            if to_set:
                errs = {tp: e for tp, e in target.alter_offsets(group, to_set).items() if e}
                if errs:
                    return group, None, f"partition errors: {errs}"
            if to_delete:
                journal.unlink(missing_ok=True)
        except Exception as e:
            return group, None, f"{type(e).__name__}: {e}"
        return group, len(todo[group][0]) + len(to_delete), None

    with ThreadPoolExecutor(max(1, concurrency)) as pool:
        for group, n, err in pool.map(one, sorted(todo)):
            if err:
                res.refused[group] = err
                log.error("group %s NOT rolled back: %s", group, err)
            else:
                res.applied[group] = n
    return res


def verify_rollback(target: Cluster, backup: dict, concurrency: int = 8) -> list[str]:
    groups = sorted(backup["groups"])
    left = rollback_diff(backup, committed_offsets(target, groups, concurrency))
    return [f"{g}: still differs from the backup (set {s}, delete {d})" for g, (s, d) in sorted(left.items())]
