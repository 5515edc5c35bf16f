"""The safety rules against real brokers with checkpoints real MM2 wrote: the empty-group gate, no rewind,
retention clamps, existing commits, refusals between gate and apply, retries, backup and rollback."""

from __future__ import annotations

import pytest

from mm2_failover.adapters.runfolder import load_backup
from mm2_failover.rules import plan as planmod
from mm2_failover.rules.values import Commit
from mm2_failover.stages.apply import apply_plan, backup_and_apply, take_backup
from mm2_failover.stages.build_plan import make_plan
from mm2_failover.stages.gate import live_groups
from mm2_failover.stages.roll_back import rollback, verify_rollback
from mm2_failover.stages.verify import verify_run

pytestmark = [pytest.mark.bed]
REPO = __import__("pathlib").Path(__file__).resolve().parents[2]


def test_live_consumer_on_target_is_named_and_refused_by_the_broker(prepared, live_consumer):
    p = prepared
    p.snapshot_and_checkpoints()
    plan = make_plan(p.ctx())
    rt = p.prep[p.names["group"]].replica_topic
    lc = live_consumer(p.bed.target_bootstrap, p.names["group"], rt, client_id="orders-on-backup")
    lc.wait_stable(p.target, p.names["group"])
    live = live_groups(p.target, plan.groups())
    assert [s.group for s in live] == [p.names["group"]]
    assert live[0].members[0].client_id == "orders-on-backup"
    assert "orders-on-backup" in live[0].describe() and "/127.0.0.1" in live[0].describe()
    # if a consumer joins after the gate, the broker itself refuses and the group is reported, not moved
    res = apply_plan(p.target, plan)
    assert list(res.refused) == [p.names["group"]] and not res.applied
    lc.stop()
    assert p.target.committed(p.names["group"]) == {}


def test_group_joining_between_gate_and_apply_is_refused_others_move_and_retry_finishes(
    bed, source, target, names, run_root, live_consumer
):
    from testbed import scenario
    from testbed.steps import StepRun

    g1, g2 = names["group"] + "-a", names["group"] + "-b"
    prep1 = scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        group=g1,
        topic=names["topic"],
        partitions=2,
        produced=60,
        consumed_upto={0: 60, 1: 60},
    )
    last = scenario.consume_and_commit(bed.source_bootstrap, g2, names["topic"], {0: 60, 1: 60})
    assert last == {0: 59, 1: 59}
    scenario.wait_checkpointed(target, bed.checkpoints_topic, g2, prep1.replica_topic, 2)
    p = StepRun(bed, source, target, names, run_root, [g1, g2], {g1: prep1})
    p.snapshot_and_checkpoints()
    plan = make_plan(p.ctx())
    assert plan.groups() == [g1, g2]
    assert live_groups(target, plan.groups()) == []  # the gate passes...
    lc = live_consumer(bed.target_bootstrap, g2, prep1.replica_topic)  # ...then g2 starts on the target
    lc.wait_stable(target, g2)
    res = apply_plan(target, plan)
    assert set(res.applied) == {g1} and set(res.refused) == {g2}
    assert target.committed(g1) == plan.writes()[g1]
    assert target.committed(g2) == {}
    lc.stop()
    # the retry writes only what is missing
    res2 = apply_plan(target, plan)
    assert set(res2.applied) == {g2} and res2.unchanged == [g1] and not res2.refused
    assert planmod.verify(plan, target.commits_many(plan.groups())) == []


def test_a_retry_of_apply_never_rewinds_a_group_that_moved_since(prepared, monkeypatch):
    """Issue 31 item 8: the plan's "keep a target commit that is ahead" rule is decided once; apply ran, the group's
    consumers then read on the target and committed further, and the operator cleared apply (the runbook: "it writes
    only what is missing"). The retry rewound the group to the planned offsets and verify passed. Now a partition is
    written only where the target still holds the backup's value (or nothing); the others are reported as moved.
    Both applies hold the writer lock in the target itself (MM2_FAILOVER_LOCK=kafka, issue 34): each claimed and
    released the target's lease."""
    import uuid

    from mm2_failover.adapters.kafka_lock import KafkaLease
    from mm2_failover.rules import lease

    lock_topic = f"mm2-failover.locks-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("MM2_FAILOVER_LOCK", "kafka")
    monkeypatch.setenv("MM2_FAILOVER_LOCK_TOPIC", lock_topic)
    p = prepared
    g = p.names["group"]
    rt = p.prep[g].replica_topic
    p.snapshot_and_checkpoints()
    ctx = p.ctx()
    plan = make_plan(ctx)
    reads = []  # the target's commits are read once per try: the first try's apply starts from its backup's read
    real_read = type(ctx.target).commits_many
    monkeypatch.setattr(
        type(ctx.target), "commits_many", lambda self, *a, **k: reads.append(a[0]) or real_read(self, *a, **k)
    )
    backup_and_apply(ctx, plan)
    assert reads == [[g]], reads
    planned = plan.writes()[g]
    p.target.alter_offsets(g, {(rt, 0): planned[(rt, 0)] + 5})  # the consumers read 5 records on the target
    res = backup_and_apply(ctx, plan)  # the retry
    assert reads == [[g], [g]], reads  # its backup is the first try's: what the target holds now is read again
    assert p.target.committed(g)[(rt, 0)] == planned[(rt, 0)] + 5  # not rewound
    assert res.moved_since == {
        g: [f"{rt}[0]: was none before the run, planned {planned[(rt, 0)]}, now {planned[(rt, 0)] + 5}"]
    }
    assert ctx.folder.load("apply.json")["moved_since"] == res.moved_since
    rep = verify_run(ctx, plan)
    assert rep.mismatches == [] and rep.moved_since == res.moved_since
    assert any("moved since" in w and f"{rt}[0]" in w for w in rep.warnings), rep.warnings
    recs = KafkaLease(p.target.conf, lock_topic, p.target.cluster_id(), {}).records()
    granted = lease.replay(recs)[1]
    mine = [(r.op, r.who["writer"]) for r in recs if granted[r.offset] and r.op != lease.RENEW]
    assert mine == [(lease.CLAIM, "failover apply"), (lease.RELEASE, "failover apply")] * 2, mine
    assert lease.replay(recs)[0].holder is None  # released
    # an approval request made now says so (issue 53 item 3): the live diff's counts, read from the target
    from mm2_failover.stages.approve_plan import moved_since

    assert moved_since(ctx, plan) == {"partitions": 1, "groups": 1, "read": len(planned)}


def test_target_commit_ahead_is_kept_unless_allow_rewind(prepared):
    p = prepared
    g = p.names["group"]
    rt = p.prep[g].replica_topic
    p.snapshot_and_checkpoints()
    p.target.alter_offsets(g, {(rt, 0): 90})  # the group already ran on the target, further than the checkpoint
    with pytest.raises(planmod.PlanError, match="already have different committed offsets"):
        make_plan(p.ctx())
    kept = make_plan(p.ctx(on_existing_target_offsets="overwrite"))
    row0 = next(r for r in kept.rows if r.partition == 0)
    assert (row0.action, row0.reason, row0.current_offset) == ("skip", "target_ahead", 90)
    p.art.plan_json.unlink()
    rewound = make_plan(p.ctx(on_existing_target_offsets="overwrite", allow_rewind=True))
    row0 = next(r for r in rewound.rows if r.partition == 0)
    assert row0.action == "commit" and row0.planned_offset == row0.exact_offset == 20 < 90  # exact: consumed 20
    apply_plan(p.target, rewound)
    assert p.target.committed(g)[(rt, 0)] == row0.planned_offset


def test_records_deleted_by_retention_clamp_to_log_start(prepared):
    from testbed import scenario

    p = prepared
    g = p.names["group"]
    rt = p.prep[g].replica_topic
    cp0 = p.prep[g].checkpoints[0].downstream_offset
    # retention removed the records at the checkpoint: 20 of them, past the 20 the group had consumed on the source
    gone = max(cp0, 20) + 20
    p.target.delete_records({(rt, 0): gone})
    p.snapshot_and_checkpoints()
    ctx = p.ctx(translation="checkpoint")  # MM2's checkpoint as it is: the lost count must be found another way
    plan = make_plan(ctx)
    row0 = next(r for r in plan.rows if r.partition == 0)
    assert (row0.action, row0.reason, row0.planned_offset, row0.retention_gap) == (
        "clamp",
        "retention_gap",
        gone,
        gone - cp0,
    )
    backup_and_apply(ctx, plan)
    rep = verify_run(ctx, plan)
    assert rep.outcome == "succeeded" and rep.totals["clamped"] == 1
    # at most log start - checkpoint; exactly: the records the group had not read (source offsets 20 .. gone-1)
    assert rep.totals["records_lost_to_retention_upper_bound"] == gone - cp0
    assert rep.totals["records_lost_to_retention"] == gone - 20
    first = scenario.first_records_on_target(p.bed.target_bootstrap, g, rt, 3)
    assert first[0] == gone


def test_existing_commits_policies(prepared):
    p = prepared
    g = p.names["group"]
    rt = p.prep[g].replica_topic
    p.snapshot_and_checkpoints()
    p.target.alter_offsets(g, {(rt, 1): 0})
    skip = make_plan(p.ctx(on_existing_target_offsets="skip"))
    assert {(r.action, r.reason) for r in skip.rows} == {("skip", "existing_target_offsets")}
    assert apply_plan(p.target, skip).applied == {}
    assert p.target.committed(g) == {(rt, 1): 0}


@pytest.mark.parametrize("lock", ["file", "kafka"])
def test_backup_then_rollback_restores_the_exact_prior_state_including_absence(prepared, lock, monkeypatch):
    """Under either writer lock (``kafka``: the lease, the re-commits through the fenced writer) - each run of
    ``writer_lock`` as apply and rollback hold it."""
    from mm2_failover.stages.apply import writer_lock

    monkeypatch.setenv("MM2_FAILOVER_LOCK", lock)
    monkeypatch.setenv("MM2_FAILOVER_LOCK_TOPIC", f"mm2-failover.locks-{prepared.names['group']}")
    p = prepared
    g = p.names["group"]
    rt = p.prep[g].replica_topic
    p.snapshot_and_checkpoints()
    p.target.alter_offsets(g, {(rt, 2): 3})  # before the run: a commit on partition 2 only
    ctx = p.ctx(on_existing_target_offsets="overwrite", allow_rewind=True)
    plan = make_plan(ctx)
    backup = take_backup(ctx, plan)
    assert {tp: e.before for tp, e in backup.groups[g].items()} == {(rt, 0): None, (rt, 1): None, (rt, 2): Commit(3)}
    with writer_lock(p.target, "test apply", 30) as held:
        assert held.fenced == (lock == "kafka")
        apply_plan(p.target, plan, held=held)
    assert set(p.target.committed(g)) == {(rt, 0), (rt, 1), (rt, 2)}
    # a second take_backup (a retry) keeps the state from before the run
    assert take_backup(ctx, plan) == backup
    with writer_lock(p.target, "test rollback", 30) as held:
        res = rollback(p.target, load_backup(p.art.backup), 4, held=held)
    assert res.applied == {g: 1} and not res.refused  # deleted, then its one earlier commit re-committed
    assert p.target.committed(g) == {(rt, 2): 3}
    assert verify_rollback(p.target, backup) == []
    with writer_lock(p.target, "test rollback again", 30) as held:
        assert rollback(p.target, backup, 4, held=held).unchanged == [g]  # idempotent


def test_commits_read_by_consumer_handles_and_by_the_java_client_are_the_same(bed, target, names, monkeypatch):
    """Commits are read two ways (Cluster.commits_many): a consumer handle per group, or, above JAVA_BULK_GROUPS
    groups, Kafka's Java client in one JVM. Both must give the same commits (two topics, metadata byte for byte
    included), and nothing for a group that never committed."""
    from mm2_failover.adapters.kafka import java_bridge

    topic = names["topic"]
    target.create_topic(topic, 3)
    other = topic + "-other"
    target.create_topic(other, 1)
    groups = {f"{names['group']}-{i}": {(topic, p): 10 * i + p for p in range(3) if (i + p) % 2 == 0} for i in range(5)}
    groups[f"{names['group']}-meta"] = {(topic, 0): Commit(4, "state:é\u00a0x"), (other, 0): Commit(9, "")}
    groups[f"{names['group']}-other"] = {(other, 0): 2}
    import time

    deadline = time.monotonic() + 60
    while any(target.alter_many({g: c for g, c in groups.items() if c}).values()):
        assert time.monotonic() < deadline
        time.sleep(1)
    everyone = sorted(groups) + [f"{names['group']}-never"]
    by_consumers = target.commits_many(everyone)
    monkeypatch.setattr(java_bridge, "JAVA_BULK_GROUPS", 0)
    by_java = target.commits_many(everyone)
    assert by_consumers == by_java
    want = {g: {tp: c if isinstance(c, Commit) else Commit(c) for tp, c in cs.items()} for g, cs in groups.items()}
    assert by_java == {**want, f"{names['group']}-never": {}}


def test_groups_described_by_librdkafka_and_by_the_java_client_are_the_same(
    bed, target, names, live_consumer, monkeypatch
):
    """Groups are described two ways (Cluster.describe_groups): librdkafka, one request per group, or, above
    JAVA_BULK_GROUPS groups, Kafka's Java client in one JVM (one request per coordinator). Both must give the same
    states and members - a live group with its member, empty groups, a group that never existed - and the gate must
    name the same live group either way."""
    import time

    from mm2_failover.adapters.kafka import java_bridge

    topic = names["topic"]
    target.create_topic(topic, 2)
    empty = [f"{names['group']}-e{i}" for i in range(4)]
    deadline = time.monotonic() + 60
    while any(target.alter_many({g: {(topic, 0): i, (topic, 1): 2 * i} for i, g in enumerate(empty)}).values()):
        assert time.monotonic() < deadline
        time.sleep(1)
    live = f"{names['group']}-live"
    lc = live_consumer(bed.target_bootstrap, live, topic, client_id="described-twice")
    lc.wait_stable(target, live)
    everyone = empty + [live, f"{names['group']}-never"]
    monkeypatch.setattr(java_bridge, "JAVA_BULK_GROUPS", 10_000)
    by_librdkafka, gate_librdkafka = target.describe_groups(everyone), live_groups(target, everyone)
    monkeypatch.setattr(java_bridge, "JAVA_BULK_GROUPS", 0)
    by_java, gate_java = target.describe_groups(everyone), live_groups(target, everyone)
    assert by_java == by_librdkafka
    assert [by_java[g].state for g in empty] == ["EMPTY"] * 4 and not any(by_java[g].members for g in empty)
    assert by_java[f"{names['group']}-never"].state in ("DEAD", "UNKNOWN")
    assert by_java[live].state == "STABLE" and [m.client_id for m in by_java[live].members] == ["described-twice"]
    assert gate_java == gate_librdkafka and [s.group for s in gate_java] == [live]


def test_one_writer_across_hosts_a_killed_holder_is_released_in_bounded_time_and_a_paused_one_is_fenced(bed, run_root):
    """Issue 34 item 2, the target's lease (MM2_FAILOVER_LOCK=kafka): three writers, each a process on its own "host"
    (its own working directory and artifacts folder: no shared disk, so no file lock between them), take the
    target's writer lock through stages.apply.writer_lock - the one apply and rollback use - and commit offsets as
    they do (the lock checked, then HeldLock.commit: the fenced writer). A waits for nobody; B waits while A holds it.
    A is SIGKILLed while holding it: B gets it once A's lease ran out (6 s), not before and not much after. C waits;
    B then stops itself (SIGSTOP: a long GC pause, a frozen VM) after its lock check passed and before its commit is
    sent - the window a lease alone cannot close - and stays stopped past its lease; C gets it and commits; B,
    resumed, sends its commit: the transactional id's newer epoch (C's) refuses it, nothing of it lands, B exits 3.
    Each writer's partition on the target holds the last offset it logged as written."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time
    import uuid

    from mm2_failover.adapters.kafka_lock import KafkaLease
    from mm2_failover.rules import lease as L

    tag = uuid.uuid4().hex[:6]
    topic, group, lock_topic = f"t-lock-{tag}", f"g-lock-{tag}", f"mm2-failover.locks-{tag}"
    target = bed.client("target")
    target.create_topic(topic, 3)
    lease_s = 6.0
    env = {
        **os.environ,
        "MM2_FAILOVER_LOCK": "kafka",
        "MM2_FAILOVER_LOCK_TOPIC": lock_topic,
        "MM2_FAILOVER_LOCK_LEASE_SECONDS": str(lease_s),
        "MM2_FAILOVER_LOCK_MARGIN_SECONDS": "2",
        "MM2_FAILOVER_LOCK_RENEW_SECONDS": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO / "plugins"), str(REPO)]),
    }
    procs: dict[str, subprocess.Popen] = {}
    logs: dict[str, object] = {}

    def start(name: str, partition: int, every: float = 0.2, stop_at: int = 0) -> None:
        host = run_root / "lock-hosts" / f"{name}-{tag}"
        host.mkdir(parents=True)
        logs[name] = open(host / "events.jsonl", "w+")
        procs[name] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "testbed.lock_writer",
                "--bootstrap",
                bed.target_bootstrap,
                "--group",
                group,
                "--topic",
                topic,
                "--partition",
                str(partition),
                "--name",
                name,
                "--wait",
                "60",
                "--every",
                str(every),
                *(["--stop-at-write", str(stop_at)] if stop_at else []),
            ],
            cwd=host,
            env={**env, "MM2_FAILOVER_ARTIFACTS": str(host / "artifacts")},
            stdout=logs[name],
            stderr=open(host / "stderr.log", "w"),
        )

    def events(name: str) -> list[dict]:
        f = logs[name]
        f.flush()
        f.seek(0)
        return [json.loads(x) for x in f.read().splitlines() if x.strip()]

    def when(name: str, event: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = [e for e in events(name) if e["event"] == event]
            if got:
                return got[0]
            if procs[name].poll() is not None and event != "lost":
                break
            time.sleep(0.05)
        raise AssertionError(
            f"{name}: no {event!r} in {timeout:.0f} s: {events(name)}; "
            f"stderr: {(run_root / 'lock-hosts' / f'{name}-{tag}' / 'stderr.log').read_text()[-2000:]}"
        )

    try:
        start("A", 0)
        a = when("A", "acquired", 60)
        when("A", "wrote", 15)
        start("B", 1, every=1.0, stop_at=3)  # it stops itself at its 3rd write (see below)
        when("B", "waiting", 30)
        time.sleep(lease_s)  # B keeps trying while A renews: it must not get it
        assert not [e for e in events("B") if e["event"] == "acquired"], events("B")
        procs["A"].send_signal(signal.SIGKILL)
        t_kill = time.time()
        procs["A"].wait(10)
        b = when("B", "acquired", 30)
        waited = b["t"] - t_kill
        # A's last granted renewal was at most ~1 s (+ a read) before the kill: its lease ran out within 6 s of it
        assert lease_s - 2.0 <= waited <= lease_s + 5.0, waited  # + a poll, a claim and a read on a busy machine
        assert b["token"] > a["token"]
        when("B", "wrote", 15)

        start("C", 2)
        when("C", "waiting", 30)
        # B stops itself at its 3rd write, after the check passed, before the commit is on the wire
        stop = when("B", "stopping", 30)
        t_stop = stop["t"]
        c = when("C", "acquired", 30)
        print(
            f"\n[lock] B got it {waited:.2f} s after A was killed; C {c['t'] - t_stop:.2f} s after B was paused "
            f"(lease {lease_s:g} s); tokens {a['token']} < {b['token']} < {c['token']}"
        )
        assert c["t"] - t_stop <= lease_s + 5.0 and c["token"] > b["token"]
        when("C", "wrote", 15)
        procs["B"].send_signal(signal.SIGCONT)
        lost = when("B", "lost", 30)
        assert procs["B"].wait(15) == 3
        # refused by the transactional id's epoch, not by B's own clock: its check had passed before it stopped
        assert "took its transactional id" in lost["why"] and "nothing of this batch was committed" in lost["why"], lost
        b_writes = [e for e in events("B") if e["event"] == "wrote"]
        assert b_writes and all(e["t"] < c["t"] for e in b_writes), (b_writes, c)  # fenced: nothing after C had it
        assert [e["offset"] for e in b_writes] == [1, 2] and not any(e["error"] for e in b_writes), b_writes
        committed = target.committed(group)
        assert committed[(topic, 1)] == 2, committed  # the stopped write (3) never landed
        a_writes = [e for e in events("A") if e["event"] == "wrote"]
        # nothing of A's after its death either: its last logged write, or the one in flight when it was killed
        # (sent while it held the lease, logged never)
        assert committed[(topic, 0)] in (a_writes[-1]["offset"], a_writes[-1]["offset"] + 1), committed
        # every reader of the records reaches the same answer: C holds it now
        s, _g, _r = KafkaLease({"bootstrap.servers": bed.target_bootstrap}, lock_topic, target.cluster_id(), {}).state()
        assert s.holder is not None and s.token == c["token"] and s.who["run"] == "C"
        assert isinstance(s, L.State)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait(10)


def test_the_approvers_preview_shows_the_plans_own_read_of_the_target(prepared, monkeypatch):
    """build_plan reads the target's commits once: the preview of a plan built in the same call shows the plan's read
    (issue 33, recovery time at 10k groups); a retry that reuses the plan reads them again. What the approver reads
    is the same either way: the commit before the run where there is one, none elsewhere."""
    from mm2_failover.stages.approve_plan import plan_and_preview

    p = prepared
    g = p.names["group"]
    rt = p.prep[g].replica_topic
    p.snapshot_and_checkpoints()
    p.target.alter_offsets(g, {(rt, 2): 3})  # before the run: a commit on partition 2, behind the checkpoint
    ctx = p.ctx(require_approval=True, on_existing_target_offsets="overwrite")
    reads = []
    real_read = type(ctx.target).commits_many
    monkeypatch.setattr(
        type(ctx.target), "commits_many", lambda self, *a, **k: reads.append(a[0]) or real_read(self, *a, **k)
    )
    plan, rep = plan_and_preview(ctx)
    assert len(reads) == 1 and rep.outcome == "awaiting_approval", (reads, rep.outcome)
    shown = {(r["topic"], r["partition"]): r["committed_after"] for r in rep.partitions if r["group"] == g}
    assert shown == {(rt, 0): None, (rt, 1): None, (rt, 2): 3}, shown
    plan2, rep2 = plan_and_preview(p.ctx(require_approval=True, on_existing_target_offsets="overwrite"))
    assert len(reads) == 2 and plan2.rows == plan.rows  # the retry: the plan reused, the target read again
    assert [r["committed_after"] for r in rep2.partitions] == [r["committed_after"] for r in rep.partitions]


def test_the_fenced_writer_commits_byte_for_byte_refuses_a_live_group_and_once_fenced_commits_nothing(
    bed, target, names, live_consumer
):
    """mm2_failover.adapters.fenced, the lease's writer: a batch commits every group's offsets (metadata byte for byte); a
    group with a live member in the batch is refused by name - Kafka accepts a transactional commit of generation -1
    even for a live group, so the writer describes the batch before committing it - and the others land; a second
    writer of the same transactional id fences the first, whose next batch lands nowhere."""
    from mm2_failover.adapters.fenced import Fenced, FencedWriter
    from mm2_failover.adapters.kafka.cluster import Cluster

    topic = names["topic"]
    target.create_topic(topic, 2)
    c = Cluster({"bootstrap.servers": bed.target_bootstrap}, "target")
    tid = f"mm2-failover.test-fence.{names['group']}"
    g1, g2, live = (f"{names['group']}-{x}" for x in ("f1", "f2", "live"))
    live_consumer(bed.target_bootstrap, live, topic, client_id="fence-live").wait_stable(c, live)
    a = FencedWriter(c, tid, 30000)
    try:
        out = a.commit({g1: {(topic, 0): Commit(5, "v1\x00meta")}, g2: {(topic, 1): 7}, live: {(topic, 0): 3}})
        assert out[g1] is None and out[g2] is None, out
        assert "live member" in out[live] and "fence-live" in out[live], out
        assert c.commits(g1) == {(topic, 0): Commit(5, "v1\x00meta")} and c.commits(g2) == {(topic, 1): Commit(7, "")}
        assert c.commits(live) == {}  # never rewritten under its consumer
        b = FencedWriter(c, tid, 30000)  # the next holder takes the id
        try:
            with pytest.raises(Fenced, match="took its transactional id"):
                a.commit({g1: {(topic, 0): 9}, g2: {(topic, 1): 9}})
            assert c.commits(g1)[(topic, 0)].offset == 5 and c.commits(g2)[(topic, 1)].offset == 7  # none of it
            assert b.commit({g1: {(topic, 0): 11}}) == {g1: None}
            assert c.commits(g1)[(topic, 0)].offset == 11
        finally:
            b.close()
    finally:
        a.close()
    from mm2_failover.adapters.kafka.kafka_errors import KafkaConfigError

    with pytest.raises(KafkaConfigError, match="MM2_FAILOVER_LOCK_LEASE_SECONDS"):  # above the brokers' 15 min
        FencedWriter(c, tid, 3600 * 1000)


def test_the_fenced_writer_takes_its_id_however_short_the_clients_timeout(bed, target, names):
    """The CI's lock test (above) failed once: B, whose client timeout is 1 s, was granted the lease after A was killed
    mid-transaction, and its initTransactions timed out while the coordinator was still aborting A's transaction (a
    busy 2-core machine). Taking the id waits for the previous holder's open transaction to end, which its timeout -
    the lease - bounds: the writer retries initTransactions (Kafka says it is safe to) until the client's timeout plus
    a lease have passed, so a client timeout far too short for one round trip still takes the id."""
    from mm2_failover.adapters.fenced import FencedWriter
    from mm2_failover.adapters.kafka.cluster import Cluster

    c = Cluster({"bootstrap.servers": bed.target_bootstrap}, "target", 0.001)  # 1 ms: no round trip fits
    FencedWriter(c, f"mm2-failover.test-short.{names['group']}", 6000).close()  # READY: initTransactions returned
