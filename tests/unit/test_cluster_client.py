"""One ``Cluster`` shared by threads has one AdminClient: found by a fresh-clone run, where two archive writers
sharing the source's Cluster each built one on first use, one was dropped while its request was in flight, and that
request failed with ``_DESTROY`` ("Handle destroyed for termination")."""

from __future__ import annotations

import threading

from mm2_failover.kafka_io import Cluster


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
