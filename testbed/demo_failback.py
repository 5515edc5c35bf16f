"""``make demo-failback``: fail over, consume on the backup, fail back - through the real ``mm2_failover`` DAG.

The drill of :mod:`testbed.failback` on the local bed: the failover is a DAG run in disaster mode (the primary is
lost, with records MM2 never copied); the failback is a DAG run with the connections swapped (``kafka_source`` ->
backup, ``kafka_target`` -> primary), ``source_alias=backup``, ``home_alias=primary`` and
``on_existing_target_offsets=overwrite``. Spark runs in local mode (spark-submit). Prints, per partition on the
primary, the rule that placed the group, records lost (must be 0) and read twice; exits 1 unless every record was
read at least once and both runs succeeded.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbed.demo_failback", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--workdir", type=Path, default=REPO_ROOT / "var" / "demo-failback" / time.strftime("%Y%m%d-%H%M%S")
    )
    args = ap.parse_args(argv)
    args.workdir = args.workdir.resolve()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from mm2_failover.adapters.config import run_dir
    from mm2_failover.adapters.runfolder import RunFolder
    from testbed import failback as fb
    from testbed import localenv
    from testbed.bed import Bed

    t0 = time.monotonic()
    states = {}
    with Bed(run_dir=args.workdir / "bed") as bed:
        env = localenv.airflow_env(args.workdir / "airflow", bed.source_bootstrap, bed.target_bootstrap)
        os.environ.update(env)  # before Airflow is imported: this process becomes the Airflow "worker"
        localenv.migrate_db(env)

        def archive(b):  # what the mm2_sync_archive DAG does on its schedule, before the outage
            r = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "mm2_failover",
                    "--source-bootstrap",
                    b.source_bootstrap,
                    "--target-bootstrap",
                    b.target_bootstrap,
                    "archive",
                ],
                capture_output=True,
                text=True,
            )
            if r.returncode:
                raise RuntimeError(f"archive failed: {r.stderr[-2000:]}")

        def run(name: str, conf: dict) -> Path:
            dr = localenv.run_dag("mm2_failover", {"drain_quiet_seconds": 2, "groups_regex": fb.GROUP, **conf})
            states[name] = str(dr.state)
            print(f"{name}: mm2_failover run {dr.run_id}: {dr.state}", flush=True)
            return run_dir("mm2_failover", dr.run_id)

        def fail_back(b):
            os.environ["AIRFLOW_CONN_KAFKA_SOURCE"] = localenv.kafka_conn(b.target_bootstrap)
            os.environ["AIRFLOW_CONN_KAFKA_TARGET"] = localenv.kafka_conn(b.source_bootstrap)
            return run(
                "failback",
                {"source_alias": "backup", "home_alias": "primary", "on_existing_target_offsets": "overwrite"},
            )

        out = fb.drill(bed, archive, lambda b: run("failover", {"source_reachable": "no"}), fail_back)
    report = out.report if RunFolder(out.failback).report_json.exists() else {}
    ok = set(states.values()) == {"success"} and set(out.lost.values()) == {0} and report.get("outcome") == "succeeded"
    result = {
        "states": states,
        "lost": sum(out.lost.values()),
        "read_twice": sum(out.duplicates.values()),
        "read_twice_by_the_failback": sum(out.again.values()),
        "partitions": [
            {
                "topic": t,
                "partition": p,
                "rule": out.rules.get((t, p)),
                "lost": out.lost[(t, p)],
                "read_twice": out.duplicates[(t, p)],
                "by_the_failback": out.again[(t, p)],
            }
            for (t, p) in sorted(out.lost)
        ],
        "mm2_reverse_checkpoints_for": sorted(out.reverse_checkpoint_topics),
        "never_copied": [w for w in report.get("warnings", []) if "never copied" in w],
        "failover": str(out.failover),
        "failback": str(out.failback),
        "seconds": round(time.monotonic() - t0, 1),
    }
    (args.workdir / "demo_result.json").write_text(json.dumps(result, indent=2))
    print("\n" + "=" * 78)
    print(f"fail over -> consume on backup -> fail back: {states} ({result['seconds']} s in all)")
    print(out.table())
    print(
        f"MM2's backup->primary checkpoints for the group: {sorted(out.reverse_checkpoint_topics)} (none for "
        "primary.orders: its positions went home by the archived primary->backup offset syncs)"
    )
    print("\n".join(result["never_copied"]))
    print(f"report: {out.failback / 'report.md'}\nresult: {args.workdir / 'demo_result.json'}")
    print("VERIFIED" if ok else "VERIFICATION FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
