from mm2_failover import drain
from mm2_failover.drain import PartitionObservation as O


def obs(**kw):
    base = dict(topic="orders", partition=0, replica_topic="primary.orders", source_end_before=100, source_end=100,
                replicated=99, data_after_replicated=None, replica_end_before=100, replica_end=100)
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


def test_without_mm2_progress_falls_back_to_end_offsets_and_says_so():
    assert drain.evaluate([obs(replicated=None)], False).rows[0]["state"] == drain.PROGRESS_UNKNOWN
    assert drain.evaluate([obs(replicated=None, replica_end=90)], False).rows[0]["state"] == drain.BEHIND


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
    assert drain.evaluate([obs(replicated=None, replica_end=90)], False).rows[0]["state"] == drain.BEHIND  # not home


def test_disaster_mode_needs_a_stable_replica_and_stable_progress():
    d = dict(source_end_before=None, source_end=None)
    assert drain.evaluate([obs(**d)], disaster=True).drained
    assert not drain.evaluate([obs(**d, replica_end_before=95)], disaster=True).drained
    assert not drain.evaluate([obs(**d, progress_moved=True)], disaster=True).drained


def test_rpo_estimate_from_the_newest_replicated_record():
    r = drain.rpo_estimate([obs(newest_replicated_ms=1_000), obs(partition=1, newest_replicated_ms=4_000)],
                           now_ms=10_000, heartbeat_ms=9_000)
    assert r["newest_replicated_record_ms"] == 4_000 and r["oldest_partition_tail_ms"] == 1_000
    assert r["seconds_since_newest_replicated_record"] == 6.0 and r["seconds_since_mm2_heartbeat"] == 1.0
    assert drain.rpo_estimate([obs()], 10_000, None)["seconds_since_newest_replicated_record"] is None


def test_table_lists_every_partition():
    t = drain.evaluate([obs(), obs(partition=1, source_end_before=90)], False).table()
    assert "producers still writing" in t and t.count("\n") == 2
