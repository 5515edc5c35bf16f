"""The job's command line and the checks of its arguments on their own (before the cluster is asked: that is
:mod:`mm2_failover.jobs.checkpoint_pass.cluster_checks`). A bad argument raises :class:`BadArguments`: exit 2, with
a message naming it."""

from __future__ import annotations

import argparse
import json
import os
import re

from mm2_failover.jobs import checkpoint_pass  # the job's description: the first line of the package's docstring
from mm2_failover.jobs.checkpoint_pass.transforms import MAX_PARTITIONS, POSITION_BITS

OPTIONS_ENV = "MM2_FAILOVER_SPARK_KAFKA_OPTIONS"


class BadArguments(ValueError):
    pass


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=checkpoint_pass.__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap-servers", required=True, help="target cluster, where the checkpoints topics live")
    p.add_argument(
        "--checkpoints-topic",
        required=True,
        action="append",
        metavar="ALIAS=TOPIC",
        help="a source alias and its checkpoints topic, e.g. primary=primary.checkpoints.internal "
        "(repeat for several source aliases)",
    )
    p.add_argument(
        "--end-offsets",
        required=True,
        help='JSON {"topic": {"partition": end_offset}} or @file: read up to (excluding) these; with '
        '--refresh-state also "latest" (the current log end of every partition)',
    )
    p.add_argument(
        "--start-offsets",
        default="",
        help="JSON or @file: the log start offsets captured with the end offsets; records of the range "
        "deleted since then fail the job (exit 5). Default: the current log start",
    )
    p.add_argument(
        "--output", default="", help="Parquet output path (any Hadoop-compatible URI); required unless --refresh-state"
    )
    p.add_argument(
        "--state-dir",
        default="",
        help="the latest-checkpoint state (a local or shared folder, <archive>/latest-state): start from "
        "its newest usable version and read only the tail (mm2_failover.adapters.state); a full pass when "
        "none is usable, said in the summary",
    )
    (
        p.add_argument(
            "--state-url",
            default="",
            help="the same state in an object store (s3a://.../latest-state; the versions of --state-dir, "
            "same names): Spark reads the chosen versions' tables from there, and a refresh writes its "
            "version there, so executors on any host can (--state-dir still gives their version.json)",
        ),
    )
    p.add_argument(
        "--refresh-state",
        action="store_true",
        help="write a new state version to --state-dir covering up to --end-offsets ('latest': the "
        "current log end) instead of answers",
    )
    p.add_argument("--summary", default="", help="also write the JSON summary to this local path")
    p.add_argument(
        "--max-quarantined",
        type=int,
        default=0,
        help="fail (exit 3) when more records than this are not usable checkpoints",
    )
    p.add_argument(
        "--min-partitions",
        type=int,
        default=0,
        help="split the read into at least this many Spark tasks (Kafka source minPartitions); 0 (the "
        "default): Spark's default parallelism when the checkpoint topics have fewer partitions",
    )
    p.add_argument(
        "--policy",
        choices=["latest", "max"],
        default="latest",
        help="latest: the last checkpoint per key wins (MM2's meaning); max: when a key's downstream "
        "offset went backwards within the read range, keep the highest one instead",
    )
    p.add_argument(
        "--kafka-options-file",
        default="",
        help='JSON {"java": {...}, "librdkafka": {...}} of client settings (secrets: keep it 0600)',
    )
    p.add_argument(
        "--kafka-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Java Kafka consumer setting (never a secret: command lines are visible)",
    )
    p.add_argument(
        "--remote",
        default="",
        help="run on this Spark Connect server (sc://host:port) instead of a Spark of the job's own",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=15.0,
        help="seconds the driver's checks wait for the cluster before the job fails (exit 4)",
    )
    return p.parse_args(argv)


def topics_by_alias(pairs: list[str]) -> dict[str, str]:
    """``ALIAS=TOPIC`` arguments -> {alias: topic}; each alias and each topic once."""
    out: dict[str, str] = {}
    for pair in pairs:
        alias, sep, topic = pair.partition("=")
        if not sep or not alias or not topic:
            raise BadArguments(
                f"--checkpoints-topic {pair!r}: expected ALIAS=TOPIC, e.g. primary=primary.checkpoints.internal"
            )
        if alias in out and out[alias] != topic:
            raise BadArguments(f"several checkpoints topics for source alias {alias!r}: {out[alias]}, {topic}")
        out[alias] = topic
    if len(set(out.values())) != len(out):
        raise BadArguments(f"a checkpoints topic is given for several aliases: {out}")
    return out


def load_offsets(arg: str, what: str) -> dict[str, dict[int, int]]:
    """``{"topic": {"partition": offset}}`` (JSON or @file), every partition and offset a non-negative integer."""
    try:
        text = open(arg[1:]).read() if arg.startswith("@") else arg
        data = json.loads(text)
    except OSError as e:
        raise BadArguments(f"{what}: cannot read {arg[1:]}: {e}") from None
    except ValueError as e:
        raise BadArguments(f"{what} is not valid JSON: {e}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise BadArguments(f'{what} must be a JSON object {{"topic": {{"partition": offset}}}}')
    out: dict[str, dict[int, int]] = {}
    for t, parts in data.items():
        for p, o in parts.items():
            if not re.fullmatch(r"\d+", str(p)):
                raise BadArguments(f"{what}: {t} partition {p!r} is not a partition number")
            if isinstance(o, bool) or not isinstance(o, int) or o < 0:
                raise BadArguments(f"{what}: {t} partition {p}: offset {o!r} is not an offset (a non-negative integer)")
            out.setdefault(t, {})[int(p)] = o
    return out


def check_arguments(topics: dict[str, str], end: dict[str, dict[int, int]], start: dict[str, dict[int, int]]) -> None:
    unknown = sorted(set(end) - set(topics.values()))
    missing = sorted(set(topics.values()) - set(end))
    if unknown or missing:
        raise BadArguments(f"--end-offsets does not match --checkpoints-topic: missing {missing}, unexpected {unknown}")
    for t, ps in end.items():
        for p, o in ps.items():
            if p >= MAX_PARTITIONS or o >= 1 << POSITION_BITS:
                raise BadArguments(
                    f"{t} partition {p} end offset {o}: beyond what the job orders records by "
                    f"(partition < {MAX_PARTITIONS}, offset < 2^{POSITION_BITS})"
                )
            s = start.get(t, {}).get(p)
            if s is not None and s > o:
                raise BadArguments(f"{t} partition {p}: start offset {s} is after the end offset {o}")


def kafka_options(args: argparse.Namespace) -> tuple[dict[str, str], dict]:
    """(Java client settings for Spark's Kafka source, librdkafka settings for the driver's checks)."""
    java: dict = json.loads(os.environ.get(OPTIONS_ENV, "") or "{}")
    rdk: dict = {}
    if args.kafka_options_file:
        try:
            with open(args.kafka_options_file) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise BadArguments(f"--kafka-options-file {args.kafka_options_file}: {e}") from None
        java.update(data.get("java") or {})
        rdk.update(data.get("librdkafka") or {})
    for kv in args.kafka_option:
        k, _, v = kv.partition("=")
        java[k] = v
    java["bootstrap.servers"] = args.bootstrap_servers
    rdk["bootstrap.servers"] = args.bootstrap_servers
    for k in ("security.protocol", "sasl.mechanism"):  # same names in both clients
        if k in java and k not in rdk and not (k == "sasl.mechanism" and "sasl.mechanisms" in rdk):
            rdk[k] = java[k]
    return {str(k): str(v) for k, v in java.items()}, rdk


def session_settings(args: argparse.Namespace) -> dict[str, str]:
    """The settings the job sets on its Spark session (``hadoop`` of the options file: S3A's endpoint and keys when
    it writes a run folder in S3, :func:`mm2_failover.adapters.config.s3a_settings`). On the session, not on the command
    line: secrets, and a Spark Connect server takes them per session (data source reads and writes copy the
    session's settings into their Hadoop configuration). A Connect server keeps one S3A filesystem per bucket, made
    with the settings of the first session that used it."""
    if not args.kafka_options_file:
        return {}
    try:
        with open(args.kafka_options_file) as f:
            return {str(k): str(v) for k, v in (json.load(f).get("hadoop") or {}).items()}
    except (OSError, ValueError) as e:
        raise BadArguments(f"--kafka-options-file {args.kafka_options_file}: {e}") from None
