"""``python -m mm2_failover``: the pipeline without Airflow (for when the scheduler is in the lost region).

Each command calls exactly the step functions the DAG's tasks call, on a run folder of the same layout:

  plan      capture the end-offset snapshot, run the Spark job, build and export the plan (a dry run)
  apply     plan if not planned yet, check the groups are empty, back up, apply, then verify
  verify    read the committed offsets back, compare with the plan, write the report
  rollback  restore the commits saved in a run's backup.json (same empty-group check), then verify
  drill     a DR drill: replication lag, plan (dry run), drill report (drill.json/drill.md); writes offsets only
            for groups starting with --allow-drill-writes-for-prefix

Clusters: ``--source-config``/``--target-config`` (a JSON file of librdkafka settings), or the same
``AIRFLOW_CONN_KAFKA_SOURCE``/``AIRFLOW_CONN_KAFKA_TARGET`` JSON the DAG uses, or ``--*-bootstrap``.
Spark: ``--spark-master`` (default: the host of ``AIRFLOW_CONN_SPARK_DEFAULT``, else ``local[2]``).

Exit codes: 0 done; 1 verification failed or some groups were refused (named on stderr); 2 bad usage or
configuration; 3 groups still have live members (nothing written); 4 a cluster is unreachable;
5 the plan was refused by a safety rule (nothing written).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

from mm2_failover import config, steps
from mm2_failover.config import RunParams

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_LIVE, EXIT_UNREACHABLE, EXIT_REFUSED = 0, 1, 2, 3, 4, 5
log = logging.getLogger("mm2_failover")


class CliError(Exception):
    def __init__(self, code: int, msg: str):
        super().__init__(msg)
        self.code = code


def cluster_conf(file: str | None, bootstrap: str | None, env_var: str) -> dict | None:
    if file:
        return json.loads(Path(file).read_text())
    if bootstrap:
        return {"bootstrap.servers": bootstrap}
    raw = os.environ.get(env_var, "")
    if raw:
        conn = json.loads(raw)
        extra = conn.get("extra", {})
        return json.loads(extra) if isinstance(extra, str) else dict(extra)
    return None


def spark_master(arg: str | None) -> str:
    if arg:
        return arg
    raw = os.environ.get("AIRFLOW_CONN_SPARK_DEFAULT", "")
    if raw:
        c = json.loads(raw)
        return f"{c['host']}:{c['port']}" if c.get("port") else c["host"]
    return "local[2]"


def add_params(p: argparse.ArgumentParser) -> None:
    d = RunParams()
    p.add_argument("--source-alias", default=d.source_alias)
    p.add_argument("--groups-regex", default=d.groups_regex)
    p.add_argument("--groups-exclude-regex", default=d.groups_exclude_regex)
    p.add_argument("--replication-policy", default=d.replication_policy, choices=["default", "identity"])
    p.add_argument("--replication-policy-separator", default=d.replication_policy_separator)
    p.add_argument("--max-quarantined-records", type=int, default=d.max_quarantined_records)
    p.add_argument("--allow-rewind", action="store_true")
    p.add_argument("--on-existing-target-offsets", default=d.on_existing_target_offsets, choices=["fail", "skip", "overwrite"])
    p.add_argument("--apply-concurrency", type=int, default=d.apply_concurrency)
    p.add_argument("--no-source-groups-must-be-empty", dest="source_groups_must_be_empty", action="store_false")
    p.add_argument("--spark-master", default=None)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m mm2_failover", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source-config", help="JSON file of librdkafka settings for the source")
    ap.add_argument("--target-config", help="JSON file of librdkafka settings for the target")
    ap.add_argument("--source-bootstrap")
    ap.add_argument("--target-bootstrap")
    ap.add_argument("--timeout", type=float, default=15.0, help="seconds for every Kafka request (default 15)")
    sub = ap.add_subparsers(dest="command", required=True)
    for name, help_ in [("plan", "snapshot + Spark job + plan, writes plan.json/plan.csv; never writes offsets"),
                        ("apply", "plan (unless done), check groups empty, back up, apply, verify"),
                        ("verify", "read back, compare with the plan, write report.json/report.md")]:
        p = sub.add_parser(name, help=help_, description=help_)
        p.add_argument("--run-dir", type=Path, help="the run's artifacts folder (default: a new one under "
                                                    "$MM2_FAILOVER_ARTIFACTS/cli/)")
        add_params(p)
    p = sub.add_parser("drill", help="DR drill: lag, dry-run plan and findings; writes only for a drill prefix",
                       description="DR drill: lag, dry-run plan and findings; writes only for a drill prefix")
    p.add_argument("--run-dir", type=Path)
    p.add_argument("--allow-drill-writes-for-prefix", default="")
    add_params(p)
    p = sub.add_parser("rollback", help="restore the commits saved in a backup.json, then verify",
                       description="restore the commits saved in a backup.json, then verify")
    p.add_argument("--backup", type=Path, required=True)
    p.add_argument("--apply-concurrency", type=int, default=8)
    return ap


def params_of(a: argparse.Namespace) -> RunParams:
    return RunParams.from_mapping({k: v for k, v in vars(a).items() if v is not None})


def clusters(a: argparse.Namespace):
    from mm2_failover.kafka_io import Cluster

    tconf = cluster_conf(a.target_config, a.target_bootstrap, "AIRFLOW_CONN_KAFKA_TARGET")
    if not tconf:
        raise CliError(EXIT_USAGE, "no target cluster: give --target-config, --target-bootstrap or AIRFLOW_CONN_KAFKA_TARGET")
    sconf = cluster_conf(a.source_config, a.source_bootstrap, "AIRFLOW_CONN_KAFKA_SOURCE")
    return (Cluster(sconf, "source", a.timeout) if sconf else None), Cluster(tconf, "target", a.timeout)


def cmd_plan(a, art: steps.RunArtifacts, params: RunParams):
    snap, target = latest_checkpoints(a, art, params)
    plan = steps.make_plan(target, params, art, snap)
    print(f"plan: {len(plan.groups())} group(s), {plan.counts()} -> {art.plan_json}, {art.plan_csv}")
    return plan, target


def latest_checkpoints(a, art: steps.RunArtifacts, params: RunParams):
    """Snapshot (once per run folder) and the latest-checkpoints Spark job (unless done)."""
    from mm2_failover.spark import job_submission, quarantine_failure, spark_submit

    source, target = clusters(a)
    if source is not None:
        try:
            source.topics()
        except Exception as e:
            log.warning("WARNING: source not reachable (%s): the snapshot has no source end offsets", e)
            source = None
    snap = steps.capture_snapshot(target, params, art, source)
    if not art.checkpoints_summary.exists():
        args, env, conf = job_submission(params, art, snap, target.conf)
        rc = spark_submit(spark_master(a.spark_master), args, env, conf)
        if rc:
            summary = json.loads(art.checkpoints_summary.read_text()) if art.checkpoints_summary.exists() else None
            raise CliError(EXIT_REFUSED if quarantine_failure(summary, params.max_quarantined_records) else EXIT_FAILED,
                           quarantine_failure(summary, params.max_quarantined_records)
                           or f"the latest-checkpoints Spark job failed with exit code {rc}")
    return snap, target


def cmd_apply(a, art, params):
    plan, target = cmd_plan(a, art, params)
    source, _ = clusters(a)
    live = [("target", s) for s in steps.live_groups(target, plan.groups())]
    if params.source_groups_must_be_empty and source is not None:
        try:
            live += [("source", s) for s in steps.live_groups(source, plan.groups())]
        except Exception as e:
            log.warning("WARNING: cannot check the groups on the source (%s)", e)
    if live:
        raise CliError(EXIT_LIVE, "groups still have live members (nothing written):\n" +
                       "\n".join(f"  on {w}: {s.describe()}" for w, s in live))
    steps.take_backup(target, plan, art, params.apply_concurrency)
    res = steps.apply_plan(target, plan, params.apply_concurrency)
    steps.write_json(art.apply_result, res.as_dict())
    rep = steps.verify_run(target, plan, art, params, "cli", art.dir.name, refused=res.refused)
    print(art.report_md.read_text())
    if res.refused:
        raise CliError(EXIT_FAILED, "groups NOT moved: " + "; ".join(f"{g}: {w}" for g, w in res.refused.items()))
    if rep["mismatches"]:
        raise CliError(EXIT_FAILED, f"{len(rep['mismatches'])} partition(s) differ from the plan; see {art.report_md}")


def cmd_verify(a, art, params):
    _, target = clusters(a)
    if not art.plan_json.exists():
        raise CliError(EXIT_USAGE, f"no plan in {art.dir}: run plan/apply first")
    plan = steps.make_plan(target, params, art, json.loads(art.snapshot.read_text()))
    rep = steps.verify_run(target, plan, art, params, "cli", art.dir.name)
    print(art.report_md.read_text())
    if rep["mismatches"]:
        raise CliError(EXIT_FAILED, f"{len(rep['mismatches'])} partition(s) differ from the plan")


def cmd_drill(a, art, params):
    """The drill DAG's task functions, called with a minimal task context (the same code, no scheduler)."""
    from types import SimpleNamespace

    from mm2_failover import drill

    source, target = clusters(a)
    # the drill's task functions resolve clusters from the same connection ids the DAG uses
    os.environ["AIRFLOW_CONN_KAFKA_TARGET"] = json.dumps({"conn_type": "kafka", "extra": target.conf})
    if source is not None:
        os.environ["AIRFLOW_CONN_KAFKA_SOURCE"] = json.dumps({"conn_type": "kafka", "extra": source.conf})
    os.environ["MM2_FAILOVER_ARTIFACTS"] = str(art.dir.parent.parent)
    ctx = {"params": {**params.as_dict(), "dry_run": True,
                      "allow_drill_writes_for_prefix": a.allow_drill_writes_for_prefix},
           "dag": SimpleNamespace(dag_id=art.dir.parent.name), "run_id": art.dir.name}
    drill.measure_replication_lag(ctx)
    latest_checkpoints(a, art, params)
    drill.plan_group_offsets(ctx)
    out = drill.drill_report(ctx)
    print((art.dir / drill.DRILL_MD).read_text())
    return out


def cmd_rollback(a):
    _, target = clusters(a)
    backup = steps.load_backup(a.backup)
    live = steps.live_groups(target, sorted(backup["groups"]))
    if live:
        raise CliError(EXIT_LIVE, "groups still have live members (nothing written):\n" +
                       "\n".join("  " + s.describe() for s in live))
    res = steps.rollback(target, backup, a.apply_concurrency, a.backup.parent)
    left = steps.verify_rollback(target, backup, a.apply_concurrency)
    print(json.dumps({**res.as_dict(), "still_different": left}, indent=2))
    if res.refused or left:
        raise CliError(EXIT_FAILED, "rollback incomplete")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    a = parser().parse_args(argv)
    from mm2_failover.kafka_io import KafkaUnavailable
    from mm2_failover.plan import PlanError

    try:
        if a.command == "rollback":
            cmd_rollback(a)
            return EXIT_OK
        params = params_of(a)
        art = steps.RunArtifacts(a.run_dir or config.artifacts_root() / "cli" / time.strftime("%Y%m%d-%H%M%S"))
        print(f"run folder: {art.dir}", file=sys.stderr)
        {"plan": cmd_plan, "apply": cmd_apply, "verify": cmd_verify, "drill": cmd_drill}[a.command](a, art, params)
        return EXIT_OK
    except CliError as e:
        print(f"mm2_failover {a.command}: {e}", file=sys.stderr)
        return e.code
    except PlanError as e:
        print(f"mm2_failover {a.command}: plan refused, nothing written: {e}", file=sys.stderr)
        return EXIT_REFUSED
    except KafkaUnavailable as e:
        print(f"mm2_failover {a.command}: {e}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except (ValueError, FileNotFoundError) as e:
        print(f"mm2_failover {a.command}: {e}", file=sys.stderr)
        return EXIT_USAGE
