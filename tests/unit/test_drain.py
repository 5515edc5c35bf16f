from mm2_failover.rules import drain
from mm2_failover.rules.drain import PartitionObservation as O


def obs(**kw):
    base = dict(
        topic="orders",
        partition=0,
        replica_topic="primary.orders",
        source_end_before=100,
        source_end=100,
        replicated=99,
        data_after_replicated=None,
        replica_end_before=100,
        replica_end=100,
    )
    base.update(kw)
    return O(**base)


def test_drained_when_quiet_and_mm2_replicated_up_to_the_end():
    v = drain.evaluate([obs()], disaster=False)
    assert v.drained and v.rows[0]["state"] == drain.DRAINED and v.rows[0]["moved"] == 0


def test_moving_source_is_producers_still_writing():
    v = drain.evaluate([obs(source_end_before=90), obs(partition=1)], disaster=False)
    assert not v.drained
    assert [r["state"] for r in v.rows] == [drain.WRITING, drain.DRAINED]
    assert v.rows[0]["moved"] == 10


def test_mm2_progress_behind_is_replication_behind():
    v = drain.evaluate([obs(replicated=80, data_after_replicated=True)], disaster=False)
    assert not v.drained and v.rows[0]["state"] == drain.BEHIND


def test_only_transaction_markers_after_the_last_replicated_record_count_as_caught_up():
    # source end 100, MM2 replicated offset 97, records 98-99 are markers / aborted: nothing left to replicate
    v = drain.evaluate([obs(replicated=97, data_after_replicated=False, replica_end=96)], disaster=False)
    assert v.drained


def test_without_mm2_progress_the_source_s_last_record_decides_and_says_so():
    copied, not_yet = drain.TailCheck(True), drain.TailCheck(False, "no copy")
    assert drain.evaluate([obs(replicated=None, tail=copied)], False).rows[0]["state"] == drain.PROGRESS_UNKNOWN
    row = drain.evaluate([obs(replicated=None, tail=not_yet, replica_end=115)], False).rows[0]
    assert row["state"] == drain.BEHIND and row["why"] == "no copy"
    for unknown in (None, drain.TailCheck(None, "source read failed")):  # never drained on what was not read
        v = drain.evaluate([obs(replicated=None, tail=unknown)], False)
        assert not v.drained and v.rows[0]["state"] == drain.TAIL_UNKNOWN


def test_a_replica_longer_than_the_source_whose_last_records_were_never_copied_is_not_drained():
    """Issue 50 item 2, as reproduced on real clusters: source 0..109; MM2 copied 0..89, restarted at 60 and copied
    60..89 again (the replica is 120 long: longer than the source), and never copied 90..109. The old fallback
    (replica end >= source end) said drained; a group at 95 was placed at the replica's end and lost 95..109."""
    from testbed.memlog import DATA, MemoryLog, Partition

    src = MemoryLog("source", {("orders", 0): Partition([(DATA, i) for i in range(110)])})
    rep = MemoryLog("target", {("primary.orders", 0): Partition([(DATA, i) for i in [*range(90), *range(60, 90)]])})
    tail = drain.last_record_copied(src, rep, ("orders", 0), ("primary.orders", 0), 110, 120)
    assert tail.copied is False and "offset 109" in tail.why
    v = drain.evaluate(
        [
            obs(
                replicated=None,
                source_end=110,
                source_end_before=110,
                replica_end=120,
                replica_end_before=120,
                tail=tail,
            )
        ],
        False,
    )
    assert not v.drained and v.rows[0]["state"] == drain.BEHIND
    # once MM2 re-copied to the end (its restarted history got there): drained, whatever the replica's length
    done = MemoryLog("target", {("primary.orders", 0): Partition([(DATA, i) for i in [*range(90), *range(60, 110)]])})
    assert drain.last_record_copied(src, done, ("orders", 0), ("primary.orders", 0), 110, 140).copied is True


def test_missing_replica_is_never_drained():
    v = drain.evaluate([obs(replica_end=None)], disaster=False)
    assert not v.drained and v.rows[0]["state"] == drain.NOT_REPLICATED


def test_failing_back_a_home_topic_needs_quiet_producers_only():
    """primary.orders on backup returns home to orders on primary: MM2's backup->primary flow never copies it (a
    cycle), so no progress and unequal ends are expected; a producer still writing it is not."""
    home = dict(topic="primary.orders", replica_topic="orders", replicated=None, replica_end=130, home=True)
    v = drain.evaluate([obs(**home)], disaster=False)
    assert v.drained and v.rows[0]["state"] == drain.HOME and v.not_drained() == []
    assert drain.evaluate([obs(**home, source_end_before=90)], False).rows[0]["state"] == drain.WRITING
    assert drain.evaluate([obs(**{**home, "replica_end": None})], False).rows[0]["state"] == drain.NOT_REPLICATED
    v = drain.evaluate([obs(replicated=None, replica_end=90, tail=drain.TailCheck(False))], False)  # not home
    assert v.rows[0]["state"] == drain.BEHIND


def test_disaster_mode_needs_a_stable_replica_and_stable_progress():
    d = dict(source_end_before=None, source_end=None)
    assert drain.evaluate([obs(**d)], disaster=True).drained
    assert not drain.evaluate([obs(**d, replica_end_before=95)], disaster=True).drained
    assert not drain.evaluate([obs(**d, progress_moved=True)], disaster=True).drained


def test_rpo_estimate_from_the_newest_replicated_record():
    r = drain.rpo_estimate(
        [obs(newest_replicated_ms=1_000), obs(partition=1, newest_replicated_ms=4_000)],
        now_ms=10_000,
        heartbeat_ms=9_000,
    )
    assert r["newest_replicated_record_ms"] == 4_000 and r["oldest_partition_tail_ms"] == 1_000
    assert r["seconds_since_newest_replicated_record"] == 6.0 and r["seconds_since_mm2_heartbeat"] == 1.0
    assert drain.rpo_estimate([obs()], 10_000, None)["seconds_since_newest_replicated_record"] is None


def test_table_lists_every_partition():
    t = drain.evaluate([obs(), obs(partition=1, source_end_before=90)], False).table()
    assert "producers still writing" in t and t.count("\n") == 2


def test_a_wait_says_what_is_left_how_far_behind_and_how_long_each_time_it_checks():
    v = drain.evaluate(
        [
            obs(),
            obs(partition=1, source_end_before=90),
            obs(partition=2, replicated=80, data_after_replicated=True),
            obs(partition=3, replicated=49, source_end=100, data_after_replicated=True),
        ],
        False,
    )
    line = v.progress(seconds_left=118.4, seconds_waited=62.0)
    assert line == (
        "3 of 4 partition(s) not drained (1 producers still writing, 2 replication behind); MM2 69 "
        "record(s) behind (orders[3] 50, orders[2] 19); waited 62 s, 118 s left"
    )
    assert drain.evaluate([obs(source_end_before=90)], False).progress(-3) == (
        "1 of 1 partition(s) not drained (1 producers still writing); waited 0 s, 0 s left"
    )
    assert drain.evaluate([obs()], False).progress(5) == "0 of 1 partition(s) not drained; waited 0 s, 5 s left"


# ------------------------------------------------------------------------------------------ after the last replicated


def test_records_never_replicated_and_gone_from_the_source_refuse_the_run():
    """Issue 31 item 5: MM2's last replicated offset 9, the source's log start 40 (retention): 30 offsets were never
    copied and are gone. With librdkafka's default reset the read after 9 returned nothing and this counted as
    drained."""
    from testbed.memlog import MemoryLog, Partition

    src = MemoryLog("source", {("orders", 0): Partition([("data", i) for i in range(100)], start=40)})
    after = drain.after_replicated(src, ("orders", 0), 9, 100)
    assert after == drain.AfterReplicated(None, gone=30)
    v = drain.evaluate([obs(replicated=9, gone_unreplicated=after.gone)], disaster=False)
    assert not v.drained and v.rows[0]["state"] == drain.GONE
    msg = v.unreplicated_loss()
    assert "30 record offset(s) were never replicated and are gone" in msg and "orders[0]" in msg
    assert "source_reachable=no" in msg


def test_the_check_after_the_last_replicated_offset_stops_at_the_first_data_record():
    from testbed.memlog import MARKER, MemoryLog, Partition

    part = Partition([("data", i) for i in range(10)] + [(MARKER, None)] * 2500 + [("data", "x")] * 5000)
    src = MemoryLog("source", {("orders", 0): part})
    assert drain.after_replicated(src, ("orders", 0), 9, part.end) == drain.AfterReplicated(True)
    assert max(hi for _tp, _lo, hi, _s in src.reads) == 10 + 3000  # chunks of 1,000, not the whole backlog


def test_a_failed_read_after_the_last_replicated_offset_is_its_own_state():
    from testbed.memlog import MemoryLog, Partition

    src = MemoryLog(
        "source", {("orders", 0): Partition([("data", i) for i in range(20)])}, fail=lambda tp, lo, hi: True
    )
    after = drain.after_replicated(src, ("orders", 0), 9, 20)
    assert after.data is None and "failed" in after.why
    v = drain.evaluate([obs(replicated=9, source_end=20, source_end_before=20, after_check_failed=after.why)], False)
    assert not v.drained and v.rows[0]["state"] == drain.CHECK_FAILED and "failed" in v.rows[0]["why"]


def drain_world(seed: int):
    import random

    from testbed.memlog import ABORTED, DATA, MARKER, MemoryLog, Partition

    rnd = random.Random(seed)
    n = rnd.randint(1, 60)
    part = Partition([(k, i) for i, k in enumerate(rnd.choices([DATA, MARKER, ABORTED], [0.5, 0.3, 0.2], k=n))])
    if rnd.random() < 0.4:
        part.start = rnd.randint(0, n)
    replicated = rnd.randint(-1, n - 1)
    return part, replicated, MemoryLog("source", {("orders", 0): part}, fail=lambda tp, lo, hi: rnd.random() < 0.1)


def drain_violations(seed: int) -> list:
    """A partition counted as caught up must have nothing left to copy: no data record after MM2's last replicated
    offset, and nothing after it already gone."""
    part, replicated, src = drain_world(seed)
    after = drain.after_replicated(src, ("orders", 0), replicated, part.end, chunk=7)
    unreplicated = range(replicated + 1, part.end)
    if after.data is False and (any(part.entries[o][0] == "data" for o in unreplicated) or replicated + 1 < part.start):
        return [("counted as caught up", replicated, part.start, part.end, after)]
    if after.gone != max(0, part.start - replicated - 1):
        return [("gone miscounted", after)]
    return []


def test_the_caught_up_check_never_passes_over_a_record_left_to_copy():
    bad = [v for seed in range(3000) for v in drain_violations(seed)]
    assert not bad, bad[:5]


def test_mutation_5_a_check_that_jumps_past_the_log_start_is_caught(monkeypatch):
    """Item 5: librdkafka's default reset and no "gone" case: the read after the last replicated offset returns
    nothing, and the partition counts as caught up."""
    from mm2_failover.adapters.kafka import cluster

    monkeypatch.setattr(cluster, "BOUNDED_READ_CONF", {})
    monkeypatch.setattr(drain, "unreplicated_gone", lambda replicated, log_start: 0)
    assert any(v[0] == "counted as caught up" for seed in range(3000) for v in drain_violations(seed))


# ------------------------------------------------------------------------------------------ without MM2's progress


def tail_violations(seed: int) -> list:
    """testbed.worlds' worlds (MM2 copying one partition with restarts that copy again, exactly-once support, aborted
    and compacted records, producer-retry twins), with MM2 stopped anywhere and its progress unreadable: a partition
    the drain check calls drained must have every record ever produced copied on the replica (by content: a twin's
    copy delivers the same record; a record retention deleted before MM2 copied it is lost, never drained)."""
    from testbed.memlog import DATA, MemoryLog
    from testbed.worlds import REP, SRC, world

    w = world(seed)
    if w.target.start:  # the replica's retention took copies: a loss of its own, not the drain's
        return []
    src, rep = MemoryLog("source", {SRC: w.source}), MemoryLog("target", {REP: w.target})
    tail = drain.last_record_copied(src, rep, SRC, REP, w.source.end, w.target.end, chunk=7, window=40)
    o = obs(
        replicated=None,
        source_end=w.source.end,
        source_end_before=w.source.end,
        replica_end=w.target.end,
        replica_end_before=w.target.end,
        tail=tail,
    )
    if not drain.evaluate([o], False).drained:
        return []
    # every record ever produced - those retention deleted too: one never copied is lost either way, and a drain
    # check without MM2's progress that calls it drained fails open (the review's case)
    held = {c for k, c in w.source.entries if k == DATA}
    copied = {c for k, c in w.target.entries if k == DATA}
    missing = held - copied
    return [("drained with records never copied", seed, sorted(missing, key=str)[:5], tail)] if missing else []


def test_without_progress_a_drained_partition_has_every_record_copied():
    bad = [v for seed in range(4000) for v in tail_violations(seed)]
    assert not bad, bad[:5]


def test_mutation_6_the_end_offset_fallback_is_caught(monkeypatch):
    """Issue 50 item 2: without MM2's progress, "replica end >= source end" (the old fallback) - MM2's duplicates
    after a restart make the replica as long as the source while its last records were never copied."""
    monkeypatch.setattr(drain, "last_record_copied", lambda s, r, stp, rtp, se, re, **kw: drain.TailCheck(re >= se))
    assert any(tail_violations(seed) for seed in range(4000))


def test_a_source_emptied_by_retention_is_not_known_without_progress():
    """The review: source 0..109, MM2 copied 0..89, retention moved the log start to 110 - "no data record on the
    source" said nothing to copy (drained) while 90..109 were never copied. Only a source that never held a record
    below its log start has nothing to copy."""
    from testbed.memlog import DATA, MemoryLog, Partition

    src = MemoryLog("source", {("orders", 0): Partition([(DATA, i) for i in range(110)], start=110)})
    rep = MemoryLog("target", {("primary.orders", 0): Partition([(DATA, i) for i in range(90)])})
    tail = drain.last_record_copied(src, rep, ("orders", 0), ("primary.orders", 0), 110, 90)
    assert tail.copied is None and "log start 110" in tail.why
    empty = MemoryLog("source", {("orders", 0): Partition([])})
    assert drain.last_record_copied(empty, rep, ("orders", 0), ("primary.orders", 0), 0, 90).copied is True


def test_mutation_7_a_source_emptied_by_retention_taken_as_nothing_to_copy_is_caught(monkeypatch):
    """The review's case as a mutation: no data record above a log start > 0 read as "nothing to copy"."""
    real = drain.last_record_copied

    def mutated(source, replica, stp, rtp, se, re, **kw):
        got = real(source, replica, stp, rtp, se, re, **kw)
        return drain.TailCheck(True) if got.copied is None and "log start" in got.why else got

    monkeypatch.setattr(drain, "last_record_copied", mutated)
    assert any(tail_violations(seed) for seed in range(4000))


def test_the_data_loss_window_is_said_in_words_never_as_a_dict():
    """Issue 53: the approval request and the report showed the disaster-mode window as a Python dict ("Data-loss
    window: {'meaning': ..."): said in words, with the figures it has, and what is not known said so."""
    r = drain.rpo_estimate(
        [obs(newest_replicated_ms=1_000), obs(partition=1, newest_replicated_ms=4_000)], 10_000, 9_000
    )
    said = drain.loss_window_text(r)
    assert "{" not in said and "'" not in said.replace("MM2's", "")
    assert said == (
        "records produced on the lost source after 1970-01-01T00:00:04+00:00 (the newest record MM2 "
        "copied, 6.0 s before the check; 9.0 s on the partition furthest behind) never reached the target; "
        "MM2's heartbeat was 1.0 s old"
    )
    none = drain.loss_window_text(drain.rpo_estimate([obs()], 10_000, None))
    assert none == (
        "not known: no record MM2 copied from the lost source was found on the target, and no heartbeat of MM2's"
    )
    assert drain.loss_window_text(None) == "not known"
