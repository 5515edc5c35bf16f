"""``make demo``: the whole pipeline, end to end, on the embedded default.

Starts the local bed (source + target Kafka, MirrorMaker 2), runs the scenario (records produced on the
source, a consumer group consumes part of them and stops, MM2 replicates and checkpoints), runs the real
``mm2_failover`` DAG with Airflow (``dag.test()``, Spark in local mode through ``spark_default``), then
consumes from the target in the same group and prints where it resumed. Stops the bed. Exits 1 when the
DAG failed, a record would be lost, or the committed offsets differ from the checkpoints.

``--spark connect`` (the default of ``make demo``) also starts a warm Spark Connect server (local mode, the Kafka
source jars, warmed with the job's own plans: ``testbed.spark_connect``) and defines ``spark_connect_default``: the
DAG runs its Spark job on that server (the demo checks that the job's summary says so). ``--spark local``
(``make demo SPARK=local``): spark-submit in local mode.

``--secured`` (``make demo SECURED=1``): both clusters run Kafka's StandardAuthorizer (nothing allowed without an
ACL) and the DAG reaches them over SASL_PLAINTEXT (SCRAM-SHA-512) as a principal holding exactly docs/reference.md's
least-privilege ACLs (``mm2_failover.rules.acls``) for the demo's topic and group; MM2 and the scenario's own clients use
the PLAINTEXT listener (a super user).

``--spark cluster`` (``make demo SPARK=cluster``) also starts a Spark standalone cluster (one master, one
worker, from the pinned pyspark) in the bed's run folder and points ``spark_default`` at it: the same DAG
then runs its Spark job on the cluster (and the demo checks that the master lists the application FINISHED).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbed.demo", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--spark",
        choices=["connect", "local", "cluster"],
        default="connect",
        help="connect: a warm Spark Connect server (local mode) started here, the job runs on it; local: "
        "spark-submit in local mode (--spark-master); cluster: start a Spark standalone cluster "
        "(master + 1 worker) in the bed's run folder and submit to it (default connect)",
    )
    ap.add_argument(
        "--spark-master",
        default=os.environ.get("SPARK_MASTER", "local[2]"),
        help="Spark master for spark_default with --spark local (default local[2])",
    )
    ap.add_argument(
        "--secured",
        action="store_true",
        help="ACLs on both clusters; the DAG connects over SASL/SCRAM with the least-privilege ACLs only",
    )
    ap.add_argument("--workdir", type=Path, default=REPO_ROOT / "var" / "demo" / time.strftime("%Y%m%d-%H%M%S"))
    args = ap.parse_args(argv)
    args.workdir = args.workdir.resolve()  # Airflow's sqlite URL needs an absolute path
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from mm2_failover.adapters.config import run_dir
    from mm2_failover.adapters.kafka.cluster import Cluster
    from mm2_failover.adapters.runfolder import RunFolder
    from testbed import localenv, scenario
    from testbed.bed import Bed

    t0 = time.monotonic()
    spark = {"mode": args.spark}
    with Bed(run_dir=args.workdir / "bed", acls=args.secured) as bed, contextlib.ExitStack() as stack:
        master, spark_conf = args.spark_master, {}
        if args.spark == "cluster":
            from testbed.spark_cluster import SparkCluster

            cluster = stack.enter_context(SparkCluster(bed.run_dir / "spark"))
            master, spark_conf = cluster.master_url, cluster.app_conf
            spark.update(cluster.info())
        spark["master"] = master
        env = localenv.airflow_env(
            args.workdir / "airflow", bed.source_bootstrap, bed.target_bootstrap, master, spark_conf=spark_conf
        )
        if args.spark == "connect":
            from testbed.bed import free_port
            from testbed.spark_connect import SparkConnectServer

            server = SparkConnectServer.start(bed.run_dir / "spark-connect", free_port())
            stack.callback(server.stop)
            env["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"] = localenv.spark_connect_conn(server.port)
            spark.update(
                {
                    "connect": server.url,
                    "connect_started_s": server.started_seconds,
                    "connect_warm_up_s": server.warmup_seconds,
                }
            )
            print(
                f"Spark Connect server {server.url}: port open in {server.started_seconds} s, warmed up in "
                f"{server.warmup_seconds} s",
                flush=True,
            )
        os.environ.update(env)  # before Airflow is imported: this process becomes the Airflow "worker"
        localenv.migrate_db(env)
        prep = scenario.prepare(bed.source_bootstrap, bed.target_bootstrap, source_alias=bed.source_alias)
        if args.secured:
            from mm2_failover.rules.acls import bindings
            from mm2_failover.rules.naming import ReplicationPolicy
            from testbed.bed import SCRAM_USER, scram_conf

            granted = bindings(ReplicationPolicy(bed.source_alias), bed.target_alias, [prep.topic], [prep.group])
            bed.grant(granted)
            os.environ["AIRFLOW_CONN_KAFKA_SOURCE"] = json.dumps(
                {"conn_type": "kafka", "extra": scram_conf(bed.source.sasl_bootstrap)}
            )
            os.environ["AIRFLOW_CONN_KAFKA_TARGET"] = json.dumps(
                {"conn_type": "kafka", "extra": scram_conf(bed.target.sasl_bootstrap)}
            )
            print(
                f"secured: ACLs on both clusters; the DAG connects as User:{SCRAM_USER} over SASL_PLAINTEXT "
                f"(SCRAM-SHA-512) with {len(granted)} ACL(s):\n  " + "\n  ".join(map(str, granted)),
                flush=True,
            )
        dagrun = localenv.run_dag(
            "mm2_failover",
            {
                "source_alias": bed.source_alias,
                "groups_regex": prep.group,
                "drain_quiet_seconds": 2,
                "mm2_config": str(bed.run_dir / "mm2" / "mm2.properties"),
            },
        )
        target = Cluster({"bootstrap.servers": bed.target_bootstrap}, "target")
        committed = target.committed(prep.group)
        first = scenario.first_records_on_target(bed.target_bootstrap, prep.group, prep.replica_topic, prep.partitions)
        rows = scenario.compare(prep, committed, first)
        summary = RunFolder(run_dir("mm2_failover", dagrun.run_id)).load_summary()
        spark["route"] = ((summary.raw if summary else {}).get("spark") or {}).get("route")
        if args.spark == "cluster":
            with contextlib.suppress(TimeoutError):
                app = cluster.wait_completed_app(timeout=30)
                spark["application"] = {k: app.get(k) for k in ("id", "name", "state", "duration")}
    art = run_dir("mm2_failover", dagrun.run_id)
    loaded = RunFolder(art).load_report()
    report = loaded.as_dict() if loaded else {}
    planned = {(p["topic"], p["partition"]): p["planned_offset"] for p in report.get("partitions", [])}
    as_planned = bool(planned) and all(
        planned.get((prep.replica_topic, r.partition)) == r.target_committed for r in rows
    )
    never_behind_mm2 = all(
        r.checkpoint_downstream is None or r.target_committed >= r.checkpoint_downstream for r in rows
    )
    lost = sum(r.lost for r in rows)
    on_cluster = args.spark != "cluster" or spark.get("application", {}).get("state") == "FINISHED"
    on_route = spark.get("route") == ("spark-connect" if args.spark == "connect" else "spark-submit")
    ok = dagrun.state == "success" and as_planned and never_behind_mm2 and lost == 0 and on_cluster and on_route
    result = {
        "dag_state": str(dagrun.state),
        "run_id": dagrun.run_id,
        "artifacts": str(art),
        "committed_as_planned": as_planned,
        "never_behind_mm2": never_behind_mm2,
        "lost": lost,
        "re_read": sum(r.re_read for r in rows),
        "re_read_by_mm2_checkpoints": sum(
            max(0, r.source_committed - r.checkpoint_downstream) for r in rows if r.checkpoint_downstream is not None
        ),
        "partitions": [r.as_dict() for r in rows],
        "spark": spark,
        "secured": args.secured,
        "seconds": round(time.monotonic() - t0, 1),
    }
    (args.workdir / "demo_result.json").write_text(json.dumps(result, indent=2))
    print("\n" + "=" * 78)
    print(f"mm2_failover DAG run {dagrun.run_id}: {dagrun.state}  ({result['seconds']} s in all)")
    print(scenario.render_outcomes(rows))
    print(
        "\nre-read: records the group had consumed on the source and reads again on the target; lost: records it "
        "would skip (must be 0).\nMM2 checkpoint / its re-read: where MM2's (conservative) checkpoint alone would "
        "have resumed, and what it would have re-read;\nthe pipeline resumes where MM2's offset syncs prove the "
        "group is (translation=exact), checked against the records themselves."
    )
    print(f"committed offsets == the plan: {as_planned}; never behind MM2's checkpoints: {never_behind_mm2}")
    if args.spark == "cluster":
        app = spark.get("application") or {}
        print(
            f"Spark job on the standalone cluster {spark['master']}: application {app.get('id')} "
            f"{app.get('state', 'NOT FOUND')} (executor logs under {spark['work_dir']})"
        )
    elif args.spark == "connect":
        print(
            f"Spark job on the warm Spark Connect server {spark['connect']} (route in the job's summary: "
            f"{spark.get('route')})"
        )
    else:
        print(f"Spark job in local mode ({spark['master']}, route in the job's summary: {spark.get('route')})")
    print(f"report: {art / 'report.md'}\nresult: {args.workdir / 'demo_result.json'}")
    print("VERIFIED" if ok else "VERIFICATION FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
