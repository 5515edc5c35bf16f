"""``python -m mm2_failover``: the pipeline without Airflow (for when the scheduler is in the lost region).

Each command calls exactly the steps the DAG's tasks call, with the same gates, on a run folder of the same layout:

  drain     wait until producers stopped and MM2 replicated everything (the DAG's verify_producers_drained)
  snapshot  drain, then capture the end offsets once (the DAG's capture_end_offsets)
  plan      drain, snapshot, run the Spark job, build and export the plan (a dry run: writes no offsets)
  apply     the empty-group gate first, then everything 'plan' does (or --plan RUN_DIR: that run's plan, with the
            parameters it was built with) and its table; with --execute the gate again, back up, apply, verify
            (without it nothing is written, as kafka-consumer-groups --reset-offsets without --execute)
  verify    read the committed offsets back, compare with the plan, write the report
  rollback  restore the commits saved in a run's backup.json (same gate, same writer lock), then verify
  archive   append MM2's new offset syncs to the archive (what the mm2_sync_archive DAG does every 5 minutes)
  refresh-state
            fold what MM2 checkpointed since the last refresh into the latest-checkpoint state (Spark; the
            mm2_sync_archive DAG does it every 5 minutes): a failover's Spark job then reads only the tail
  audit     the pre-flight audit of MM2's settings (--mm2-config) and of what the clusters show (also run first
            by snapshot, plan, apply and drill; warnings only)
  drill     a DR drill: replication lag, plan (dry run), drill report; writes offsets only for groups starting
            with --allow-drill-writes-for-prefix
  readiness what a failover would do now, read-only, kept for the Readiness page (the mm2_failover_readiness DAG)

Clusters: ``--target-config``/``--source-config`` (a JSON file of librdkafka settings), or the same
``AIRFLOW_CONN_KAFKA_TARGET``/``AIRFLOW_CONN_KAFKA_SOURCE`` variables the DAG uses (JSON or URI form), or
``--*-bootstrap``. A second source alias needs ``--alias-source-config ALIAS=FILE`` (or ``ALIAS=`` to fail it over
without checking its source). Spark: the job runs on a warm Spark Connect server when ``--spark-remote
sc://host:port`` is given, or else when ``AIRFLOW_CONN_SPARK_CONNECT_DEFAULT`` names one (the DAG's rule), and that
server answers; otherwise through spark-submit on ``--spark-master`` (default: the host of
``AIRFLOW_CONN_SPARK_DEFAULT``, else ``local[2]``); ``--spark-remote none`` forces spark-submit. A run folder
remembers the parameters it was started with: continuing it with others is refused.

Cluster options may come before or after the command. Every command prints its result as a table (``-o table``,
long lists cut), ``-o json`` or ``-o csv`` (every row): ``plan`` the plan per partition (GROUP TOPIC PARTITION
NEW-OFFSET CHECKPOINT RE-READ RULE) and the ``kafka-consumer-groups --reset-offsets --from-file`` command that
would write the same offsets with Kafka's own tool.

Exit codes: 0 done; 1 verification failed or some groups were refused (named on stderr); 2 bad usage or
configuration (a wrong file, option, alias, password or client setting); 3 groups still have live members (nothing
written); 4 a cluster is unreachable; 5 a safety rule refused the plan or the rollback (nothing written); 6 not
drained (producers still write or MM2 is behind); 7 another writer holds the target's lock.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import shlex
import sys
import time
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from mm2_failover import __version__, metrics
from mm2_failover.adapters import config, faults
from mm2_failover.adapters.config import SPARK_CONNECT_CONN_ID, deployment_defaults, state_root
from mm2_failover.adapters.kafka.cluster import Cluster, admin, check_conf
from mm2_failover.adapters.kafka.kafka_errors import KafkaConfigError
from mm2_failover.adapters.runfolder import ROLLBACK, RunFolder, head_text, load_backup
from mm2_failover.adapters.spark import cli_spark_route, connect_run, push_state, refresh_submission, spark_submit
from mm2_failover.adapters.store import as_path
from mm2_failover.rules.listing import FORMATS, Listing, render
from mm2_failover.rules.report import PLAN_LINE_COLUMNS, PLAN_LINE_DATA
from mm2_failover.rules.run_params import PARAMS, TOPOLOGY, ParamSpec, RunParams
from mm2_failover.stages.apply import backup_and_apply, writer_lock
from mm2_failover.stages.archive import archive_offset_syncs
from mm2_failover.stages.assess_readiness import assess_readiness
from mm2_failover.stages.build_plan import make_plan, plan_lines
from mm2_failover.stages.compute_checkpoints import compute, job_error
from mm2_failover.stages.context import RunContext
from mm2_failover.stages.drain_check import wait_drained
from mm2_failover.stages.drill_report import drill_lag, drill_plan, drill_report
from mm2_failover.stages.errors import QuarantineRefused
from mm2_failover.stages.gate import check_groups_empty, describe_live, early_gate, groups_to_move, live_groups
from mm2_failover.stages.outcomes import EXIT_FAILED, EXIT_LIVE, EXIT_OK, EXIT_USAGE, REFUSED, outcome_of
from mm2_failover.stages.preflight import check_inputs, preflight_audit
from mm2_failover.stages.roll_back import rollback, verify_rollback
from mm2_failover.stages.snapshot import capture_snapshot
from mm2_failover.stages.verify import verify_run

log = logging.getLogger("mm2_failover")


class CliError(Exception):
    def __init__(self, code: int, msg: str):
        super().__init__(msg)
        self.code = code


# ------------------------------------------------------------------------------------------ clusters


def read_config_file(path: str, what: str) -> dict:
    """A JSON object of librdkafka settings from ``path``; CliError(2) naming the file and what is wrong."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise CliError(EXIT_USAGE, f"{what} {p}: no such file") from None
    except OSError as e:
        raise CliError(EXIT_USAGE, f"{what} {p}: cannot read it ({e.strerror})") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise CliError(EXIT_USAGE, f"{what} {p} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise CliError(
            EXIT_USAGE,
            f"{what} {p} must hold a JSON object of librdkafka settings, e.g. "
            f'{{"bootstrap.servers": "host:9092"}}, not a JSON {type(data).__name__}',
        )
    check_client_settings(data, f"{what} {p}")
    return data


def check_client_settings(conf: dict, what: str) -> None:
    """librdkafka refuses unknown properties and bad values when a client is created: do it now, to name the file."""
    try:
        check_conf(conf, what)
        admin(conf, name=what)
    except KafkaConfigError as e:
        raise CliError(EXIT_USAGE, str(e)) from None


@contextmanager
def cli_logging_kept():
    """Around steps that may import Airflow (to read a connection the way Airflow does): Airflow's first import
    takes over logging, replacing the root logger's handlers by one that writes to stdout, where the CLI prints its
    results, in Airflow's format. The CLI's own handlers and level are put back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def conf_from_env(var: str) -> dict | None:
    """The librdkafka settings of an ``AIRFLOW_CONN_*`` variable (JSON or URI form, as Airflow reads them)."""
    raw = os.environ.get(var, "").strip()
    if not raw:
        return None
    if raw.startswith("{"):
        try:
            conn = json.loads(raw)
        except ValueError as e:
            raise CliError(EXIT_USAGE, f"{var} is not valid JSON: {e}") from None
        extra = conn.get("extra", {}) if isinstance(conn, dict) else None
    else:
        try:
            with cli_logging_kept():
                from airflow.sdk import Connection  # lazy: airflow (the CLI runs without it)

                extra = Connection.from_uri(raw, conn_id=var).extra_dejson
        except Exception as e:  # noqa: BLE001 - any parse failure is the operator's to fix
            raise CliError(EXIT_USAGE, f"{var} is neither a JSON connection nor a connection URI: {e}") from None
    if isinstance(extra, str):
        try:
            extra = json.loads(extra)
        except ValueError as e:
            raise CliError(EXIT_USAGE, f"{var}: its extra is not valid JSON: {e}") from None
    if not isinstance(extra, dict):
        raise CliError(EXIT_USAGE, f"{var}: its extra must be a JSON object of librdkafka settings")
    return dict(extra)


def cluster_conf(file: str | None, bootstrap: str | None, env_var: str, what: str) -> dict | None:
    if file:
        return read_config_file(file, what)
    if bootstrap:
        return {"bootstrap.servers": bootstrap}
    return conf_from_env(env_var)


def spark_master(arg: str | None) -> str:
    if arg:
        return arg
    raw = os.environ.get("AIRFLOW_CONN_SPARK_DEFAULT", "")
    if raw:
        try:
            c = json.loads(raw)
            return f"{c['host']}:{c['port']}" if c.get("port") else c["host"]
        except (ValueError, KeyError, TypeError):
            raise CliError(EXIT_USAGE, "AIRFLOW_CONN_SPARK_DEFAULT must be JSON with a host (the master)") from None
    return "local[2]"


# ------------------------------------------------------------------------------------------ arguments


def positive(v: str) -> float:
    try:
        f = float(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{v!r} is not a number of seconds") from None
    if not f > 0:
        raise argparse.ArgumentTypeError(f"{v!r} must be more than 0 seconds")
    return f


def bounded_int(low: int, high: int | None):
    """An argparse type: a whole number from ``low`` to ``high`` (None: no upper bound)."""

    def parse(v: str) -> int:
        try:
            i = int(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{v!r} is not a whole number") from None
        if i < low or (high is not None and i > high):
            raise argparse.ArgumentTypeError(f"{v!r} must be from {low} to {'any' if high is None else high}")
        return i

    return parse


@functools.cache
def flag_defaults() -> dict:
    """The run parameters' defaults on the command line that are not the definition's: the deployment's topology
    where it is set once (:func:`mm2_failover.adapters.config.deployment_defaults`: ``AIRFLOW__MM2_FAILOVER__*``);
    every other flag defaults to its definition's default."""
    try:
        return deployment_defaults()
    except ValueError as e:
        raise CliError(EXIT_USAGE, str(e)) from None


def add_param(p: argparse.ArgumentParser, name: str, specs: Mapping[str, ParamSpec] = PARAMS) -> None:
    """Run parameter ``name`` of ``specs`` (default: the one definition) as a flag (none when its definition says it
    is not on the command line)."""
    spec = specs[name]
    flag = spec.cli_flag(name)
    if flag is None:
        return
    default = flag_defaults().get(name, spec.default_value())
    help_ = spec.cli_help or spec.help.split(". ")[0].rstrip(".")
    if isinstance(default, bool):  # the flag's meaning is the definition's (--no-x turns x off), its default the
        # deployment's: a switch that only says what is already in force changes nothing
        p.add_argument(
            flag,
            dest=name,
            action="store_false" if spec.default else "store_true",
            default=default,
            help=help_,
        )
    elif isinstance(default, int):
        parse = bounded_int(*spec.bounds) if spec.bounds else int
        p.add_argument(flag, dest=name, type=parse, default=default, help=help_)
    else:
        p.add_argument(flag, dest=name, default=default, choices=spec.choices, help=help_)


def add_params(p: argparse.ArgumentParser, specs: Mapping[str, ParamSpec] = PARAMS) -> None:
    """The run parameters as flags, generated from their one definition (``specs``, default
    :data:`mm2_failover.rules.run_params.PARAMS`: defaults, choices, flags, help and bounds): a boolean that is off by
    default is a switch that turns it on, one that is on has a ``--no-...`` switch; integers are checked against their
    bounds."""
    p.add_argument(
        "--run-dir",
        type=run_dir_arg,
        help="the run's artifacts folder, a path or a store's URL "
        "(s3://bucket/prefix; default: a new one under "
        "$MM2_FAILOVER_ARTIFACTS/cli/)",
    )
    for name in specs:
        add_param(p, name, specs)
    p.add_argument("--spark-master", default=None)
    p.add_argument(
        "--spark-remote",
        default=None,
        metavar="sc://HOST:PORT|none",
        help="run the Spark job on this warm Spark Connect server (default: the spark_connect_default "
        "connection's, when AIRFLOW_CONN_SPARK_CONNECT_DEFAULT is set); none: spark-submit",
    )


def run_dir_arg(value: str):
    """``--run-dir``: a local folder or a folder in an object store (:func:`mm2_failover.adapters.store.as_path`; a plain
    ``Path`` would fold ``s3://`` into ``s3:/``)."""
    return as_path(value)


def prog_name() -> str:
    """How the operator ran it: ``mm2-failover`` (the installed script) or ``python -m mm2_failover``."""
    return "mm2-failover" if Path(sys.argv[0]).name == "mm2-failover" else "python -m mm2_failover"


def add_globals(p: argparse.ArgumentParser, after_command: bool = False) -> None:
    """The cluster options, on the command line before the command or, as Kafka's tools take them, after it
    (``after_command``: no defaults there, so that one given before the command is kept)."""
    kw = {"default": argparse.SUPPRESS} if after_command else {}
    p.add_argument("--source-config", help="JSON file of librdkafka settings for the (first alias's) source", **kw)
    p.add_argument("--target-config", help="JSON file of librdkafka settings for the target", **kw)
    p.add_argument("--source-bootstrap", **kw)
    p.add_argument("--target-bootstrap", **kw)
    p.add_argument(
        "--alias-source-config",
        action="append",
        metavar="ALIAS=FILE",
        dest="alias_source_config_after" if after_command else "alias_source_config",
        help="the source cluster of another alias (repeat); ALIAS= fails it over without checking it",
        **(kw or {"default": []}),
    )
    p.add_argument(
        "--timeout", type=positive, help="seconds for every Kafka request (default 15)", **(kw or {"default": 15.0})
    )


def command_parser(sub, name: str, help_: str, description: str | None = None) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help_, description=description or help_)
    add_globals(p, after_command=True)
    p.add_argument(
        "-o",
        "--output",
        choices=FORMATS,
        default="table",
        help="table (for people, long lists cut), json or csv (every row, for scripts)",
    )
    return p


def parser(specs: Mapping[str, ParamSpec] = PARAMS) -> argparse.ArgumentParser:
    """The command line; its commands' run-parameter flags are generated from ``specs`` (default: the one definition,
    :data:`mm2_failover.rules.run_params.PARAMS`)."""
    ap = argparse.ArgumentParser(
        prog=prog_name(), description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_globals(ap)
    sub = ap.add_subparsers(dest="command", required=True)
    for name, help_ in [
        ("drain", "wait until producers stopped and MM2 replicated everything"),
        ("snapshot", "drain, then capture the end offsets once"),
        ("plan", "drain + snapshot + Spark job + plan (plan.json/plan.csv); never writes offsets"),
        ("verify", "read back, compare with the plan, write report.json/report.md"),
        ("archive", "append MM2's new offset syncs to the archive (the mm2_sync_archive DAG)"),
        (
            "refresh-state",
            "fold MM2's new checkpoints into the latest-checkpoint state (Spark; the mm2_sync_archive DAG)",
        ),
        ("audit", "pre-flight audit of MM2's settings (--mm2-config) and what the clusters show"),
    ]:
        add_params(command_parser(sub, name, help_), specs)
    p = command_parser(
        sub,
        "apply",
        "gate, drain, plan (unless done), then with --execute: gate, back up, apply, verify",
        "the empty-group gate, the drain, the plan (or the one in --plan's folder) and its table; "
        "with --execute, the gate again, a backup of the target's commits, the offsets written and "
        "verified. Without --execute nothing is written (as kafka-consumer-groups --reset-offsets "
        "without --execute)",
    )
    p.add_argument("--execute", action="store_true", help="write the offsets (without it: a dry run)")
    p.add_argument(
        "--plan",
        type=run_dir_arg,
        metavar="RUN_DIR",
        help="apply the plan in this run folder, with the parameters it was built with",
    )
    add_params(p, specs)
    p = command_parser(sub, "drill", "DR drill: lag, dry-run plan and findings; writes only for a drill prefix")
    p.add_argument("--allow-drill-writes-for-prefix", default="")
    add_params(p, specs)
    p = command_parser(
        sub,
        "readiness",
        "what a failover would do now, read-only (the mm2_failover_readiness DAG)",
        "what a failover would do now, per group and partition, read-only: audit, one drain "
        "observation, end offsets, latest checkpoints, the plan as a dry run; kept for the Readiness "
        "page (the mm2_failover_readiness DAG's files)",
    )
    p.add_argument(
        "--archive-stale-intervals",
        type=bounded_int(1, 1000),
        default=3,
        help="say so when mm2_sync_archive has not succeeded for this many 5-minute intervals",
    )
    add_params(p, specs)
    p = command_parser(
        sub,
        "rollback",
        "restore the commits saved in a backup.json, then verify",
        "restore the commits a failover's apply overwrote (saved in its backup.json), on the "
        "partitions it wrote, then verify",
    )
    p.add_argument("--backup", type=Path, required=True)
    p.add_argument("--force", action="store_true", help="also rewind partitions committed since the failover")
    add_param(p, "apply_concurrency", specs)
    add_param(p, "lock_wait_seconds", specs)
    return ap


def confs_of(a: argparse.Namespace) -> tuple[dict[str, dict], dict[str, str]]:
    """(label -> librdkafka settings, source_connections) from the arguments."""
    tconf = cluster_conf(a.target_config, a.target_bootstrap, "AIRFLOW_CONN_KAFKA_TARGET", "--target-config")
    if not tconf:
        raise CliError(
            EXIT_USAGE, "no target cluster: give --target-config, --target-bootstrap or AIRFLOW_CONN_KAFKA_TARGET"
        )
    confs = {"target": tconf}
    sconf = cluster_conf(a.source_config, a.source_bootstrap, "AIRFLOW_CONN_KAFKA_SOURCE", "--source-config")
    if sconf:
        confs["source"] = sconf
    conns: dict[str, str] = {}
    for spec in [*(getattr(a, "alias_source_config", []) or []), *(getattr(a, "alias_source_config_after", []) or [])]:
        alias, sep, f = spec.partition("=")
        if not sep or not alias:
            raise CliError(EXIT_USAGE, f"--alias-source-config {spec!r}: expected ALIAS=FILE (or ALIAS= for none)")
        conns[alias] = f"alias:{alias}" if f else ""
        if f:
            confs[f"alias:{alias}"] = read_config_file(f, f"--alias-source-config {alias}")
    return confs, conns


def context_of(a: argparse.Namespace, command: str):
    confs, conns = confs_of(a)
    # the deployment's topology, those without a flag included (alias_policies, source_connections), then the flags
    deployed = {k: v for k, v in flag_defaults().items() if k in TOPOLOGY}
    values = {**deployed, **{k: v for k, v in vars(a).items() if v is not None}}
    if getattr(a, "plan", None) is not None:  # apply --plan RUN_DIR: that run's parameters, unless given again
        values = {**values, **planned_params(a)}
    params = RunParams.from_mapping(
        {**values, "source_connections": {**deployed.get("source_connections", {}), **conns}}
    )
    check_inputs(params)  # before any cluster work (the group patterns were first used after the Spark job)
    if "source" not in confs:
        # no source configured: the first alias's source is not checked (only allowed as a declared disaster)
        params = RunParams.from_mapping(
            {**params.as_dict(), "source_connections": {params.source_aliases[0]: "", **params.source_connections}}
        )
        if params.source_reachable == "yes":
            raise CliError(
                EXIT_USAGE, "--source-reachable yes, but no source cluster: give --source-config or --source-bootstrap"
            )
        if params.source_reachable == "detect" and command not in ("verify",):
            log.warning(
                "WARNING: no source cluster given: its producers and groups cannot be checked; the run "
                "treats it as LOST (disaster mode). Give --source-config, or --source-reachable no to say so."
            )
    default = (
        config.artifacts_root() / "mm2_failover_readiness" / f"cli-{time.strftime('%Y%m%d-%H%M%S')}"
        if command == "readiness"
        else config.artifacts_root() / "cli" / time.strftime("%Y%m%d-%H%M%S")
    )
    folder = getattr(a, "plan", None) or a.run_dir or default
    return RunContext.from_cli(params, folder, confs, a.timeout).bind()


def planned_params(a: argparse.Namespace) -> dict:
    """``apply --plan RUN_DIR``: the parameters the plan in that folder was built with (its ``run.json``), and over
    them every run parameter given on this command line with a value other than its default - one that differs from
    the plan's is then refused by the folder, naming it, as any continued run is."""
    if a.run_dir is not None and str(a.run_dir) != str(a.plan):
        raise CliError(EXIT_USAGE, f"--plan {a.plan} and --run-dir {a.run_dir}: give one (--plan continues that run)")
    folder = RunFolder(a.plan)
    bound = folder.record().get("params")
    if not folder.has_plan() or not isinstance(bound, dict):
        raise CliError(
            EXIT_USAGE,
            f"--plan {a.plan}: no plan in that folder. Build one first: {prog_name()} plan "
            f"--run-dir {a.plan} ... (or apply without --plan)",
        )
    typed = {tok.split("=", 1)[0] for tok in (a.argv or []) if tok.startswith("--")}
    given = {
        k: getattr(a, k) for k in RunParams.RESULT_PARAMS if hasattr(a, k) and PARAMS[k].cli_flag(k) in typed
    }  # typed on this command line, default or not
    return {**bound, **given}


def run_spark_job(a, sub, said: list[str]) -> int:
    """The job of submission ``sub`` on a warm Spark Connect server or through spark-submit (the route is logged;
    the job's summary records it too); its exit code."""
    try:
        with cli_logging_kept():
            remote, why = cli_spark_route(a.spark_remote, SPARK_CONNECT_CONN_ID)
    except ValueError as e:
        raise CliError(EXIT_USAGE, str(e)) from None
    log.info("latest-checkpoints job route: %s", why)
    if remote:
        return connect_run(remote, sub, said)
    return spark_submit(spark_master(a.spark_master), sub, said)


# ------------------------------------------------------------------------------------------ commands


def compute_latest_checkpoints(a, ctx) -> None:
    """Stage 3 by its one route (:func:`mm2_failover.stages.compute_checkpoints.compute`), on the CLI's Spark route; a run
    folder whose answers are whole keeps them. Too many unusable records: the plan (or the drill's, readiness's
    report) refuses with the details, as ``make_plan``'s quarantine rule says."""
    said: list[str] = []
    try:
        compute(ctx, lambda sub: run_spark_job(a, sub, said), reuse=True, said=said)
    except QuarantineRefused as e:
        log.warning("%s", e)


def gate(ctx, groups=None) -> None:
    live = early_gate(ctx) if groups is None else check_groups_empty(ctx, groups)
    if live:
        raise CliError(EXIT_LIVE, describe_live(live) + "\nNothing was written. Stop these consumers and retry.")


DRAIN_COLUMNS = [
    ("alias", "ALIAS"),
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("source_end", "SOURCE-END"),
    ("moved", "MOVED"),
    ("replicated", "REPLICATED"),
    ("replica_end", "REPLICA-END"),
    ("state", "STATE"),
]
AUDIT_COLUMNS = [("severity", "SEVERITY"), ("alias", "ALIAS"), ("rule", "RULE"), ("message", "MESSAGE")]
VERIFY_COLUMNS = [
    ("group", "GROUP"),
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("planned_offset", "PLANNED"),
    ("committed_after", "COMMITTED"),
    ("verified", "VERIFIED"),
    ("reread_estimate", "RE-READ"),
    ("rule", "RULE"),
]


@contextmanager
def live_status(what: str):
    """On a terminal, one line that changes in place (``rich``'s status line, on stderr) for a wait's progress;
    elsewhere (a log file, CI, a pipe) None: each poll's progress is then a log line of its own."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console  # lazy: optional (rich)
    from rich.live import Live
    from rich.spinner import Spinner

    spinner = Spinner("dots", what)
    # stdout is left alone (rich would send it to the terminal's status area): results may be piped while waiting
    with Live(spinner, console=Console(stderr=True), redirect_stdout=False, transient=True, refresh_per_second=4):
        yield lambda line: spinner.update(text=f"{what}: {line}")


def cmd_drain(a, ctx) -> Listing:
    with live_status("waiting for the drain") as on_wait:
        v = wait_drained(ctx, on_wait=on_wait)
    return Listing(
        DRAIN_COLUMNS,
        v.rows,
        [
            f"drained: {'yes' if v.drained else 'no'}"
            + (f" (lost: {', '.join(v.disaster_aliases)})" if v.disaster else "")
        ]
        + v.notes,
        {k: x for k, x in v.as_dict().items() if k != "rows"},
    )


def cmd_snapshot(a, ctx) -> Listing:
    if not ctx.folder.snapshot.exists():
        cmd_audit(a, ctx)
        cmd_drain(a, ctx)
    snap = capture_snapshot(ctx)
    lost = ", ".join(snap.disaster_aliases) or "none"
    return Listing(
        [],
        lines=[f"snapshot: {ctx.folder.snapshot} (captured {snap.captured_at}; lost aliases: {lost})"],
        summary={
            "snapshot": str(ctx.folder.snapshot),
            "captured_at": snap.captured_at,
            "disaster_aliases": list(snap.disaster_aliases),
        },
    )


def cmd_plan(a, ctx) -> Listing:
    return plan_listing(ctx, build_plan(a, ctx))


def build_plan(a, ctx):
    if not ctx.folder.has_plan():
        cmd_snapshot(a, ctx)
        compute_latest_checkpoints(a, ctx)
    return make_plan(ctx)


def plan_listing(ctx, plan) -> Listing:
    """The plan per partition (:func:`mm2_failover.rules.report.plan_lines`), its counts, and the Kafka command that would
    write the same offsets by hand."""
    f, counts = ctx.folder, plan.counts()
    rows = plan_lines(ctx, plan)
    lines = [
        f"plan: {len(plan.groups())} group(s), {len(rows)} partition(s): "
        + ", ".join(f"{n} {k}" for k, n in counts.items())
        + f" -> {f.plan_json}, {f.plan_csv}"
    ]
    return Listing(
        PLAN_LINE_COLUMNS,
        rows,
        lines,
        {
            "run_dir": str(f.dir),
            "groups": len(plan.groups()),
            "counts": counts,
            "plan_json": str(f.plan_json),
            "plan_csv": str(f.plan_csv),
        },
        more_in=str(f.plan_json),
        after=by_hand(ctx, plan),
        data_columns=PLAN_LINE_DATA,
    )


def by_hand(ctx, plan) -> list[str]:
    """``kafka-consumer-groups`` reading plan.csv: the same offsets written by Kafka's own tool (no gate, no backup,
    no verification: what ``apply --execute`` adds)."""
    groups = sorted({r.group for r in plan.rows if r.writes})
    if not groups:
        return ["Nothing to write: no partition has an offset to commit."]
    conf = ctx.target.conf
    csv_path = shlex.quote(str(ctx.folder.plan_csv))
    which = (
        " ".join(f"--group {shlex.quote(g)}" for g in groups)
        if len(groups) <= 5
        else f"$(cut -d, -f1 {csv_path} | sort -u | sed 's/^/--group /')"
    )
    config = " --command-config <the target's client properties>" if set(conf) - {"bootstrap.servers"} else ""
    return [
        "Kafka's own tool would write the same offsets (no empty-group gate, no backup, no verification):",
        f"  kafka-consumer-groups.sh --bootstrap-server {conf.get('bootstrap.servers', '<target>')}{config} "
        f"--reset-offsets --from-file {csv_path} {which} --execute",
    ]


def verify_listing(ctx, rep) -> Listing:
    d = rep.as_dict()
    return Listing(
        VERIFY_COLUMNS,
        sorted(d["partitions"], key=lambda r: (r["group"], r["topic"], r["partition"])),
        head_text(ctx.folder.report_md).splitlines(),
        {k: v for k, v in d.items() if k != "partitions"},
        more_in=str(ctx.folder.report_md),
    )


def cmd_apply(a, ctx) -> Listing:
    if not ctx.folder.backup.exists():
        gate(ctx)  # first the gate, then the (slow) computation
    plan = build_plan(a, ctx)
    if not a.execute:
        shown = plan_listing(ctx, plan)
        shown.after = [
            f"Dry run: nothing was written. To write these offsets (the gate again, a backup, apply, "
            f"verify): {prog_name()} apply --plan {ctx.folder.dir} --execute"
        ] + shown.after
        shown.summary["dry_run"] = True
        return shown
    gate(ctx, groups_to_move(ctx))
    res = backup_and_apply(ctx, plan)
    rep = verify_run(ctx, plan, dry_run=False, refused=res.refused)
    print(render(verify_listing(ctx, rep), a.output), end="")
    if res.refused:
        raise CliError(EXIT_FAILED, "groups NOT moved: " + "; ".join(f"{g}: {w}" for g, w in res.refused.items()))
    if rep.mismatches:
        raise CliError(
            EXIT_FAILED, f"{len(rep.mismatches)} partition(s) differ from the plan; see {ctx.folder.report_md}"
        )
    return None


def cmd_verify(a, ctx) -> Listing:
    if not ctx.folder.has_plan():
        raise CliError(EXIT_USAGE, f"no plan in {ctx.folder.dir}: run plan/apply first")
    plan = make_plan(ctx)
    rep = verify_run(ctx, plan, dry_run=not ctx.folder.backup.exists())
    print(render(verify_listing(ctx, rep), a.output), end="")
    if rep.mismatches:
        raise CliError(EXIT_FAILED, f"{len(rep.mismatches)} partition(s) differ from the plan")
    return None


def cmd_audit(a, ctx) -> Listing:
    """The pre-flight audit (also run once by snapshot/plan/apply/drill before the drain)."""
    found = preflight_audit(ctx)
    rows = [
        {"severity": f.severity.upper(), "alias": f.alias, "rule": f.rule, "message": f.message} for f in found.findings
    ]
    return Listing(AUDIT_COLUMNS, rows, summary={"findings": len(rows)})


def cmd_archive(a, ctx) -> Listing:
    return summary_listing(archive_offset_syncs(ctx))


def summary_listing(summary: dict) -> Listing:
    """A result with no rows: its summary as indented JSON for people too."""
    return Listing([], lines=json.dumps(summary, indent=2, default=str).splitlines(), summary=summary)


def cmd_refresh_state(a, ctx) -> Listing:
    said: list[str] = []
    topics = {alias: ctx.policies[alias].checkpoints_topic for alias in ctx.aliases}
    with refresh_submission(topics, ctx.target.conf) as sub:
        rc = run_spark_job(a, sub, said)
    if rc:  # the outcome table decides the exit code, as for stage 3's job
        raise job_error(rc, "the state refresh (Spark)", " ".join(said) or "see its output above")
    push_state(sub)  # the archive in an object store: the new version there too
    return summary_listing(json.loads((state_root() / "last-refresh.json").read_text()))


def cmd_drill(a, ctx) -> Listing:
    ctx.params = replace(ctx.params, dry_run=True)
    cmd_audit(a, ctx)
    drill_lag(ctx)
    capture_snapshot(ctx)
    compute_latest_checkpoints(a, ctx)
    drill_plan(ctx, a.allow_drill_writes_for_prefix)
    d = drill_report(ctx)
    metrics.emit_drill_metrics(d.as_dict())
    return Listing(
        [],
        lines=head_text(ctx.folder.drill_md).splitlines(),
        summary={"drill": str(ctx.folder.drill_json), "totals": d.totals, "findings": d.findings},
    )


def readiness_steps(a, ctx):
    """The readiness check's steps, in the DAG's order: (name, callable) - the bench times each."""
    from mm2_failover.dag_defaults import INTERVAL_SECONDS  # lazy: dag_defaults reads the environment at import

    ctx.params = replace(ctx.params, dry_run=True)
    return [
        ("preflight_audit", lambda: cmd_audit(a, ctx)),
        ("measure_replication_lag", lambda: drill_lag(ctx)),
        ("capture_end_offsets", lambda: capture_snapshot(ctx)),
        ("compute_latest_checkpoints", lambda: compute_latest_checkpoints(a, ctx)),
        (
            "assess_readiness",
            lambda: assess_readiness(
                ctx, interval_seconds=INTERVAL_SECONDS, archive_stale_intervals=a.archive_stale_intervals
            ),
        ),
    ]


def cmd_readiness(a, ctx):
    out = None
    for _name, step in readiness_steps(a, ctx):
        out = step()
    r, worse = out
    return summary_listing(
        {
            "readiness": str(ctx.folder.readiness),
            "summary": r.summary,
            "degraded": [{"what": d.what, "text": d.text} for d in worse],
        }
    )


def cmd_rollback(a):
    confs, _ = confs_of(a)
    target = Cluster(confs["target"], "target", a.timeout)
    backup = load_backup(a.backup)
    live = live_groups(target, sorted(backup.groups))
    if live:
        raise CliError(EXIT_LIVE, describe_live([("target", s) for s in live]) + "\nNothing was written.")
    folder = RunFolder(a.backup.parent / f"rollback-{time.strftime('%Y%m%d-%H%M%S')}")
    with writer_lock(target, "rollback (cli)", a.lock_wait_seconds, run=str(a.backup)) as held:
        faults.hit("rollback.locked")
        res = rollback(target, backup, a.apply_concurrency, force=a.force, backup_path=str(a.backup), held=held)
    left = verify_rollback(target, backup, a.apply_concurrency)
    folder.save(ROLLBACK, {"backup": str(a.backup), **res.as_dict(), "still_different": left})
    print(render(summary_listing({**res.as_dict(), "still_different": left}), a.output), end="")
    if res.refused or left:
        raise CliError(
            EXIT_FAILED,
            "rollback incomplete: " + "; ".join([f"{g}: {w}" for g, w in sorted(res.refused.items())] + left),
        )


COMMANDS = {
    "drain": cmd_drain,
    "snapshot": cmd_snapshot,
    "plan": cmd_plan,
    "apply": cmd_apply,
    "verify": cmd_verify,
    "drill": cmd_drill,
    "readiness": cmd_readiness,
    "archive": cmd_archive,
    "refresh-state": cmd_refresh_state,
    "audit": cmd_audit,
}


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    try:
        ap = parser()
    except CliError as e:  # the deployment's topology (AIRFLOW__MM2_FAILOVER__*) holds a bad value
        print(f"{prog_name()}: {e}", file=sys.stderr)
        return e.code
    a = ap.parse_args(argv)
    a.argv = list(sys.argv[1:] if argv is None else argv)  # what was typed (apply --plan: the flags given again)
    try:
        if a.command == "rollback":
            cmd_rollback(a)
            return EXIT_OK
        ctx = context_of(a, a.command)
        print(f"run folder: {ctx.folder.dir}", file=sys.stderr)
        shown = COMMANDS[a.command](a, ctx)
        if shown is not None:  # apply and verify print their report before the exit code says how it went
            print(render(shown, a.output), end="")
        return EXIT_OK
    except CliError as e:
        code, msg = e.code, str(e)
    except Exception as e:  # the stages' errors, by the one table (stages/outcomes.py); anything else propagates
        o = outcome_of(e)
        if o is None:
            raise
        code, msg = o.exit_code, (f"refused, nothing written: {e}" if o is REFUSED else str(e))
    print(f"{prog_name()} {a.command}: {msg}", file=sys.stderr)
    return code
