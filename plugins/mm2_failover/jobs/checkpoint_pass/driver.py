"""The job's driver: :func:`main` checks the arguments and the cluster before Spark starts, runs the pass
(:func:`mm2_failover.jobs.checkpoint_pass.spark_pass.run`) on a Spark of its own or on a Spark Connect server,
prints and writes the summary, and says how it went by its exit code (one table: :mod:`mm2_failover.stages.outcomes`).
spark-submit runs it through ``mm2_failover/jobs/run_checkpoint_pass.py``."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from urllib.parse import urlparse

from mm2_failover.adapters.runfolder import write_text
from mm2_failover.jobs.checkpoint_pass.cluster_checks import (
    LostSinceSnapshot,
    Unreachable,
    check_against_cluster,
    current_end_offsets,
)
from mm2_failover.jobs.checkpoint_pass.job_args import (
    BadArguments,
    check_arguments,
    kafka_options,
    load_offsets,
    parse_args,
    session_settings,
    topics_by_alias,
)
from mm2_failover.jobs.checkpoint_pass.spark_pass import run
from mm2_failover.jobs.checkpoint_pass.state_layout import plan_state
from mm2_failover.rules.acls import phrase
from mm2_failover.stages.outcomes import JOB_BAD_ARGS as EXIT_BAD_ARGS  # the one exit-code table
from mm2_failover.stages.outcomes import JOB_LOST_SINCE_SNAPSHOT as EXIT_LOST_SINCE_SNAPSHOT
from mm2_failover.stages.outcomes import JOB_TOO_MANY_QUARANTINED as EXIT_TOO_MANY_QUARANTINED
from mm2_failover.stages.outcomes import JOB_UNREACHABLE as EXIT_UNREACHABLE


def prepare(argv: list[str] | None = None):
    """Arguments, options and the driver's checks against the cluster (no Spark yet)."""
    args = parse_args(argv)
    topics = topics_by_alias(args.checkpoints_topic)
    if args.state_url and not args.state_dir:
        raise BadArguments("--state-url is read with --state-dir (the versions' version.json)")
    if args.refresh_state and not args.state_dir:
        raise BadArguments("--refresh-state needs --state-dir (where the state versions live)")
    if not args.refresh_state and not args.output:
        raise BadArguments("--output is required (the Parquet answers), unless --refresh-state")
    java, rdk = kafka_options(args)
    if args.end_offsets == "latest":
        if not args.refresh_state:
            raise BadArguments(
                "--end-offsets latest is only for --refresh-state: a failover reads up to the end "
                "offsets captured in its snapshot"
            )
        end = current_end_offsets(rdk, topics, args.timeout)
    else:
        end = load_offsets(args.end_offsets, "--end-offsets")
    start = load_offsets(args.start_offsets, "--start-offsets") if args.start_offsets else {}
    check_arguments(topics, end, start)
    start = check_against_cluster(rdk, topics, end, start, args.timeout)
    state = None
    if args.state_dir:
        state, start = plan_state(args, rdk, topics, end, start)
    return args, topics, end, start, java, state


def not_authorized(e: Exception, topics: dict[str, str]) -> str | None:
    """The message for Spark's Kafka source refused by an ACL (Kafka's Java consumer reading the checkpoints topics,
    which the driver's librdkafka checks could only Describe), or None for any other failure."""
    text = str(e)
    m = re.search(r"(Topic|Group)AuthorizationException:?\s*([^\n]*)", text)
    if not m:
        return None
    if m.group(1) == "Group":
        need = "Read on the Spark consumer's group (group.id / groupIdPrefix in the Kafka options)"
    else:
        named = sorted(set(re.findall(r"[\w.\-]+", m.group(2).split("[", 1)[-1])) & set(topics.values()))
        need = phrase("Read", "Topic", named or sorted(topics.values()))
    return (
        f"Spark's Kafka source was not authorized on the target ({m.group(1)}AuthorizationException: "
        f"{m.group(2).strip()[:300]}). The connection's principal needs {need}: grant it (docs/reference.md, "
        "'Least-privilege ACLs', lists what the pipeline needs), then retry."
    )


def main(argv: list[str] | None = None, remote: str | None = None) -> int:
    """The job. ``remote``: a Spark Connect URL (``sc://host:port``; also ``--remote`` or ``SPARK_REMOTE``): the
    same code runs on a warm server instead of a Spark of its own (the caller's process is then the client)."""
    try:
        args, topics, end, start, java, state = prepare(argv)
        settings = session_settings(args)
    except SystemExit as e:  # argparse: usage printed
        return EXIT_BAD_ARGS if e.code else 0
    except BadArguments as e:
        print(f"latest_checkpoints: bad arguments: {e}", file=sys.stderr)
        return EXIT_BAD_ARGS
    except Unreachable as e:
        print(f"latest_checkpoints: {e}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except LostSinceSnapshot as e:
        print(f"latest_checkpoints: {e}", file=sys.stderr)
        return EXIT_LOST_SINCE_SNAPSHOT
    from pyspark.sql import SparkSession  # lazy: optional (pyspark)

    remote = remote or args.remote or os.environ.get("SPARK_REMOTE") or None
    builder = SparkSession.builder.remote(remote) if remote else SparkSession.builder
    t_session = time.monotonic()
    mode = os.environ.get("SPARK_CONNECT_MODE_ENABLED")  # a Connect session sets it for this process
    spark = builder.appName("mm2-failover-latest-checkpoints").getOrCreate()
    session_seconds = round(time.monotonic() - t_session, 3)
    try:
        for k, v in settings.items():
            spark.conf.set(k, v)
        summary = run(spark, args, topics, end, start, java, state=state)
    except Exception as e:  # noqa: BLE001 - Spark's Kafka source refused by an ACL: say which, no traceback
        refused = not_authorized(e, topics)
        if not refused:
            raise
        print(f"latest_checkpoints: {refused}", file=sys.stderr)
        return EXIT_BAD_ARGS
    finally:
        spark.stop()  # on Spark Connect: this client's session only; the server keeps serving
        if remote:  # leave the caller's process (and what it starts later) as it was
            if mode is None:
                os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
            else:
                os.environ["SPARK_CONNECT_MODE_ENABLED"] = mode
    shown = None
    if remote:  # never the token or user of the URL
        u = urlparse(remote)
        shown = f"{u.scheme}://{u.hostname}:{u.port}"
    summary["spark"] = {
        "route": "spark-connect" if remote else "spark-submit",
        "remote": shown,
        "session_seconds": session_seconds,
    }
    text = json.dumps(summary, sort_keys=True)
    print("MM2_FAILOVER_SUMMARY " + text, flush=True)
    if args.summary:
        write_text(__import__("pathlib").Path(args.summary), text)
    if not args.refresh_state and summary["quarantined"] > args.max_quarantined:  # a refresh keeps them apart
        print(
            f"latest_checkpoints: {summary['quarantined']} record(s) are not usable checkpoints "
            f"({summary['quarantined_by_reason']}), more than --max-quarantined={args.max_quarantined}. "
            f"They are listed in {summary['quarantine_output']}.",
            file=sys.stderr,
        )
        return EXIT_TOO_MANY_QUARANTINED
    return 0
