"""Exact failover (issue 16) on the real bed: MM2's own offset syncs, archived on the target side, prove where each
group really is; the plan resumes there (re-read 0) where MM2's checkpoints re-read, never loses a record, keeps
working from the archive when the source is lost, translates groups MM2 never checkpointed, and finds the copy of
the next record inside brackets that transactions broke. The checkpoints are decoded in Python here (the Spark job
that computes them is tested elsewhere); everything else is the pipeline's own steps on real brokers and real MM2."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mm2_failover.adapters.syncs import index_rows, read_syncs
from mm2_failover.rules import translate as tr
from mm2_failover.stages.apply import backup_and_apply
from mm2_failover.stages.build_plan import make_plan
from mm2_failover.stages.snapshot import capture_snapshot
from mm2_failover.stages.verify import verify_run
from testbed import scenario
from testbed.scenario import write_latest

pytestmark = [pytest.mark.bed]


def plan_of(bed, target, folder, groups: list[str], **params):
    ctx = bed.run_context(folder, groups_regex="|".join(groups), **params)
    capture_snapshot(ctx)
    cps = [c for k, c in scenario.read_checkpoints(target, bed.checkpoints_topic).items() if k.group in groups]
    write_latest(ctx.folder, cps)
    return ctx, make_plan(ctx)


def syncs_now(bed, source, topic: str):
    """The offset syncs MM2 wrote for ``topic`` so far, by partition (read from MM2's topic directly)."""
    sync_topic = "mm2-offset-syncs.backup.internal"
    end = {p: o for (_t, p), o in source.offsets(source.partitions([sync_topic])).items()}
    rows, _bad = read_syncs(source, sync_topic, {}, end)
    return {p: tr.SyncIndex(v) for (t, p), v in index_rows(rows).items() if t == topic}


@pytest.fixture(scope="module")
def burst(bed, run_root):
    """300 records per partition in bursts (MM2's checkpoints then lag far behind), one group consumed part."""
    import uuid

    tag = uuid.uuid4().hex[:6]
    g, topic = f"exact-{tag}", f"t-exact-{tag}"
    prep = scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        group=g,
        topic=topic,
        partitions=3,
        produced=300,
        consumed_upto={0: 50, 1: 150, 2: 300},
        batches=3,
        pause_s=0.5,
    )
    return SimpleNamespace(
        g=g,
        topic=topic,
        prep=prep,
        root=run_root / "exact" / tag,
        source=bed.client("source"),
        target=bed.client("target"),
    )


def test_exact_translation_resumes_at_the_next_record_where_checkpoints_re_read(bed, burst):
    b = burst
    _ctx, by_checkpoint = plan_of(bed, b.target, b.root / "checkpoint", [b.g], translation="checkpoint")
    ctx, exact = plan_of(bed, b.target, b.root / "exact", [b.g])
    rows = {r.partition: r for r in exact.rows}
    assert {p: r.planned_offset for p, r in rows.items()} == b.prep.consumed_upto  # replica offsets == source's here
    # a partition consumed to its end has nothing left to read on the source: at_end (the replica's end)
    assert all(r.rule in (tr.EXACT_SYNC, tr.BRACKET, tr.DRAINED_TAIL, tr.AT_END) for r in rows.values()), rows
    assert {r.partition: r.planned_offset for r in by_checkpoint.rows} == {
        p: c.downstream_offset for p, c in b.prep.checkpoints.items()
    }
    assert any(c.downstream_offset < b.prep.consumed_upto[p] for p, c in b.prep.checkpoints.items())  # MM2 re-reads
    # apply, then a consumer of the group on the target: nothing re-read, nothing lost
    backup_and_apply(ctx, exact)
    rep = verify_run(ctx, exact)
    assert rep.outcome == "succeeded" and rep.totals["records_reread_estimate"] == 0
    assert rep.totals["records_reread_by_checkpoints"] == sum(
        b.prep.consumed_upto[p] - c.downstream_offset for p, c in b.prep.checkpoints.items()
    )
    first = scenario.first_records_on_target(bed.target_bootstrap, b.g, b.prep.replica_topic, 3)
    for o in scenario.compare(b.prep, b.target.committed(b.g), first):
        assert (o.re_read, o.lost) == (0, 0), o


def test_with_the_source_lost_the_archive_still_proves_positions_inside_gap_free_brackets(bed, burst):
    """The syncs were archived by the previous runs; now the source is declared lost: no record can be read there,
    so only brackets with no record copied twice count, from the archive alone."""
    b = burst
    ctx, plan = plan_of(bed, b.target, b.root / "lost", [b.g], source_reachable="no")
    assert ctx.folder.load_snapshot().syncs["primary"].get("archive_only")
    idx = syncs_now(bed, b.source, b.topic)
    for r in plan.rows:
        want = idx[r.partition].translate(b.prep.consumed_upto[r.partition])  # no drained tail: the source is lost
        if isinstance(want, tr.Translation):
            assert (r.planned_offset, r.rule) == (want.downstream, want.rule), r
            assert r.planned_offset == b.prep.consumed_upto[r.partition]
        elif r.rule == tr.ARCHIVE_FLOOR:  # issue 50 item 7: the newest archived sync, further on than MM2's
            assert r.planned_offset > r.downstream_offset, r
        else:
            assert (r.rule, r.planned_offset) == ("checkpoint", r.downstream_offset), r
        assert r.planned_offset <= b.prep.consumed_upto[r.partition]  # never past the consumed position
    assert any(r.rule != "checkpoint" for r in plan.rows), [(r.partition, r.rule) for r in plan.rows]


def test_a_group_mm2_never_checkpointed_is_translated_from_the_syncs(bed, burst):
    """MM2's default groups.exclude keeps console-consumer-* out of its checkpoints: the syncs place it anyway."""
    b = burst
    ghost = f"console-consumer-{b.g}"
    scenario.consume_and_commit(bed.source_bootstrap, ghost, b.topic, {0: 120, 1: 10, 2: 299})
    ctx, plan = plan_of(bed, b.target, b.root / "ghost", [ghost])
    rows = {r.partition: r for r in plan.rows}
    assert {p: (r.action, r.planned_offset) for p, r in rows.items()} == {
        0: ("commit", 120),
        1: ("commit", 10),
        2: ("commit", 299),
    }
    assert all(r.downstream_offset is None and r.rule != "checkpoint" for r in rows.values())


def test_transactions_break_brackets_and_the_record_lookup_finds_the_copy(bed, names, run_root):
    """Transaction markers and an aborted batch leave offsets MM2 never copies (it copies aborted records, reading
    read_uncommitted by default): brackets are not gap-free, so the pipeline looks up the copy of the group's next
    committed record inside the bracket, on a reachable source."""
    from confluent_kafka import Producer

    g, topic = names["group"], names["topic"]
    source = bed.client("source")
    target = bed.client("target")
    source.create_topic(topic, 1)
    p = Producer({"bootstrap.servers": bed.source_bootstrap, "transactional.id": f"tx-{g}", "linger.ms": 5})
    p.init_transactions(30)
    for i in range(12):
        p.begin_transaction()
        for j in range(30):
            p.produce(topic, value=scenario.payload(topic, 0, i * 30 + j), partition=0)
        if i % 4 == 3:
            p.flush(30)  # the aborted records reach the log (and MM2 copies them)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    replica = f"primary.{topic}"
    end = source.offsets([(topic, 0)])[(topic, 0)]
    scenario.wait_for(
        lambda: replica in target.topics() and target.offsets([(replica, 0)])[(replica, 0)] >= 300, 60, "the replica"
    )
    committed = [r.offset for r in source.records({(topic, 0): (0, end)})[(topic, 0)]]  # read_committed: no aborts
    assert len(committed) == 270  # 9 committed transactions of 30
    source_commit = committed[200]  # the group read 200 committed records: the next is at this offset
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bed.source_bootstrap, "group.id": g, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, source_commit)], asynchronous=False)
    c.close()
    scenario.wait_checkpointed(target, bed.checkpoints_topic, g, replica, 1)
    ctx, plan = plan_of(bed, target, run_root / "exact" / g, [g])
    [r] = plan.rows
    nxt = source.first_records({(topic, 0): source_commit})[(topic, 0)]  # the next committed record
    copy = target.records({(replica, 0): (r.planned_offset, r.planned_offset + 1)})[(replica, 0)][0]
    assert nxt.same_content(copy), (r, nxt, copy)  # resumes exactly at the copy of the next record
    assert r.rule != "checkpoint" and r.planned_offset >= (r.downstream_offset or 0)
    assert end > 360  # markers really took offsets


def test_without_the_archive_a_lost_source_leaves_only_mm2s_checkpoints(bed, burst, tmp_path, monkeypatch):
    """What the archive saves: the same failover with the source lost and nothing archived has no syncs at all
    (they lived on the source), so every partition falls back to MM2's checkpoints and re-reads."""
    b = burst
    monkeypatch.setenv("MM2_FAILOVER_ARCHIVE", str(tmp_path / "never-archived"))
    ctx, plan = plan_of(
        bed,
        b.target,
        b.root / "no-archive",
        [b.g],
        source_reachable="no",
        on_existing_target_offsets="overwrite",
        allow_rewind=True,
    )  # the first test applied
    assert "never archived" in ctx.folder.load_snapshot().syncs["primary"]["why"]
    assert {r.partition: (r.rule, r.planned_offset) for r in plan.rows} == {
        p: ("checkpoint", c.downstream_offset) for p, c in b.prep.checkpoints.items()
    }
    assert sum(b.prep.consumed_upto[p] - c.downstream_offset for p, c in b.prep.checkpoints.items()) > 0


def test_with_the_source_lost_the_archived_source_commits_place_a_group_reset_after_mm2s_checkpoint(
    bed, run_root, tmp_path, monkeypatch
):
    """Issue 50 item 7: with the source lost, the group's position was MM2's checkpoint alone, which skips what a
    group reset backwards after it will read again (48 lost in the drill). The scheduled archive now keeps the
    groups' source commits with when it read them; a reading below MM2's checkpoint is the position (plan rule 1a),
    one above it never is (MM2 does not checkpoint a reset to its checkpoint or above: the checkpoint keeps those
    records). MM2's checkpoints are taken as they stood before the groups moved (the disaster takes MM2 too)."""
    import time
    import uuid

    from mm2_failover.rules import plan as planmod
    from mm2_failover.stages.archive import archive_offset_syncs, positions_path
    from testbed.exact_drill import rewind

    monkeypatch.setenv("MM2_FAILOVER_ARCHIVE", str(tmp_path / "archive"))
    monkeypatch.setattr(planmod, "CLOCK_MARGIN_S", 1.0)  # the rule's clock margin, shortened to this test's pace
    tag = uuid.uuid4().hex[:6]
    topic, moved, reset = f"t-positions-{tag}", f"moved-{tag}", f"reset-{tag}"
    target = bed.client("target")
    prep = scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        group=moved,
        topic=topic,
        partitions=2,
        produced=300,
        consumed_upto={0: 60, 1: 90},
        batches=3,
        pause_s=0.5,
    )
    scenario.consume_and_commit(bed.source_bootstrap, reset, topic, {0: 240, 1: 200})
    scenario.wait_checkpointed(target, bed.checkpoints_topic, reset, prep.replica_topic, 2)
    times: dict = {}
    cps = [
        c
        for k, c in scenario.read_checkpoints(target, bed.checkpoints_topic, times).items()
        if k.group in (moved, reset)
    ]
    checkpointed = {(c.group, c.partition): c.upstream_offset for c in cps}
    assert checkpointed == {(moved, 0): 60, (moved, 1): 90, (reset, 0): 240, (reset, 1): 200}
    time.sleep(1.5)
    scenario.consume_and_commit(bed.source_bootstrap, moved, topic, {0: 250, 1: 280})  # moved on
    rewind(bed.source_bootstrap, reset, topic, {0: 30, 1: 45})  # reset backwards to replay
    result = archive_offset_syncs(bed.run_context(tmp_path / "archive-run"))  # the scheduled archive's task
    assert result["primary"]["positions"]["groups"] >= 2, result

    def plan(folder):
        ctx = bed.run_context(folder, groups_regex=f"{moved}|{reset}", source_reachable="no")
        capture_snapshot(ctx)
        write_latest(ctx.folder, cps, times=times)
        return ctx, make_plan(ctx)

    ctx, p = plan(tmp_path / "lost")
    rows = {(r.group, r.partition): r for r in p.rows}
    truth = {(moved, 0): 250, (moved, 1): 280, (reset, 0): 30, (reset, 1): 45}  # replica offsets == source's here
    for k, r in rows.items():
        assert r.writes and r.planned_offset <= truth[k], r  # nothing the group has not read is skipped
    assert {k: rows[k].source_position for k in truth} == {
        (moved, 0): 60,
        (moved, 1): 90,
        (reset, 0): 30,
        (reset, 1): 45,
    }  # the moved group: MM2's checkpoint's
    notes = " ".join(ctx.folder.load_plan().translation_notes)
    assert "(source lost): the archive read the groups' source commits" in notes and "2 of their 4" in notes, notes
    # what the archived commits save: without them, MM2's checkpoints answer - the reset group skips what it replays
    positions_path("primary").unlink()
    _ctx, old = plan(tmp_path / "lost-without")
    before = {(r.group, r.partition): r.planned_offset for r in old.rows}
    assert before[(reset, 0)] > truth[(reset, 0)] and before[(reset, 1)] > truth[(reset, 1)], before
    assert before[(moved, 0)] == rows[(moved, 0)].planned_offset, before


def test_an_archive_run_killed_mid_way_never_duplicates_or_skips_a_sync(bed, names, tmp_path):
    """SIGKILL between writing the archive's files and its manifest (fault point archive.after_files), twice, each
    time followed by a clean run: the archive holds every sync record of MM2's topic exactly once, and every
    checkpoint record of the checkpoint topic (archived from the target beside them)."""
    import os
    import subprocess
    import sys

    from mm2_failover.adapters.syncs import SyncArchive

    source = bed.client("source")
    sync_topic = "mm2-offset-syncs.backup.internal"
    env = {**os.environ, "MM2_FAILOVER_ARCHIVE": str(tmp_path / "archive"), "PYTHONPATH": os.pathsep.join(sys.path)}

    def archive(fault: str = ""):
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "mm2_failover",
                "--source-bootstrap",
                bed.source_bootstrap,
                "--target-bootstrap",
                bed.target_bootstrap,
                "archive",
            ],
            capture_output=True,
            text=True,
            env={**env, "MM2_FAILOVER_FAULT": fault},
            timeout=120,
        )

    def on_topic() -> list[tuple[int, int]]:
        end = {p: o for (_t, p), o in source.offsets(source.partitions([sync_topic])).items()}
        rows, _bad = read_syncs(source, sync_topic, {}, end)
        return sorted((r["sync_partition"], r["sync_offset"]) for r in rows)

    a = SyncArchive(tmp_path / "archive", "primary")
    for round_ in range(2):
        before = len(on_topic())
        source.create_topic(f"{names['topic']}-{round_}", 2)
        scenario.produce(bed.source_bootstrap, f"{names['topic']}-{round_}", 2, 250)  # MM2 writes new syncs
        scenario.wait_for(lambda before=before: len(on_topic()) > before, 60, "new offset syncs")
        prev = a.archived_to()
        killed = archive("kill@archive.after_files")
        assert killed.returncode == -9, killed.stderr[-2000:]
        named = {f for v in (a.manifest().get("partitions") or {}).values() for f in v.get("files", [])}
        assert a.archived_to() == prev and set(os.listdir(a.dir)) - named - {"manifest.json"}  # files, no manifest
        ok = archive()
        assert ok.returncode == 0, ok.stderr[-2000:]
        held = sorted((r["sync_partition"], r["sync_offset"]) for r in a.rows())
        assert len(held) == len(set(held))  # nothing twice
        archived_to = a.archived_to()
        assert held == [x for x in on_topic() if x[1] < archived_to[x[0]]]  # nothing skipped
        assert sum(archived_to.values()) >= before
    # the checkpoint records are archived beside the syncs, from the target, each exactly once
    from mm2_failover.adapters.syncs import CheckpointArchive, read_checkpoint_records

    target = bed.client("target")
    c = CheckpointArchive(tmp_path / "archive", "primary")
    held = sorted((r["record_partition"], r["record_offset"]) for r in c.rows())
    upto = c.archived_to()
    rows, _bad = read_checkpoint_records(target, bed.checkpoints_topic, {}, upto)
    assert held and held == sorted((r["record_partition"], r["record_offset"]) for r in rows)
    assert all(
        r["group"] and r["topic"].startswith("primary.") and (r["tombstone"] or r["downstream"] >= 0) for r in c.rows()
    )  # decoded: group, replica topic, offsets
    assert c.manifest()["location"] == "target" and c.manifest()["topic"] == bed.checkpoints_topic


def commit_at(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    c.close()


@pytest.mark.parametrize("transactional", [False, True], ids=["plain", "transactional"])
def test_a_group_behind_the_source_log_start_changes_nothing_for_the_others_on_its_partition(
    bed, names, run_root, transactional
):
    """Issue 31 item 1, as a new user met it: three groups on one partition - one behind the source's log start
    (DeleteRecords moved it after MM2 copied the records: they are gone from the source, still on the replica), one
    in the middle, one caught up near the end - planned in ONE run. The caught-up and the middle groups resume exactly
    at the copy of their next record (before: the evidence read started at the lowest position, below the log start,
    librdkafka's default reset moved it to the log end and read nothing, and the caught-up group was placed at the
    replica's end, past its unread records); the group behind loses nothing and every group has a commit."""
    from confluent_kafka import Producer

    from testbed.exact_drill import Truth, score

    topic, replica = names["topic"], f"primary.{names['topic']}"
    source = bed.client("source")
    target = bed.client("target")
    source.create_topic(topic, 1)
    offsets: dict[bytes, int] = {}
    aborted: set[bytes] = set()
    conf = {"bootstrap.servers": bed.source_bootstrap, "linger.ms": 5}
    p = Producer({**conf, "transactional.id": f"tx-{topic}"} if transactional else conf)
    if transactional:
        p.init_transactions(30)
    for i in range(30):
        if transactional:
            p.begin_transaction()
        sent = [scenario.payload(topic, 0, i * 10 + j) for j in range(10)]
        for v in sent:
            p.produce(
                topic, value=v, partition=0, on_delivery=lambda err, m: offsets.__setitem__(m.value(), m.offset())
            )
        p.flush(30)
        if transactional and i % 4 == 3:
            p.abort_transaction(30)
            aborted.update(sent)
        elif transactional:
            p.commit_transaction(30)
    live = sorted(o for v, o in offsets.items() if v not in aborted)  # the records a read_committed group reads
    last_payload = max((v for v in offsets if v not in aborted), key=offsets.get)
    scenario.wait_for(
        lambda: (
            replica in target.topics()
            and any(
                r.value == last_payload
                for r in target.records({(replica, 0): (0, target.offsets([(replica, 0)])[(replica, 0)])})[(replica, 0)]
            )
        ),
        60,
        "the replica to hold the last record",
    )
    behind, middle, caught_up = (f"{names['group']}-{x}" for x in ("behind", "middle", "caught-up"))
    positions = {behind: live[20], middle: live[len(live) // 2], caught_up: live[-5]}
    for g, u in positions.items():
        commit_at(bed.source_bootstrap, g, topic, {0: u})
    for g in positions:
        scenario.wait_checkpointed(target, bed.checkpoints_topic, g, replica, 1)
    log_start = live[100]
    source.delete_records({(topic, 0): log_start})
    assert positions[behind] < log_start == source.offsets([(topic, 0)], "earliest")[(topic, 0)]
    ctx, plan = plan_of(bed, target, run_root / "behind" / topic, list(positions))
    copies = [
        (r.offset, r.value)
        for r in target.records({(replica, 0): (0, target.offsets([(replica, 0)])[(replica, 0)])})[(replica, 0)]
    ]
    truth = Truth(offsets, frozenset(aborted))
    rows = {r.group: r for r in plan.rows}
    assert set(rows) == set(positions) and all(r.writes for r in rows.values()), plan.rows  # every group has a commit
    scores = {g: score(rows[g].planned_offset, u, copies, truth) for g, u in positions.items()}
    assert all(s.lost == 0 for s in scores.values()), (scores, plan.rows)
    for g in (middle, caught_up):
        assert rows[g].rule != "checkpoint" and scores[g].re_read == 0, (g, rows[g], scores[g])
    notes = ctx.folder.load("plan.json")["translation_notes"]
    assert any(f"below the source's log start {log_start}" in n for n in notes), notes
