"""The driver's checks against the cluster, before Spark starts (librdkafka): the topics and partitions exist, the
end offsets are within the log, no record of the range was deleted since the snapshot; and the current log end for
a state refresh. Refused or misconfigured is a bad argument (exit 2), unreachable exit 4 (:class:`Unreachable`),
records deleted since the snapshot exit 5 (:class:`LostSinceSnapshot`)."""

from __future__ import annotations

import contextlib

from mm2_failover.adapters.kafka.cluster import Cluster
from mm2_failover.adapters.kafka.kafka_errors import KafkaConfigError, KafkaUnavailable, MissingTopics
from mm2_failover.jobs.checkpoint_pass.job_args import BadArguments


class Unreachable(RuntimeError):
    pass


class LostSinceSnapshot(RuntimeError):
    pass


@contextlib.contextmanager
def driver_check():
    """The driver's own calls to the cluster (librdkafka, before Spark): refused (authentication, a missing ACL) or
    misconfigured is a bad argument - retrying won't help (exit 2); unreachable is exit 4."""
    try:
        yield
    except KafkaConfigError as e:
        raise BadArguments(str(e)) from None
    except KafkaUnavailable as e:
        raise Unreachable(str(e)) from None


def check_against_cluster(
    conf: dict,
    topics: dict[str, str],
    end: dict[str, dict[int, int]],
    start: dict[str, dict[int, int]],
    timeout: float = 15.0,
) -> dict[str, dict[int, int]]:
    """Every topic and partition exists; every end offset is within [log start, log end]; no record of the range
    was deleted since the snapshot. Returns the start offsets to read from (captured, or the current log start)."""
    with driver_check():
        c = Cluster(conf, "target", timeout)
        existing = c.topics()
        missing = sorted(t for t in end if t not in existing)
        if missing:
            raise BadArguments(str(MissingTopics("target", missing)))
        bad_parts = sorted(
            f"{t}[{p}] (the topic has {existing[t]})" for t, ps in end.items() for p in ps if p >= existing[t]
        )
        if bad_parts:
            raise BadArguments(f"partition(s) that do not exist: {', '.join(bad_parts)}")
        tps = [(t, p) for t, ps in end.items() for p in ps]
        lo, hi = c.offsets(tps, "earliest"), c.offsets(tps, "latest")
    out: dict[str, dict[int, int]] = {}
    for t, p in tps:
        e_, l_, h_ = end[t][p], lo[(t, p)], hi[(t, p)]
        if e_ > h_:
            raise BadArguments(
                f"{t} partition {p}: end offset {e_} is past the log end {h_} (was the topic "
                "recreated? capture the end offsets again)"
            )
        s = start.get(t, {}).get(p)
        if s is not None and l_ > s and l_ > 0 and s < e_:
            raise LostSinceSnapshot(
                f"{t} partition {p}: records [{s}, {min(l_, e_)}) of the range were deleted since "
                f"the snapshot (log start now {l_}): the checkpoints captured are no longer all "
                "there. Start a new run (a new snapshot)."
            )
        if s is None and e_ and e_ < l_:
            raise BadArguments(
                f"{t} partition {p}: end offset {e_} is below the log start {l_}: every record of the range was deleted"
            )
        out.setdefault(t, {})[p] = l_ if s is None else max(s, l_)
    return out


def current_end_offsets(conf: dict, topics: dict[str, str], timeout: float) -> dict[str, dict[int, int]]:
    """Every partition of the checkpoints topics and its current log end (the refresh reads up to there)."""
    with driver_check():
        c = Cluster(conf, "target", timeout)
        existing = c.topics()
        missing = sorted(t for t in topics.values() if t not in existing)
        if missing:
            raise BadArguments(f"checkpoints topic(s) {missing} do not exist on the target")
        tps = [(t, p) for t in topics.values() for p in range(existing[t])]
        hi = c.offsets(tps, "latest")
    out: dict[str, dict[int, int]] = {}
    for t, p in tps:
        out.setdefault(t, {})[p] = hi[(t, p)]
    return out
