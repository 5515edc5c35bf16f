"""Recovery time on a real scheduler (issue 33 item 6): trigger -> verified, and where the time goes.

    PYTHONPATH=plugins:. .venv/bin/python bench/rto_bench.py [--groups 1] [--partitions 3] [--runs 3]
        [--executor local|celery] [--no-preload] [--lock file|kafka] [--db postgres|sqlite]

1. starts the bed (two KRaft brokers + real MirrorMaker 2), a warm Spark Connect server (the deployment's
   ``spark_connect_default``) and Airflow's four processes - api-server, scheduler (LocalExecutor), dag-processor,
   triggerer - with their own home and metadata DB (:mod:`testbed.airflow_stack`): PostgreSQL by default, a cluster
   of its own (:mod:`testbed.postgres`, the database a deployment runs; ``--db sqlite``: the demo's); ``--executor
   celery``: the
   CeleryExecutor instead, with a Redis of its own and one Celery worker (concurrency 2) in its own folder;
   ``--no-preload``: Airflow's defaults instead of :func:`mm2_failover.adapters.config.preload_settings` (the comparison);
   ``--lock kafka``: the writer lock as the lease in the target, apply's commits through the fenced writer (the
   several-hosts shape's), instead of the file lock; ``--idle-sleep S``: the scheduler's
   ``scheduler_idle_sleep_time`` (docs/operations.md, "Optional tuning: the scheduler's idle sleep");
2. per run, a fresh set of G groups (their own topic of P partitions, consumed and committed on the source, each
   checkpointed by MM2), then ``mm2_failover`` triggered through the REST API (``drain_quiet_seconds`` = Q) and
   approved through the human-in-the-loop REST API as soon as the request is up (like an automation that opted
   in; a person adds their own time);
3. reads every task instance back from the REST API and splits trigger -> verified into: the human's decision (the
   approval's wait), the drain's quiet window, each task's own work, and the scheduler's gaps (trigger to the first
   task, and between one task's end and the next one's start);
4. checks every run: success, and the group's commits on the target equal to ``plan.csv``; and, unless ``--until
   verified``, the Asset events: the one naming every moved group, and the own event of each group an application's
   DAG listens to (``--listeners`` per run, spread evenly: DAGs the bench writes into a bundle of their own, paused
   as Airflow creates them, or with ``--unpaused-listeners`` unpaused, so that each event queues a run), each with
   its offsets, when the last was stored, and each announcing task's last request to the API server.

Prints the table (Markdown, docs/performance.md's) and writes bench/results/rto-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins"))
sys.path.insert(0, str(REPO))

TASKS = [
    "preflight_audit",
    "verify_producers_drained",
    "capture_end_offsets",
    "compute_latest_checkpoints",
    "check_groups_empty",
    "build_plan",
    "approve_plan",
    "apply_group_offsets",
    "verify_group_offsets",
]


def ts(iso: str | None) -> float | None:
    return None if not iso else datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def group_names(tag: str, n: int) -> list[str]:
    return [f"rto-{tag}-{i:06d}" for i in range(n)]


def listened(groups: list[str], k: int) -> list[str]:
    """``k`` of the groups, spread evenly (every part of the Asset events gets its share)."""
    return groups[:: max(1, len(groups) // k)][:k] if k else []


LISTENERS = """# bench/rto_bench.py's applications: one DAG per listened group, scheduled on its Asset (docs/runbook.md)
import json, pathlib
from airflow.sdk import DAG, Asset, task

PAUSED = {}

for i, (name, uri) in json.loads((pathlib.Path(__file__).with_suffix(".json")).read_text()):
    with DAG(f"rto_listener_{i:05d}", schedule=[Asset(name=name, uri=uri)], catchup=False, **PAUSED) as dag:
        task(task_id="restart_consumers")(lambda: None)()
    globals()[dag.dag_id] = dag
"""
LISTENERS_PER_FILE = 200  # a DAG file is parsed in one process, within [dag_processor] dag_file_processor_timeout


def write_listeners(folder: Path, groups: list[str], unpaused: bool = False) -> None:
    """The applications' DAGs for ``groups``, in the bundle :func:`testbed.airflow_stack.with_application_dags` adds:
    paused, as Airflow creates them (the events are stored, no run is made), or ``unpaused`` (each event also queues
    its DAG's run, as in a deployment; the runs then start after the events are stored)."""
    from mm2_failover.rules import assets

    folder.mkdir(parents=True, exist_ok=True)
    numbered = [(i, assets.group_asset(g)) for i, g in enumerate(groups)]
    for k in range(0, len(numbered), LISTENERS_PER_FILE):
        stem = f"rto_listeners_{k // LISTENERS_PER_FILE:04d}"
        (folder / f"{stem}.json").write_text(json.dumps(numbered[k : k + LISTENERS_PER_FILE]))
        paused = "PAUSED = {'is_paused_upon_creation': False}" if unpaused else "PAUSED = {}"
        (folder / f"{stem}.py").write_text(LISTENERS.replace("PAUSED = {}", paused))


def prepare_groups(bed, n: int, partitions: int, records: int = 100, tag: str | None = None) -> tuple[str, list[str]]:
    """G groups on a topic of their own (``records`` per partition), committed on the source and checkpointed by MM2.
    Group g's commit on partition p is ``(7 g + p) % records``: with the default 100 records, 100 groups share each
    position; with ``records`` >= G, every group's position is its own."""
    from mm2_failover.adapters.kafka.cluster import Cluster
    from testbed import scenario

    tag = tag or uuid.uuid4().hex[:6]
    topic, groups = f"rto-{tag}", group_names(tag, n)
    source = Cluster({"bootstrap.servers": bed.source_bootstrap}, "source", timeout=60)
    target = Cluster({"bootstrap.servers": bed.target_bootstrap}, "target", timeout=60)
    source.create_topic(topic, partitions)
    scenario.produce(bed.source_bootstrap, topic, partitions, records)
    scenario.wait_replicated(source, target, topic, f"primary.{topic}", timeout=120)
    if n == 1:
        scenario.consume_and_commit(bed.source_bootstrap, groups[0], topic, {p: 50 + p for p in range(partitions)})
        scenario.wait_checkpointed(target, bed.checkpoints_topic, groups[0], f"primary.{topic}", partitions)
    else:  # many groups: committed in bulk; their checkpoints written in MM2's format (see readiness_bench.py)
        from bench.apply_bench import make_plan
        from bench.readiness_bench import write_checkpoints
        from mm2_failover.stages.apply import apply_plan

        res = apply_plan(source, make_plan(f"rto-{tag}", n, topic, partitions, records), 64)
        assert not res.refused, list(res.refused.items())[:3]
        write_checkpoints(bed.target_bootstrap, bed.checkpoints_topic, n, partitions, records, f"rto-{tag}", topic)
    return f"rto-{tag}-.*", groups


class PeakMemory:
    """Each task process's peak resident memory (``VmHWM``), sampled from /proc every 0.2 s while the bench runs: a
    task runs in a process titled ``airflow worker -- <task instance id>`` (its supervisor's title says
    ``LocalExecutor:``). The JVMs a task starts (the Java helper, spark-submit) and the Spark Connect server are
    not counted."""

    def __init__(self):
        import threading

        self.peak_kib: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-memory", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for d in Path("/proc").iterdir():
                if not d.name.isdigit():
                    continue
                try:
                    title = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                    if not title.startswith("airflow worker -- ") or "LocalExecutor" in title:
                        continue
                    ti = title.split("-- ", 1)[1].split()[0]
                    hwm = next(
                        int(line.split()[1])
                        for line in (d / "status").read_text().splitlines()
                        if line.startswith("VmHWM")
                    )
                except (OSError, StopIteration, IndexError, ValueError):
                    continue
                self.peak_kib[ti] = max(self.peak_kib.get(ti, 0), hwm)

    def mib(self, ti_id: str) -> float | None:
        k = self.peak_kib.get(ti_id)
        return round(k / 1024, 1) if k else None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


PEAK: PeakMemory | None = None


def stored_events(af, run_id: str) -> list[dict]:
    """The run's Asset events as Airflow stored them, from its metadata database: Airflow 3.3.2's REST listing
    (``GET /api/v2/assets/events``) answers 500 while an event's triggered run has not started (its
    ``created_dagruns[].start_date`` is null, which the response model refuses), as with unpaused listeners
    (apache/airflow#71360, fixed by #71379 after 3.3.2)."""
    from datetime import timezone

    from sqlalchemy import create_engine, text

    engine = create_engine(af.db_url or f"sqlite:///{af.home}/airflow.db")
    try:
        with engine.connect() as c:
            rows = c.execute(
                text(
                    "SELECT a.name, a.uri, e.extra, e.timestamp FROM asset_event e JOIN asset a ON a.id = e.asset_id "
                    "WHERE e.source_dag_id = 'mm2_failover' AND e.source_run_id = :run ORDER BY e.timestamp"
                ),
                {"run": run_id},
            ).all()
    finally:
        engine.dispose()

    def epoch(t) -> float:
        t = datetime.fromisoformat(t) if isinstance(t, str) else t
        return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()

    return [
        {"name": n, "uri": u, "extra": json.loads(x) if isinstance(x, str) else x, "timestamp": epoch(t)}
        for n, u, x, t in rows
    ]


def one_run(
    af, bed, regex: str, groups: list[str], quiet: int, until_verified: bool = False, heard: list[str] = ()
) -> dict:
    from mm2_failover.ui.runs import safe_name
    from testbed.airflow_stack import answer, ready_to_answer, run_path, task_states

    # Airflow's scheduler checks every Asset's references each [scheduler] parsing_cleanup_interval, in its loop:
    # ~2.5 s at 10k Assets, ~9 s at 20k (bench/asset_orphanage_bench.py): how many there are is part of the run's
    # conditions (one per listened group, and the one naming them all: assets.py rule 5)
    assets_before = af.api("GET", "/api/v2/assets?limit=1")["total_entries"]
    t_trigger = time.time()
    run = af.api(
        "POST",
        "/api/v2/dags/mm2_failover/dagRuns",
        {"logical_date": None, "conf": {"groups_regex": regex, "drain_quiet_seconds": quiet}},
    )
    run_id = run["dag_run_id"]
    answered = asked = None
    deadline = time.monotonic() + 1800 + 0.03 * len(groups)  # the Asset events: ~10-20 ms each at 100k groups
    while time.monotonic() < deadline:
        # the scheduler and the API server: at 10k groups the dag-processor may die of SQLite's "database is
        # locked" while the scheduler stores 10k asset events (a file DB; a deployment has Postgres) - it is
        # not on the failover's path
        af.check_alive(("api-server", "scheduler"))
        if asked is None and task_states(af, run_id).get("approve_plan", (None,))[0] == "awaiting_input":
            asked = time.time()
        if answered is None and asked is not None and ready_to_answer(af, run_id):
            answer(af, run_id, "Approve")
            answered = time.time()
        dr = af.api("GET", run_path(run_id))
        if dr["state"] in ("success", "failed"):
            break
        if until_verified and task_states(af, run_id).get("verify_group_offsets", (None,))[0] == "success":
            break  # --until verified: the Asset events are not waited for (nor checked)
        time.sleep(0.5)
    t_seen = time.time()
    tis_all, page = [], None  # every task instance: the API returns at most 100 per page ([api] maximum_page_limit)
    while page != []:
        page = af.api("GET", run_path(run_id) + f"/taskInstances?limit=100&offset={len(tis_all)}")["task_instances"]
        tis_all += page
    tis = {t["task_id"]: t for t in tis_all if t.get("map_index", -1) == -1}
    if until_verified:
        assert tis["verify_group_offsets"]["state"] == "success", {k: v["state"] for k, v in tis.items()}
    else:
        assert dr["state"] == "success", {k: v["state"] for k, v in tis.items()}
    folder = af.artifacts / "mm2_failover" / safe_name(run_id)
    planned = {
        (g, t, int(p)): int(o)
        for line in (folder / "plan.csv").read_text().splitlines()
        for g, t, p, o in [line.split(",")]
    }
    got = bed.client("target").commits_many(groups, 32)
    committed = {(g, t, p): getattr(c, "offset", c) for g, cs in got.items() for (t, p), c in cs.items()}
    assert committed == planned, f"{len(committed)} commits on the target, {len(planned)} planned"
    rows, prev_end = [], ts(dr["queued_at"]) or ts(dr["start_date"])
    first_start = None
    for t in TASKS:
        ti = tis[t]
        s, e = ts(ti["start_date"]), ts(ti["end_date"])
        first_start = first_start or s
        rows.append(
            {
                "task": t,
                "start": s,
                "end": e,
                "seconds": round(e - s, 2),
                "try": ti["try_number"],
                "peak_rss_mib": PEAK.mib(ti["id"]) if PEAK else None,
                "gap_before": round(s - prev_end, 2),
            }
        )
        prev_end = e
    appr = next(r for r in rows if r["task"] == "approve_plan")
    # the human's share: from the request being up to the answer (here: an automation answering at once, once
    # Airflow 3.3.2 has processed the parked try - see docs/runbook.md, "Approving the plan")
    human = round(answered - asked, 2) if answered and asked else 0.0
    end = ts(tis["verify_group_offsets"]["end_date"])  # verified; the Asset events go out after it
    total = round(end - t_trigger, 2)
    announced = max(
        [ts(t["end_date"]) for t in tis_all if t["task_id"] == "announce_moved_groups" and t["end_date"]], default=None
    )
    # the applications' cutover events (issue 54 item 3): the one naming every moved group, and each listened group's
    # own (assets.py rules 5-6), stored (the API's timestamp, taken as Airflow writes the event) how long after
    # verify's end; every one read back and checked
    from mm2_failover.rules import assets

    stored_after = named_after = None
    if not until_verified:
        evs = stored_events(af, run_id)
        named = [e for e in evs if (e["name"], e["uri"]) == assets.MOVED_GROUPS]
        own = {e["extra"]["group"]: e for e in evs if e not in named}
        assert len(named) == 1 and named[0]["extra"]["groups"] == sorted(groups), f"{len(named)} events naming all"
        assert sorted(own) == sorted(heard) and len(evs) == len(heard) + 1, f"{len(evs)} events, {len(heard)} heard"
        for g, e in own.items():
            assert (e["name"], e["uri"]) == assets.group_asset(g)
            got_offsets = {(g, t, int(p)): o for t, ps in e["extra"]["offsets"].items() for p, o in ps.items()}
            assert got_offsets == {k: v for k, v in planned.items() if k[0] == g}, g
        stored_after = round(max(e["timestamp"] for e in evs) - end, 2)
        named_after = round(named[0]["timestamp"] - end, 2)
    # how long each announcing task's last request to the API server took (its events travel in it; the worker
    # waits 5 s): the API server's access log, per task instance
    announcing = {t["id"]: t for t in tis_all if t["task_id"].startswith("announce")}
    requests: dict[str, float] = {}
    for line in (af.home / "api-server.log").read_text(errors="replace").splitlines():
        if "method=PATCH" in line and "/state" in line and "duration_us=" in line:
            ti_id = line.split("path=/execution/task-instances/", 1)[-1].split("/", 1)[0]
            if ti_id in announcing:
                requests[ti_id] = int(line.split("duration_us=", 1)[1].split()[0]) / 1e6
    work = round(sum(r["seconds"] for r in rows if r["task"] != "approve_plan"), 2)
    gap = round(sum(r["gap_before"] for r in rows) + (ts(dr["queued_at"]) or t_trigger) - t_trigger, 2)
    return {
        "run_id": run_id,
        "groups": len(groups),
        "assets_before": assets_before,
        "trigger_to_verified_s": total,
        "human_s": human,
        "quiet_window_s": quiet,
        "rto_s": round(total - human - quiet, 2),
        "work_s": work,
        "gaps_s": gap,
        "approval_task_s": appr["seconds"],
        "seen_s": round(t_seen - t_trigger, 2),
        "tasks": rows,
        "announce_peak_rss_mib": max(
            [m for t in tis_all if t["task_id"] == "announce_moved_groups" and (m := PEAK and PEAK.mib(t["id"]))],
            default=None,
        ),
        "announced_s": round(announced - t_trigger, 2) if announced else None,
        "events_stored_after_verify_s": stored_after,
        "event_naming_all_stored_after_verify_s": named_after,
        "listened_groups": len(heard),
        "announce_requests_s": {
            f"{announcing[i]['task_id']}[{announcing[i].get('map_index', -1)}]": round(v, 2)
            for i, v in requests.items()
        },
        "announce_parts": sum(1 for t in tis_all if t["task_id"] == "announce_moved_groups"),
        "partitions_committed": len(planned),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=1)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--records",
        type=int,
        default=100,
        help="records per partition; group g commits (7 g + p) %% records (>= groups: every position distinct)",
    )
    ap.add_argument("--quiet", type=int, default=1, help="drain_quiet_seconds of each run")
    ap.add_argument(
        "--until",
        choices=("announced", "verified"),
        default="announced",
        help="wait for every Asset event and check them (default), or stop at verify (100k groups' events take ~30 min)",
    )
    ap.add_argument(
        "--listeners",
        type=int,
        default=100,
        help="groups per run an application's DAG schedules on (spread evenly): each gets its own Asset event",
    )
    ap.add_argument("--unpaused-listeners", action="store_true", help="their DAGs unpaused: each event queues a run")
    ap.add_argument("--executor", choices=("local", "celery"), default="local")
    ap.add_argument("--no-preload", action="store_true", help="Airflow's defaults, not config.preload_settings()")
    ap.add_argument("--lock", choices=("file", "kafka"), default="file", help="MM2_FAILOVER_LOCK of the tasks")
    ap.add_argument("--db", choices=("postgres", "sqlite"), default="postgres", help="Airflow's metadata database")
    ap.add_argument(
        "--idle-sleep",
        type=float,
        default=None,
        help="the scheduler's [scheduler] scheduler_idle_sleep_time in seconds (Airflow's default: 1)",
    )
    args = ap.parse_args()
    # imported here, before the stack boots in a thread: importing it alongside that thread once failed with
    # "partially initialized module 'typing'" (twice in 20-odd runs, both at this import)
    import importlib

    from testbed import localenv
    from testbed.airflow_stack import AirflowStack, with_application_dags
    from testbed.bed import Bed, free_port
    from testbed.spark_connect import SparkConnectServer

    importlib.import_module("mm2_failover.adapters.config")

    root = REPO / "var" / "bench" / f"rto-{time.strftime('%Y%m%d-%H%M%S')}"
    out: dict = {
        "groups": args.groups,
        "partitions": args.partitions,
        "records_per_partition": args.records,
        "until": args.until,
        "cores": os.cpu_count(),
        "executor": args.executor,
        "preload": not args.no_preload,
        "lock": args.lock,
        "db": args.db,
        "scheduler_idle_sleep_time": args.idle_sleep,
        "listeners_per_run": args.listeners,
        "listeners_unpaused": args.unpaused_listeners,
        "runs": [],
    }
    # each run's groups named up front: the applications' DAGs (a bundle of their own) schedule on some of them
    tags = [uuid.uuid4().hex[:6] for _ in range(args.runs)]
    heard = [listened(group_names(t, args.groups), args.listeners) for t in tags]
    apps = root / "applications"
    write_listeners(apps, [g for h in heard for g in h], args.unpaused_listeners)
    # the defaults the preload settings replace: the scheduler's fork, Airflow's own Celery configuration
    defaults = {
        "AIRFLOW__SCHEDULER__MP_START_METHOD": "fork",
        "AIRFLOW__SCHEDULER__MP_FORKSERVER_PRELOAD": "",
        "AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS": "airflow.providers.celery.executors.default_celery.DEFAULT_CELERY_CONFIG",
    }
    with contextlib.ExitStack() as stack:
        from testbed.postgres import Postgres

        db = stack.enter_context(Postgres()) if args.db == "postgres" else None  # stopped after Airflow
        af = AirflowStack(
            root / "airflow",
            root / "artifacts",
            executor=args.executor,
            extra_env={
                **(defaults if args.no_preload else {}),
                **with_application_dags(apps),
                **(
                    {}
                    if args.idle_sleep is None
                    else {"AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": str(args.idle_sleep)}
                ),
            },
            db_url=db.url if db else None,
        )
        stack.callback(af.stop)
        if args.executor == "celery":
            af.home.mkdir(parents=True, exist_ok=True)
            af.start_redis()
        af.boot_server_side_async()
        server = SparkConnectServer.start(root / "spark-connect", free_port())
        stack.callback(server.stop)
        # many groups: MM2 itself checkpoints them far too slowly here (readiness_bench.py): excluded from it
        bed = stack.enter_context(
            Bed(run_dir=root / "bed", mm2={"groups.exclude": "rto-.*"} if args.groups > 1 else {})
        )
        af.wait_server_side()
        extra = {
            "AIRFLOW_CONN_SPARK_CONNECT_DEFAULT": localenv.spark_connect_conn(server.port),
            "MM2_FAILOVER_ARCHIVE": str(root / "archive"),
            "MM2_FAILOVER_LOCK": args.lock,
        }
        af.start_scheduler(bed.source_bootstrap, bed.target_bootstrap, extra)
        af.start_triggerer(bed.source_bootstrap, bed.target_bootstrap, extra)
        if args.executor == "celery":
            af.start_workers(bed.source_bootstrap, bed.target_bootstrap, {"a": "default"}, extra)
        af.wait(
            lambda: (
                (h := af.api("GET", "/api/v2/monitor/health"))["scheduler"]["status"] == "healthy"
                and h["triggerer"]["status"] == "healthy"
            ),
            120,
            "a healthy scheduler and triggerer",
        )
        af.token = af.login("admin")
        af.wait(lambda: af.api("GET", "/api/v2/dags/mm2_failover"), 90, "the dag-processor to register mm2_failover")
        want = sum(map(len, heard))
        af.wait(
            lambda: af.api("GET", "/api/v2/dags?dag_id_pattern=rto_listener&limit=1")["total_entries"] == want,
            300,
            f"the dag-processor to register the {want} applications' DAGs",
        )
        global PEAK
        PEAK = PeakMemory()
        stack.callback(PEAK.stop)
        for i in range(args.runs):
            regex, groups = prepare_groups(bed, args.groups, args.partitions, args.records, tags[i])
            r = one_run(af, bed, regex, groups, args.quiet, args.until == "verified", heard[i])
            out["runs"].append(r)
            print(
                f"run {i + 1} ({r['assets_before']} Assets listed before it): trigger -> verified {r['trigger_to_verified_s']} s = human {r['human_s']} + quiet "
                f"{r['quiet_window_s']} + work {r['work_s']} + scheduler gaps {r['gaps_s']} (rto {r['rto_s']} s); "
                f"{args.groups} groups in {r['announce_parts']} part(s), {r['listened_groups']} listened to: the event "
                f"naming all stored {r['event_naming_all_stored_after_verify_s']} s after verify, the last "
                f"{r['events_stored_after_verify_s']} s; the announcing tasks' last requests, s: "
                f"{r['announce_requests_s']}",
                flush=True,
            )
    runs = out["runs"]
    med = {
        k: statistics.median(r[k] for r in runs)
        for k in ("trigger_to_verified_s", "rto_s", "work_s", "gaps_s", "human_s")
    }
    out["median"] = med
    # cold: the stack's first run after its scheduler and workers started; warm: the median of the runs after it
    out["cold_rto_s"] = runs[0]["rto_s"]
    if len(runs) > 1:
        out["warm_median_rto_s"] = statistics.median(r["rto_s"] for r in runs[1:])
    print(
        f"\nmm2_failover on a real scheduler ({args.executor} executor, preload {'off' if args.no_preload else 'on'}, "
        f"{args.lock} lock, {args.db} metadata database), "
        f"{args.groups} group(s) x {args.partitions} partitions, {args.runs} run(s), {os.cpu_count()} cores (median; RTO = trigger -> verified minus the human's decision and the quiet window)"
    )
    print("| task | work s | scheduler gap before it s | peak memory MiB (the most of any run) |")
    print("|---|---:|---:|---:|")
    for t in TASKS:
        w = round(statistics.median(next(x["seconds"] for x in r["tasks"] if x["task"] == t) for r in runs), 3)
        g = round(statistics.median(next(x["gap_before"] for x in r["tasks"] if x["task"] == t) for r in runs), 3)
        m = max((x.get("peak_rss_mib") or 0 for r in runs for x in r["tasks"] if x["task"] == t), default=0)
        print(f"| `{t}` | {w} | {g} | {m or '-'} |")
    print(
        f"| `announce_moved_groups` (each part) | | | {max(r.get('announce_peak_rss_mib') or 0 for r in runs) or '-'} |"
    )
    stored = [r["events_stored_after_verify_s"] for r in runs]
    if args.until == "verified":
        print("the Asset events: not waited for (--until verified)")
    else:
        named = [r["event_naming_all_stored_after_verify_s"] for r in runs]
        print(
            f"the Asset events stored after verify, s: the one naming all {args.groups} groups {named}, the last of "
            f"the {args.listeners} listened groups' {stored} (every one read back and checked)"
        )
    print(
        f"| **trigger -> verified** | {med['trigger_to_verified_s']} (human {med['human_s']}, quiet {args.quiet}) | |"
    )
    print(f"| **RTO** | **{med['rto_s']}** = work {med['work_s']} + gaps {med['gaps_s']} | |")
    print(
        f"cold (first run) RTO {out['cold_rto_s']} s; warm (median of the rest) {out.get('warm_median_rto_s', '-')} s"
    )
    path = REPO / "bench" / "results" / f"rto-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(out, indent=2, default=str))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
