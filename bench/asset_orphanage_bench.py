"""What one Asset per consumer group costs Airflow's scheduler (issue 54 item 4): the scheduler's asset-orphanage check
at N Assets, on PostgreSQL.

    PYTHONPATH=plugins:. .venv/bin/python bench/asset_orphanage_bench.py [--assets 10000 20000 40000]

Every ``[scheduler] parsing_cleanup_interval`` (60 s by default) Airflow 3's scheduler runs
``SchedulerJobRunner._update_asset_orphanage`` in its main loop: it counts every Asset's references (DAG schedules,
task outlets and inlets, asset aliases), removes the unreferenced ones from ``asset_active`` and activates the
referenced ones not active yet. While it runs the loop schedules nothing. Until rule 5 of
:mod:`mm2_failover.rules.assets`, a failover announced each moved group as an Asset materialized through the alias
``mm2_failover_moved_groups``, so a deployment of N groups held N such Assets; now it holds one per listened group.

1. starts a PostgreSQL of its own (:mod:`testbed.postgres`) and migrates an Airflow metadata database into it;
2. for each N: adds Assets up to N, each associated with the alias as the announcements of an earlier version made
   them, then times the scheduler's own routine three times - the first activates the new Assets, the next two are
   the steady state (nothing to change) - and checks that all N are active;
3. runs the clean-up docs/operations.md gives a deployment that ran that version (its SQL block, read from the page)
   and checks that the routine then deactivates every one of them;
4. prints the table and writes bench/results/asset-orphanage-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "plugins"), str(ROOT)]

from testbed.postgres import Postgres  # noqa: E402

# docs/operations.md's clean-up, statement by statement (read from there: the bench runs what the page says)
CLEANUP = [
    line
    for line in (ROOT / "docs" / "operations.md").read_text().split("```sql\n", 1)[1].split("```", 1)[0].splitlines()
    if line.startswith("DELETE FROM")
]
# run in a process of its own with AIRFLOW_HOME and the database set before Airflow is imported
MEASURE = (
    "CLEANUP = "
    + repr(CLEANUP)
    + "\n"
    + r"""
import json, os, sys, time
from datetime import datetime, timezone
from sqlalchemy import func, insert, select, text
from airflow.jobs.job import Job
from airflow.jobs.scheduler_job_runner import SchedulerJobRunner
from airflow.models.asset import AssetActive, AssetAliasModel, AssetModel, alias_association_table
from airflow.utils.session import create_session

now = datetime.now(timezone.utc)
with create_session() as s:
    s.execute(insert(AssetAliasModel).values(name="mm2_failover_moved_groups", group="asset"))
    alias_id = s.scalar(select(AssetAliasModel.id))
runner = SchedulerJobRunner(job=Job())


def check() -> float:
    # the scheduler's own routine once, timed
    with create_session() as s:
        t0 = time.perf_counter()
        runner._update_asset_orphanage(session=s)
        s.commit()
        return round(time.perf_counter() - t0, 2)


have, out = 0, []
for n in map(int, sys.argv[1:]):
    with create_session() as s:
        rows = [
            dict(name=f"mm2-failover/consumer-group/g{i}", uri=f"x-mm2-failover://consumer-group/g{i}", group="asset",
                 extra={}, created_at=now, updated_at=now)
            for i in range(have, n)
        ]
        for k in range(0, len(rows), 5000):
            s.execute(insert(AssetModel), rows[k : k + 5000])
        ids = s.scalars(select(AssetModel.id).order_by(AssetModel.id)).all()[have:n]
        s.execute(insert(alias_association_table), [dict(alias_id=alias_id, asset_id=i) for i in ids])
    have = n
    seconds = []
    for _ in range(3):
        seconds.append(check())
        with create_session() as s:
            active = s.scalar(select(func.count()).select_from(AssetActive))
        assert active == n, f"{active} Assets active, {n} made"
    out.append({"assets": n, "activating_s": seconds[0], "steady_s": seconds[1:]})
# the clean-up docs/operations.md gives a deployment whose earlier version made these Assets: the alias and its
# associations deleted, the scheduler's next check deactivates every Asset no DAG declares
if os.environ.get("CLEANUP_SQLITE"):  # as `sqlite3` or `airflow db shell` would: foreign keys not enforced
    import sqlite3

    db = sqlite3.connect(os.environ["CLEANUP_SQLITE"])
    for statement in CLEANUP:
        db.execute(statement)
    db.commit()
    db.close()
else:
    with create_session() as s:
        for statement in CLEANUP:
            s.execute(text(statement))
cleanup_s = [check() for _ in range(3)]  # the check that deactivates them, then the steady state (rows stay, inactive)
with create_session() as s:
    left = s.scalar(select(func.count()).select_from(AssetActive))
    linked = s.scalar(select(func.count()).select_from(alias_association_table))
assert (left, linked) == (0, 0), f"{left} Assets still active, {linked} still associated after the alias's deletion"
print("RESULT " + json.dumps({"rows": out, "cleanup": {"deactivated": have, "seconds": cleanup_s}}))
"""
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--assets", type=int, nargs="+", default=[10000, 20000, 40000])
    ap.add_argument("--db", choices=("postgres", "sqlite"), default="postgres", help="the metadata database")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="asset-orphanage-bench-"))
    (home / "dags").mkdir()
    with contextlib.ExitStack() as stack:
        if args.db == "postgres":
            url, extra = stack.enter_context(Postgres()).url, {}
        else:  # the clean-up then runs through Python's sqlite3, as a person's shell would (no foreign keys)
            url, extra = f"sqlite:///{home}/airflow.db", {"CLEANUP_SQLITE": str(home / "airflow.db")}
        env = {
            **os.environ,
            **extra,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": url,
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        }
        airflow = str(Path(sys.executable).parent / "airflow")
        r = subprocess.run([airflow, "db", "migrate"], env=env, capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"airflow db migrate failed: {r.stderr[-2000:]}")
        r = subprocess.run(
            [sys.executable, "-c", MEASURE, *map(str, sorted(args.assets))], env=env, capture_output=True, text=True
        )
        line = next((x for x in r.stdout.splitlines() if x.startswith("RESULT ")), None)
        if r.returncode or line is None:
            raise SystemExit(f"the measurement failed (exit {r.returncode}): {r.stderr[-3000:]}")
    got = json.loads(line[len("RESULT ") :])
    rows = got["rows"]
    print(f"Airflow's asset-orphanage check (the scheduler's loop held), {args.db}, Assets made through the alias")
    print("| Assets | the check that activates the new ones, s | the steady state (nothing to change), s |")
    print("|---:|---:|---:|")
    for x in rows:
        print(f"| {x['assets']:,} | {x['activating_s']} | {', '.join(map(str, x['steady_s']))} |")
    out = ROOT / "bench" / "results" / f"asset-orphanage-{datetime.now():%Y%m%d-%H%M%S}.json"
    c = got["cleanup"]
    print(
        f"the clean-up (docs/operations.md's {len(CLEANUP)} statements): the next check deactivated all {c['deactivated']:,} "
        f"Assets in {c['seconds'][0]} s; the checks after it (the rows stay, inactive): {c['seconds'][1:]} s"
    )
    out.write_text(json.dumps({"cores": os.cpu_count(), "db": args.db, "rows": rows, "cleanup": c}, indent=2) + "\n")
    print(f"results: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
