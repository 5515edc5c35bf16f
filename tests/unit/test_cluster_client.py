"""One ``Cluster`` shared by threads has one AdminClient: found by a fresh-clone run, where two archive writers
sharing the source's Cluster each built one on first use, one was dropped while its request was in flight, and that
request failed with ``_DESTROY`` ("Handle destroyed for termination")."""

from __future__ import annotations

import threading

from mm2_failover.adapters.kafka.cluster import Cluster


def test_threads_that_first_use_a_cluster_together_share_one_admin_client():
    for _ in range(5):
        cluster = Cluster({"bootstrap.servers": "127.0.0.1:1"}, "source")  # never contacted: the client is lazy
        barrier, seen = threading.Barrier(8), []

        def first_use(barrier=barrier, seen=seen, cluster=cluster):
            barrier.wait(10)
            seen.append(cluster.admin)

        threads = [threading.Thread(target=first_use) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(seen) == 8
        assert len({id(a) for a in seen}) == 1, f"{len({id(a) for a in seen})} AdminClients for one cluster"


class _Listing:
    """An AdminClient whose ``list_offsets`` answers each partition with the next outcome of ``outcomes`` (an error
    code, or None for offset 7)."""

    def __init__(self, outcomes):
        self.outcomes, self.calls = list(outcomes), 0

    def list_offsets(self, req, request_timeout=None):
        from concurrent.futures import Future

        from confluent_kafka import KafkaError, KafkaException

        self.calls += 1
        code = self.outcomes.pop(0) if self.outcomes else None
        futs = {}
        for tp in req:
            f = Future()
            if code is None:
                f.set_result(type("Info", (), {"offset": 7})())
            else:
                f.set_exception(KafkaException(KafkaError(code)))
            futs[tp] = f
        return futs


def _listing_cluster(outcomes):
    cluster = Cluster({"bootstrap.servers": "127.0.0.1:1"}, "target", timeout=2)
    cluster._admin = _Listing(outcomes)
    return cluster


def test_a_leader_moving_while_offsets_are_listed_is_retried_not_a_failure():
    """Found by CI at 6c544e7: a replica topic MM2 had just created answered ListOffsets with UNKNOWN_LEADER_EPOCH
    ("Leader epoch is newer than broker epoch") and the wait for replication failed with a bare RuntimeError. Kafka
    names the leadership codes retriable; the read is idempotent, so it is asked again."""
    from confluent_kafka import KafkaError

    for code in (
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.OFFSET_NOT_AVAILABLE,
    ):
        cluster = _listing_cluster([code, code])
        assert cluster.offsets([("t", 0), ("t", 1)]) == {("t", 0): 7, ("t", 1): 7}, code
        assert cluster._admin.calls == 3


def test_a_leader_that_never_settles_is_named_as_unavailable_with_what_to_do():
    from confluent_kafka import KafkaError

    from mm2_failover.adapters.kafka.kafka_errors import KafkaUnavailable

    cluster = _listing_cluster([KafkaError.UNKNOWN_LEADER_EPOCH] * 1000)
    try:
        cluster.offsets([("t", 0)])
    except KafkaUnavailable as e:
        assert "target" in str(e) and "UNKNOWN_LEADER_EPOCH" in str(e) and "leader" in str(e), str(e)
    else:
        raise AssertionError("no error")
