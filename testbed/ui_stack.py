"""``make ui``: see the pipeline in a real Airflow, in your browser, without writing a script.

Starts the local bed (source + target Kafka, MirrorMaker 2), a scenario (a consumer group that read part of a topic
and stopped, checkpointed by MM2), and a real Airflow on it - api-server, scheduler, dag-processor and triggerer,
with Airflow's simple auth manager (user ``admin``, a password printed here) - then triggers a failover of that
group, which builds its plan and waits for your approval. It prints the URL, the login and where to look (the run,
its approval request, the report pages, the readiness page), and stays up until Ctrl-C, which stops everything.

``--check``: once the failover waits for its approval, check that the pages answer and exit (what a test runs).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

REPO_ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="make ui", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, default=REPO_ROOT / "var" / "ui" / time.strftime("%Y%m%d-%H%M%S"))
    ap.add_argument("--check", action="store_true", help="exit once the failover waits for its approval")
    a = ap.parse_args(argv)
    workdir = a.workdir.resolve()

    from testbed import scenario
    from testbed.airflow_stack import AirflowStack, wait_for_approval_request
    from testbed.bed import Bed

    t0 = time.monotonic()
    af = AirflowStack(workdir / "airflow", workdir / "artifacts")
    print(f"ui: starting Kafka, MirrorMaker 2 and Airflow under {workdir} (2-4 minutes)", flush=True)
    with Bed(run_dir=workdir / "bed") as bed:
        try:
            af.home.mkdir(parents=True, exist_ok=True)
            af.boot_server_side_async()  # the metadata DB, the api-server and the dag-processor, while MM2 starts
            tag = uuid.uuid4().hex[:6]
            group, topic = f"orders-app-{tag}", f"orders-{tag}"
            scenario.prepare(
                bed.source_bootstrap,
                bed.target_bootstrap,
                group=group,
                topic=topic,
                partitions=3,
                produced=300,
                consumed_upto={0: 40, 1: 75, 2: 100},
                source_alias=bed.source_alias,
            )
            af.wait_server_side()
            af.start_scheduler(bed.source_bootstrap, bed.target_bootstrap)
            af.start_triggerer(bed.source_bootstrap, bed.target_bootstrap)
            af.wait(
                lambda: af.api("GET", "/api/v2/monitor/health")["scheduler"]["status"] == "healthy",
                120,
                "a healthy scheduler",
            )
            af.token = af.login("admin")
            af.wait(lambda: af.api("GET", "/api/v2/dags/mm2_failover"), 90, "the DAGs to be parsed")
            run = af.api(
                "POST",
                "/api/v2/dags/mm2_failover/dagRuns",
                {"logical_date": None, "conf": {"groups_regex": group, "drain_quiet_seconds": 1}},
            )
            run_id = run["dag_run_id"]
            print(f"ui: failover {run_id} of group {group} triggered; waiting for its plan", flush=True)
            wait_for_approval_request(af, run_id, 420)
            run_url = f"{af.base}/dags/mm2_failover/runs/{quote(run_id, safe='')}"
            print(
                "\n".join(
                    [
                        "",
                        f"Airflow is up: {af.base}  (took {time.monotonic() - t0:.0f} s)",
                        f"  log in as:        admin / {af.passwords['admin']}",
                        f"  the failover run: {run_url}",
                        f"  its approval:     {run_url}/tasks/approve_plan/required_actions  (Approve or Reject)",
                        f"  its report tab:   {run_url}/plugin/mm2-failover-run",
                        f"  all reports:      {af.base}/plugin/mm2-failover",
                        f"  readiness:        {af.base}/plugin/mm2-failover-readiness  (unpause mm2_sync_archive and "
                        "mm2_failover_readiness to fill it)",
                        f"  the group:        {group} on topic {topic} (3 partitions; the replica is "
                        f"{bed.source_alias}.{topic})",
                        "Ctrl-C stops Airflow, MirrorMaker 2 and Kafka.",
                        "",
                    ]
                ),
                flush=True,
            )
            if a.check:
                return check(af, run_id)
            stop = []
            signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
            while not stop:
                af.check_alive()
                time.sleep(2)
        except KeyboardInterrupt:
            print("\nui: stopping", flush=True)
        finally:
            af.stop()
    return 0


def check(af, run_id: str) -> int:
    """The run waits for its approval, and the pages a person opens answer: the login, the run's report page."""
    from testbed.airflow_stack import task_states

    state = task_states(af, run_id).get("approve_plan", (None,))[0]
    status, body = af.get(f"/mm2/runs/mm2_failover/{quote(run_id, safe='')}", af.token)
    login, _ = af.get("/auth/login")
    ok = state == "awaiting_input" and status == 200 and "AWAITING APPROVAL" in body and login == 200
    print(f"ui: check: approve_plan {state}, report page {status}, login page {login}: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
