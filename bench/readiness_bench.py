"""Benchmark: readiness intervals at G groups x P partitions on the real bed, against Kafka's own translateOffsets
(issue 33 item 1: "10k groups x 10 partitions must be computed well inside one interval").

    PYTHONPATH=plugins:. .venv/bin/python bench/readiness_bench.py --groups 10000 --partitions 10

1. starts a bed: two KRaft brokers and real MirrorMaker 2 (checkpoints every second);
2. a source topic of P partitions, R records each, replicated; G groups committed on the source (each at its own
   offset per partition, through AlterConsumerGroupOffsets, 64 requests in flight);
3. waits until MM2 has checkpointed them (the checkpoint topic stops growing);
4. what ``mm2_sync_archive`` does every interval: the offset-sync archive and the latest-checkpoint state (Spark);
5. times every step of a readiness interval exactly as ``python -m mm2_failover readiness`` runs them
   (:func:`mm2_failover.cli.readiness_steps`: audit, one drain observation, end offsets, the Spark job's tail on the
   state, the dry-run plan and the assessment), ``--intervals`` times (the first has nothing to compare with);
6. the peer, in the same run: Kafka's own ``RemoteClusterUtils.translateOffsets`` batch overload (KIP-1239, one JVM,
   every group in one read of the checkpoint topic) - which answers only "MM2's latest checkpoint per group",
   a part of what readiness computes. Checked: its answers (count and checksum over every key, and a sample of
   groups) equal the checkpoints readiness planned from, and every (group, partition) has a readiness row.

Prints a table and writes bench/results/readiness-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins"))
sys.path.insert(0, str(REPO))

from bench.apply_bench import make_plan  # noqa: E402
from bench.latest_checkpoints_bench import answers, run_java  # noqa: E402
from testbed.bed import Bed  # noqa: E402

TOPIC = "bench-ready"
PREFIX = "rb"


def wait_checkpointed(target, topic: str, want: int, most_s: float) -> tuple[int, float]:
    """Until the checkpoint topic holds ``want`` records, or stops growing for 20 s; (records, seconds)."""
    t0 = time.monotonic()
    last, since = -1, time.monotonic()
    while time.monotonic() - t0 < most_s:
        n = sum(target.offsets(target.partitions([topic])).values())
        if n >= want:
            return n, time.monotonic() - t0
        if n != last:
            last, since = n, time.monotonic()
            print(f"  {n} checkpoint records after {time.monotonic() - t0:.0f} s", flush=True)
        elif time.monotonic() - since > 20 and n > 0:
            return n, time.monotonic() - t0
        time.sleep(2)
    return last, time.monotonic() - t0


def write_checkpoints(
    bootstrap: str,
    topic: str,
    groups: int,
    partitions: int,
    records: int,
    prefix: str = PREFIX,
    source_topic: str = TOPIC,
) -> int:
    """One checkpoint record per (group, partition) of the bench, in MM2's format, at the group's commit (the same
    offsets as :func:`bench.apply_bench.make_plan` with ``prefix``); returns how many."""
    from confluent_kafka import Producer

    from mm2_failover.rules import checkpoints as cpf

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "queue.buffering.max.messages": 2_000_000})
    n = 0
    for g in range(groups):
        for part in range(partitions):
            o = (g * 7 + part) % records
            p.produce(
                topic,
                key=cpf.encode_key(f"{prefix}-{g:06d}", f"primary.{source_topic}", part),
                value=cpf.encode_value(o, o),
                partition=0,
            )
            n += 1
            if n % 50_000 == 0:
                p.poll(0)
    assert p.flush(120) == 0
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=10000)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--records", type=int, default=1000, help="records per source partition")
    ap.add_argument("--intervals", type=int, default=2)
    ap.add_argument("--sample", type=int, default=50, help="groups whose answers are compared one by one")
    ap.add_argument(
        "--checkpoints",
        choices=("written", "mm2"),
        default="written",
        help="the bench groups' checkpoint records: written in MM2's format (default), or emitted by MM2 "
        "(slow at thousands of groups: see the comment in main)",
    )
    ap.add_argument(
        "--spark",
        choices=("connect", "submit"),
        default="connect",
        help="the Spark job on a warm Spark Connect server (the deployment's spark_connect_default) or "
        "through spark-submit (a JVM per job)",
    )
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    root = REPO / "var" / "bench" / f"readiness-{time.strftime('%Y%m%d-%H%M%S')}"
    os.environ["MM2_FAILOVER_ARTIFACTS"] = str(root / "artifacts")
    os.environ.pop("MM2_FAILOVER_ARCHIVE", None)
    out: dict = {
        "groups": args.groups,
        "partitions": args.partitions,
        "records_per_partition": args.records,
        "cores": os.cpu_count(),
        "setup": {},
        "intervals": [],
    }
    import contextlib

    from mm2_failover import cli
    from mm2_failover.adapters.kafka.cluster import Cluster
    from mm2_failover.adapters.runfolder import RunFolder
    from mm2_failover.stages.apply import apply_plan
    from testbed import localenv
    from testbed.bed import free_port
    from testbed.scenario import produce, wait_replicated
    from testbed.spark_connect import SparkConnectServer

    with contextlib.ExitStack() as stack:
        if args.spark == "connect":
            server = SparkConnectServer.start(root / "spark-connect", free_port())
            stack.callback(server.stop)
            os.environ["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"] = localenv.spark_connect_conn(server.port)
        else:
            os.environ.pop("AIRFLOW_CONN_SPARK_CONNECT_DEFAULT", None)
        out["spark"] = args.spark
        # Real MM2 checkpoints 10k groups far too slowly on this machine (measured: 100k records took more than 15
        # minutes - 30 to 100 records/s, MM2 at 1.4 cores, with its group refresh at 1 s or at 30 s), so with
        # --checkpoints written the bench's groups are excluded from MM2's checkpointing and their checkpoint records
        # are written in MM2's format to MM2's checkpoint topic (downstream = upstream: the topic is replicated from
        # offset 0, no transactions); replication, offset syncs, progress and heartbeats stay real MM2's.
        mm2 = {"groups.exclude": f"{PREFIX}-.*"} if args.checkpoints == "written" else {}
        bed = stack.enter_context(Bed(run_dir=root / "bed", mm2=mm2))
        os.environ["AIRFLOW_CONN_KAFKA_SOURCE"] = json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": bed.source_bootstrap}}
        )
        os.environ["AIRFLOW_CONN_KAFKA_TARGET"] = json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": bed.target_bootstrap}}
        )
        source = Cluster({"bootstrap.servers": bed.source_bootstrap}, "source", timeout=60)
        target = Cluster({"bootstrap.servers": bed.target_bootstrap}, "target", timeout=60)
        t0 = time.monotonic()
        source.create_topic(TOPIC, args.partitions)
        produce(bed.source_bootstrap, TOPIC, args.partitions, args.records)
        wait_replicated(source, target, TOPIC, f"primary.{TOPIC}", timeout=300)
        out["setup"]["produce_and_replicate_s"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        res = apply_plan(source, make_plan(PREFIX, args.groups, TOPIC, args.partitions, args.records), 64)
        assert not res.refused, list(res.refused.items())[:3]
        out["setup"]["commit_groups_on_source_s"] = round(time.monotonic() - t0, 1)
        print(
            f"{args.groups} groups x {args.partitions} partitions committed on the source in "
            f"{out['setup']['commit_groups_on_source_s']} s; waiting for MM2's checkpoints",
            flush=True,
        )
        if args.checkpoints == "written":
            t0 = time.monotonic()
            n = write_checkpoints(
                bed.target_bootstrap, bed.checkpoints_topic, args.groups, args.partitions, args.records
            )
            out["setup"].update(checkpoint_records=n, checkpoints_written_s=round(time.monotonic() - t0, 1))
        else:
            n, s = wait_checkpointed(target, bed.checkpoints_topic, args.groups * args.partitions, 3600)
            out["setup"].update(checkpoint_records=n, mm2_checkpointed_s=round(s, 1))
        out["checkpoints"] = args.checkpoints
        base = ["--target-bootstrap", bed.target_bootstrap, "--source-bootstrap", bed.source_bootstrap]
        t0 = time.monotonic()
        assert cli.main([*base, "archive", "--groups-regex", f"{PREFIX}-.*"]) == 0
        out["setup"]["archive_s"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        assert cli.main([*base, "refresh-state", "--groups-regex", f"{PREFIX}-.*"]) == 0
        out["setup"]["refresh_state_s"] = round(time.monotonic() - t0, 1)

        for i in range(args.intervals):
            a = cli.parser().parse_args(
                [
                    *base,
                    "readiness",
                    "--groups-regex",
                    f"{PREFIX}-.*",
                    "--drain-quiet-seconds",
                    "1",
                    "--run-dir",
                    str(root / "artifacts" / "mm2_failover_readiness" / f"i{i}"),
                ]
            )
            ctx = cli.context_of(a, "readiness")
            steps = {}
            t_all = time.monotonic()
            result = None
            for name, step in cli.readiness_steps(a, ctx):
                t = time.monotonic()
                result = step()
                steps[name] = round(time.monotonic() - t, 2)
            total = round(time.monotonic() - t_all, 2)
            r, worse = result
            sizes = {p.name: p.stat().st_size for p in ctx.folder.dir.iterdir() if p.is_file()}
            row = {
                "interval": i,
                "steps_s": steps,
                "total_s": total,
                "summary": r.summary,
                "degraded": [d.what for d in worse],
                "files_bytes": sizes,
            }
            out["intervals"].append(row)
            print(f"interval {i}: {total} s {steps}", flush=True)
            folder = RunFolder(ctx.folder.dir)

        # the peer, the same checkpoints: Kafka's batch translateOffsets over every group
        rows = folder.load_plan().plan.as_dicts()
        ours: dict[str, dict] = {}
        for x in rows:
            if x.get("downstream_offset") is not None:
                ours.setdefault(x["group"], {})[(x["topic"], x["partition"])] = x["downstream_offset"]
        groups = sorted(ours)
        sample = [
            groups[round(k * (len(groups) - 1) / max(1, args.sample - 1))] for k in range(min(args.sample, len(groups)))
        ]
        peer = run_java("batch", bed.target_bootstrap, sample)
        batch = next(e for e in peer["events"] if e["event"] == "batch")
        theirs = answers(peer["events"])
        keys = sum(len(v) for v in ours.values())
        checksum = sum(o for v in ours.values() for o in v.values())
        checks = {
            "peer_keys": batch["keys"],
            "our_keys": keys,
            "peer_checksum": batch["checksum"],
            "our_checksum": checksum,
            "sample_groups": len(sample),
            "sample_mismatches": [g for g in sample if theirs.get(g) != ours.get(g)],
            "readiness_rows": r.summary["partitions"],
            "plan_rows": len(rows),
        }
        checks["ok"] = (
            checks["peer_keys"] == keys
            and checks["peer_checksum"] == checksum
            and not checks["sample_mismatches"]
            and r.summary["partitions"] == len(rows)
        )
        out["peer"] = {
            "what": "RemoteClusterUtils.translateOffsets(props, alias, Pattern, timeout), one JVM",
            "wall_s": peer["wall_s"],
            "translate_ms": round(batch["ms"], 1),
            "groups": batch["groups"],
            "keys": batch["keys"],
        }
        out["checks"] = checks

    print(
        f"\nreadiness, {args.groups} groups x {args.partitions} partitions on the real bed ({os.cpu_count()} cores), "
        f"setup {out['setup']}"
    )
    print("| interval | audit | lag | end offsets | Spark (tail) | plan + assess | total s | of the 300 s interval |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in out["intervals"]:
        s = row["steps_s"]
        print(
            f"| {row['interval'] + 1} | {s['preflight_audit']} | {s['measure_replication_lag']} | "
            f"{s['capture_end_offsets']} | {s['compute_latest_checkpoints']} | {s['assess_readiness']} | "
            f"{row['total_s']} | {100 * row['total_s'] / 300:.0f} % |"
        )
    print(
        f"peer: Kafka's batch translateOffsets, latest checkpoints only: {out['peer']['translate_ms'] / 1000:.2f} s "
        f"inside its JVM, {out['peer']['wall_s']} s with the JVM; checks: {checks}"
    )
    path = REPO / "bench" / "results" / f"readiness-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(out, indent=2, default=str))
    print(f"results: {path}")
    return 0 if checks["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
