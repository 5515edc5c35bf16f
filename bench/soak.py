"""The soak (issue 49 item 2): the scheduled DAGs unattended, faults and all, and what people would have been told.

The real scheduler (LocalExecutor, its own Airflow home and SQLite DB) runs ``mm2_sync_archive`` and
``mm2_failover_readiness`` every ``--interval`` seconds (``MM2_FAILOVER_INTERVAL_SECONDS``) on a local bed (source,
target, MirrorMaker 2), their artifacts and the sync archive in a real S3 server (S3Proxy), their mails through a real
SMTP server. A consumer group reads a topic on the source the whole time; the phases follow each other until
``--minutes`` have passed:

- ``quiet``: nothing produced (the archive has nothing new to refresh - it crashed on that once);
- ``busy``: records produced all the phase;
- ``mm2_restarted``: MirrorMaker 2 stopped for an interval, then started again (a fault);
- ``broker_restarted``: the source broker stopped for an interval, then started again (a fault);
- ``store_unreachable``: the object store stopped for 1.5 intervals, then started again on its port (a fault).

Then the runs queued until then are waited for, and - the truth at the end (:func:`final_failover`) - traffic stops,
the next readiness run that sees every record replicated is what readiness said, and a failover of the soak's group
runs: each partition's committed offset, re-read and loss are scored record by record against the source and
compared with what readiness said (:func:`said_vs_truth`). Then the DAGs are paused and everything is scored:

- **failed runs**: each must overlap a fault (its window widened by an interval and a grace for the run already
  going); any other is *unexpected*;
- **told once**: each failed run is mailed exactly once (one failure mail naming it);
- **recovered**: after each fault, each DAG has a successful run that started after the fault ended - nobody did
  anything;
- **alerts** (readiness's "degraded" mails, and a run's "NOT FINISHED" deadline mail): each must fall in a fault's
  widened window; any other is a *false alert*, listed with its subject;
- **readiness against the truth**: the failover committed the offsets readiness said, lost no record, and re-read
  what readiness said wherever it said "exact".

The result (duration, intervals, phases, runs by state, failed runs with their fault, mails, alerts, unexpected
failures, false alerts) goes to ``bench/results/soak-<time>.json`` and is printed as a table. The short form runs in
``make test`` (``tests/integration/test_soak.py``: a few intervals of each kind of phase); the long form::

    PYTHONPATH=plugins:. .venv/bin/python bench/soak.py --minutes 60 --interval 60

Exit code 0 when there was no unexpected failure, no false alert, every failure was told once and every fault was
recovered from; 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DAGS = ("mm2_sync_archive", "mm2_failover_readiness")
FAULTS = ("mm2_restarted", "broker_restarted", "store_unreachable")
CYCLE = ("quiet", "busy", "mm2_restarted", "quiet", "broker_restarted", "busy", "store_unreachable", "quiet")


@dataclass
class Phase:
    name: str
    start: float
    end: float = 0.0

    @property
    def fault(self) -> bool:
        return self.name in FAULTS


@dataclass
class Result:
    minutes: float
    interval_s: int
    phases: list[dict] = field(default_factory=list)
    runs: dict[str, dict[str, int]] = field(default_factory=dict)
    failed_runs: list[dict] = field(default_factory=list)
    unexpected_failures: list[dict] = field(default_factory=list)
    not_told_once: list[dict] = field(default_factory=list)
    not_recovered: list[dict] = field(default_factory=list)
    alerts: list[dict] = field(default_factory=list)
    false_alerts: list[dict] = field(default_factory=list)
    mails: int = 0
    # the truth at the end: readiness's last answer against a failover run, scored record by record (None: not run)
    final: dict | None = None

    @property
    def ok(self) -> bool:
        return (
            not (self.unexpected_failures or self.false_alerts or self.not_told_once or self.not_recovered)
            and all(v.get("success", 0) for v in self.runs.values())
            and (self.final is None or (self.final.get("ran") and not self.final.get("wrong")))
        )

    def as_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


# ------------------------------------------------------------------------------------------ scoring (pure)


def _ts(iso: str | None) -> float | None:
    from datetime import datetime

    return None if not iso else datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def score(
    result: Result,
    phases: list[Phase],
    runs: dict[str, list[dict]],
    mails: list[tuple[float, str]],
    interval: float,
    grace: float,
) -> Result:
    """What the soak saw, against what was injected: ``runs`` per DAG (the REST API's dag runs), ``mails`` as (time
    received, subject). A failure or an alert is expected only within a fault's window widened by ``interval +
    grace`` at both ends (a run that began before the fault and read it, a readiness run that saw it after)."""
    windows = [(p.start - interval - grace, p.end + interval + grace, p.name) for p in phases if p.fault]

    def fault_at(t0: float, t1: float) -> str | None:
        return next((name for lo, hi, name in windows if t0 <= hi and t1 >= lo), None)

    result.phases = [{"name": p.name, "start": p.start, "end": p.end, "fault": p.fault} for p in phases]
    result.mails = len(mails)
    for dag_id, rs in runs.items():
        result.runs[dag_id] = {}
        for r in rs:
            result.runs[dag_id][r["state"]] = result.runs[dag_id].get(r["state"], 0) + 1
            if r["state"] != "failed":
                continue
            t0 = _ts(r.get("start_date")) or _ts(r.get("queued_at")) or 0.0
            t1 = _ts(r.get("end_date")) or t0
            fault = fault_at(t0, t1)
            told = sum(1 for _t, s in mails if r["dag_run_id"] in s and " FAILED" in s)
            row = {"dag_id": dag_id, "run_id": r["dag_run_id"], "start": t0, "end": t1, "fault": fault, "told": told}
            result.failed_runs.append(row)
            if fault is None:
                result.unexpected_failures.append(row)
            if told != 1:
                result.not_told_once.append(row)
        for p in phases:
            if not p.fault:
                continue
            after = [r for r in rs if r["state"] == "success" and (_ts(r.get("start_date")) or 0) >= p.end]
            if not after:
                result.not_recovered.append({"dag_id": dag_id, "fault": p.name, "ended": p.end})
    for t, subject in mails:
        if "readiness degraded" not in subject and "NOT FINISHED" not in subject:  # pages: degradations, deadlines
            continue
        row = {"at": t, "subject": subject, "fault": fault_at(t, t)}
        result.alerts.append(row)
        if row["fault"] is None:
            result.false_alerts.append(row)
    return result


def truth_of(records: list[tuple[int, bytes]]):
    """What one source partition holds, as the drill's scorer wants it: payload -> its offset, and every offset of a
    payload written more than once (a producer's retry twin across a broker restart)."""
    from testbed.exact_drill import Truth

    at: dict[bytes, list[int]] = {}
    for o, v in records:
        at.setdefault(v, []).append(o)
    return Truth(
        offsets={v: os_[0] for v, os_ in at.items()}, twins={v: tuple(os_) for v, os_ in at.items() if len(os_) > 1}
    )


def said_vs_truth(
    said: list[dict],
    committed: dict[int, int],
    positions: dict[int, int],
    copies: dict[int, list[tuple[int, bytes]]],
    truth: dict[int, object],
) -> dict:
    """Readiness's last answer for the group (its partition rows: ``partition``, ``kind``, ``planned``, ``reread``,
    ``not_replicated``) against what the failover that followed did (``committed``: partition -> the group's offset
    on the target) and the records (``positions``: the group's source offsets; ``copies``: the replica's records;
    ``truth``: :func:`truth_of` each source partition). A row is wrong when the failover committed another offset
    than readiness said, lost a record, or re-read other than readiness's figure where readiness called it exact;
    a row not exact may say its re-read unknown (None), and a figure it gives must be within 10 % of the truth."""
    from testbed.exact_drill import near, score

    rows, wrong = [], []
    for r in sorted(said, key=lambda r: r["partition"]):
        p = int(r["partition"])
        got = committed.get(p)
        row = {
            "partition": p,
            "kind": r.get("kind"),
            "said_planned": r.get("planned"),
            "committed": got,
            "said_reread": r.get("reread"),
            "said_not_replicated": r.get("not_replicated"),
            "position": positions.get(p),
        }
        if got is not None and p in positions:
            s = score(got, positions[p], copies.get(p, []), truth[p])
            row.update(lost=s.lost, re_read=s.re_read, phantom=s.phantom)
        rows.append(row)
        why = []
        if got != r.get("planned"):
            why.append(f"readiness said offset {r.get('planned')}, the failover committed {got}")
        if row.get("lost"):
            why.append(f"{row['lost']} record(s) lost")
        if r.get("kind") == "exact" and row.get("re_read") != r.get("reread"):
            why.append(f"called exact with re-read {r.get('reread')}, re-read {row.get('re_read')}")
        if (
            r.get("kind") not in ("exact", "none")
            and r.get("reread") is not None
            and row.get("re_read") is not None
            and not near(r["reread"], row["re_read"])
        ):
            # a figure given for a row not exact is an estimate: within 10 % of the truth, or said unknown (None)
            why.append(f"estimated re-read {r['reread']}, re-read {row['re_read']}")
        if why:
            wrong.append({"partition": p, "why": "; ".join(why)})
    return {"ran": True, "partitions": rows, "wrong": wrong}


def render(r: Result) -> str:
    lines = [
        f"soak: {r.minutes:.1f} min, every {r.interval_s} s; phases: " + ", ".join(p["name"] for p in r.phases),
        "| DAG | " + " | ".join(("success", "failed", "other")) + " |",
        "|---|---:|---:|---:|",
    ]
    for dag_id, states in sorted(r.runs.items()):
        other = sum(v for k, v in states.items() if k not in ("success", "failed"))
        lines.append(f"| {dag_id} | {states.get('success', 0)} | {states.get('failed', 0)} | {other} |")
    lines += [
        f"failed runs: {len(r.failed_runs)} (unexpected {len(r.unexpected_failures)}, not told once "
        f"{len(r.not_told_once)}); faults not recovered from: {len(r.not_recovered)}; alerts: {len(r.alerts)} "
        f"(false {len(r.false_alerts)}); mails: {r.mails}; {'OK' if r.ok else 'NOT OK'}"
    ]
    lines += [f"  unexpected: {u['dag_id']} {u['run_id']}" for u in r.unexpected_failures]
    lines += [f"  false alert: {a['subject']}" for a in r.false_alerts]
    lines += [f"  not recovered: {n['dag_id']} after {n['fault']}" for n in r.not_recovered]
    lines += [f"  told {n['told']} times: {n['dag_id']} {n['run_id']}" for n in r.not_told_once]
    if r.final is not None:
        f = r.final
        lines.append(
            f"the truth at the end: {f.get('why') or ''}readiness {f.get('readiness_run')} against failover "
            f"{f.get('failover_run')} ({f.get('failover_state')}): {len(f.get('wrong') or [])} wrong"
        )
        lines += [
            "| partition | readiness said | committed | said re-read | re-read | lost | phantom |",
            "|---:|---|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {x['partition']} | {x['kind']} {x['said_planned']} | {x['committed']} | {x['said_reread']} | "
            f"{x.get('re_read')} | {x.get('lost')} | {x.get('phantom')} |"
            for x in f.get("partitions", [])
        ]
        lines += [f"  wrong: partition {w['partition']}: {w['why']}" for w in f.get("wrong", [])]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ the soak


class Traffic:
    """A consumer group reading ``topic`` on the source all the time (committing), and a producer writing to it while
    :attr:`busy` is set; both ride out a broker that goes away."""

    def __init__(self, bootstrap: str, topic: str, group: str, rate: float = 40.0):
        self.bootstrap, self.topic, self.group, self.rate = bootstrap, topic, group, rate
        self.busy = threading.Event()
        self.hold = threading.Event()  # the consumer closed while set (a broker restart)
        self.stop = threading.Event()
        self.produced = 0
        self.threads = [
            threading.Thread(target=f, daemon=True, name=f"soak-{f.__name__}") for f in (self._produce, self._consume)
        ]

    def start(self) -> "Traffic":
        for t in self.threads:
            t.start()
        return self

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def _produce(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 20, "log_level": 0})
        while not self.stop.is_set():
            if self.busy.is_set():
                with contextlib.suppress(BufferError):
                    p.produce(self.topic, value=f"soak-{self.produced}".encode(), key=str(self.produced % 7).encode())
                    self.produced += 1
                p.poll(0)
            time.sleep(1 / self.rate)
        p.flush(10)

    def _consume(self) -> None:
        from confluent_kafka import Consumer

        conf = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 1000,
            "log_level": 0,
        }
        c = None
        while not self.stop.is_set():
            if self.hold.is_set():
                if c is not None:
                    with contextlib.suppress(Exception):
                        c.close()
                    c = None
                time.sleep(0.5)
                continue
            if c is None:
                c = Consumer(conf)
                c.subscribe([self.topic])
            c.poll(0.5)
        if c is not None:
            with contextlib.suppress(Exception):
                c.close()


def restart_source(bed, log, tries: int = 5) -> None:
    """The source broker back on its port; a port still held (by a client's self-connection, or TIME_WAIT) is waited
    out a few times (the soak's first hour lost its source this way: "Address already in use")."""
    from testbed.bed import BedError

    for i in range(tries):
        try:
            bed.restart_source()
            return
        except BedError as e:
            if i == tries - 1:
                raise
            log(f"[soak]   the source broker did not start again ({str(e).splitlines()[0][:120]}): again in 10 s")
            time.sleep(10)


def sent_at(m) -> float:
    """When a mail was sent (its Date header), else now."""
    from email.utils import parsedate_to_datetime

    with contextlib.suppress(TypeError, ValueError):
        return parsedate_to_datetime(str(m["date"])).timestamp()
    return time.time()


def recovery(af, phases: list[Phase], interval: int, log) -> None:
    """A last quiet phase, until each DAG has a successful run started after the last fault ended (bounded: 10
    intervals and 5 minutes; past that the score says which DAG did not recover)."""
    ends = [p.end for p in phases if p.fault]
    if not ends:
        return
    p = Phase("quiet", time.time())
    phases.append(p)
    log(f"[soak] {time.strftime('%H:%M:%S')} phase quiet (recovery from the last fault)")

    def recovered() -> bool:
        return all(
            any(
                r["state"] == "success" and (_ts(r.get("start_date")) or 0) >= max(ends)
                for r in af.api("GET", f"/api/v2/dags/{d}/dagRuns?limit=1000")["dag_runs"]
            )
            for d in DAGS
        )

    with contextlib.suppress(AssertionError):
        af.wait(recovered, 10 * interval + 300, "each DAG's first success after the last fault", interval=5)
    p.end = time.time()


def final_failover(bed, af, topic: str, group: str, traffic: Traffic, interval: int, log, store_env: dict) -> dict:
    """The truth at the end: traffic stops (the group commits and leaves), the next readiness run that sees every
    record replicated is what readiness said just before; a failover of the group then runs (no approval), and its
    committed offsets are scored record by record against the source (:func:`said_vs_truth`). ``store_env``: the
    object store's credentials, to read readiness's answer where the DAGs wrote it."""
    from unittest import mock

    from mm2_failover.adapters.runfolder import RunFolder
    from mm2_failover.ui.runs import safe_name

    traffic.close()
    src, tgt = bed.client("source"), bed.client("target")
    replica = f"{bed.source_alias}.{topic}"
    stopped = time.time()
    log(
        f"[soak] {time.strftime('%H:%M:%S')} the truth at the end: traffic stopped, waiting for readiness to see "
        "every record replicated"
    )
    said: dict = {}

    def readiness_caught_up() -> bool:
        runs = af.api("GET", "/api/v2/dags/mm2_failover_readiness/dagRuns?limit=1000&order_by=-start_date")["dag_runs"]
        for r in runs:
            if r["state"] != "success" or (_ts(r.get("start_date")) or 0) < stopped:
                continue
            with mock.patch.dict(os.environ, store_env):
                rd = RunFolder(af.artifacts / "mm2_failover_readiness" / safe_name(r["dag_run_id"])).load_readiness()
            mine = [x for x in rd.partitions if x["group"] == group and x["topic"] == replica]
            if mine and all(x.get("not_replicated") == 0 for x in mine):
                said.update(run_id=r["dag_run_id"], rows=mine)
                return True
        return False

    af.wait(readiness_caught_up, 10 * interval + 600, "a readiness run that saw every record replicated", interval=5)
    run = af.api(
        "POST",
        "/api/v2/dags/mm2_failover/dagRuns",
        {
            "logical_date": None,
            "conf": {"groups_regex": f"^{group}$", "require_approval": False, "drain_quiet_seconds": 1},
        },
    )
    run_id = run["dag_run_id"]
    log(
        f"[soak]   readiness {said['run_id']} said {[(x['partition'], x['kind'], x['planned']) for x in said['rows']]};"
        f" failover {run_id} triggered"
    )
    af.wait(
        lambda: af.api("GET", f"/api/v2/dags/mm2_failover/dagRuns/{run_id}")["state"] in ("success", "failed"),
        1200,
        "the final failover to end",
        interval=5,
    )
    state = af.api("GET", f"/api/v2/dags/mm2_failover/dagRuns/{run_id}")["state"]
    tps = sorted(src.partitions([topic]))
    ends = src.offsets(tps)
    source = {
        tp: [(r.offset, r.value) for r in recs]
        for tp, recs in src.records({tp: (0, e) for tp, e in ends.items()}, timeout=120).items()
    }
    rtps = [(replica, p) for _t, p in tps]
    copies = {
        tp[1]: [(r.offset, r.value) for r in recs]
        for tp, recs in tgt.records({tp: (0, e) for tp, e in tgt.offsets(rtps).items()}, timeout=120).items()
    }
    positions = {p: o for (t, p), o in src.committed(group).items() if t == topic}
    committed = {p: o for (t, p), o in tgt.committed(group).items() if t == replica}
    out = said_vs_truth(said["rows"], committed, positions, copies, {p: truth_of(source[(topic, p)]) for _t, p in tps})
    out.update(readiness_run=said["run_id"], failover_run=run_id, failover_state=state)
    if state != "success":
        out["wrong"].append({"partition": -1, "why": f"the failover run ended {state}"})
    return out


def run_soak(
    bed,
    workdir: Path,
    minutes: float,
    interval: int,
    cycle: tuple[str, ...] = CYCLE,
    phase_intervals: float = 2.0,
    log=print,
    truth_at_end: bool = True,
) -> Result:
    """The soak on a started ``bed`` (its MM2 running; a Spark Connect server's connection in this process's
    environment as ``AIRFLOW_CONN_SPARK_CONNECT_DEFAULT``, or Spark's local route), in ``workdir``."""
    from mm2_failover.adapters import store
    from testbed.airflow_stack import AirflowStack
    from testbed.objectstore import ObjectStore
    from testbed.smtp import smtp_conn, smtp_server

    workdir.mkdir(parents=True, exist_ok=True)
    s3 = ObjectStore.start(workdir / "s3")
    smtp, inbox = smtp_server()
    af = AirflowStack(
        workdir / "airflow",
        store.as_path(s3.url("artifacts")),
        extra_env={
            "MM2_FAILOVER_INTERVAL_SECONDS": str(interval),
            **s3.env,
            "MM2_FAILOVER_LOCK": "kafka",  # the final failover's writer lock (an object store)
            "MM2_FAILOVER_NOTIFY_EMAIL": "oncall@example.com",
            "AIRFLOW_CONN_SMTP_DEFAULT": smtp_conn(smtp.port),
        },
    )
    topic, group = "soak-orders", "soak-app"
    bed.client("source").create_topic(topic, 3)
    traffic = Traffic(bed.source_bootstrap, topic, group).start()
    phases: list[Phase] = []
    received: list[tuple[float, str]] = []
    seen = 0
    t_start = time.time()
    try:
        af.boot_server_side_async()
        af.wait_server_side()
        af.start_scheduler(bed.source_bootstrap, bed.target_bootstrap)
        af.wait(
            lambda: af.api("GET", "/api/v2/monitor/health")["scheduler"]["status"] == "healthy",
            120,
            "a healthy scheduler",
        )
        af.token = af.login("admin")
        for dag_id in DAGS:
            af.wait(lambda d=dag_id: af.api("GET", f"/api/v2/dags/{d}"), 120, f"the dag-processor to register {dag_id}")
            af.api("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
        log(f"[soak] scheduler up, {', '.join(DAGS)} unpaused every {interval} s ({time.time() - t_start:.0f} s)")
        deadline = time.time() + minutes * 60  # the phases' time, from the scheduler's start
        i = 0
        while time.time() < deadline:
            name = cycle[i % len(cycle)]
            i += 1
            p = Phase(name, time.time())
            phases.append(p)
            log(f"[soak] {time.strftime('%H:%M:%S')} phase {name}")
            length = phase_intervals * interval
            if name == "busy":
                traffic.busy.set()
                time.sleep(length)
                traffic.busy.clear()
            elif name == "mm2_restarted":
                bed.stop_mm2()
                time.sleep(interval)
                bed.start_mm2()
            elif name == "broker_restarted":
                traffic.hold.set()  # the consumer lets go: a client reconnecting to a port with no listener can
                bed.stop_source()  # connect to itself (TCP simultaneous open) and hold the broker's port
                time.sleep(interval)
                restart_source(bed, log)
                traffic.hold.clear()
            elif name == "store_unreachable":
                s3.stop()
                time.sleep(1.5 * interval)
                s3 = ObjectStore.start(workdir / "s3", bucket=s3.bucket, port=s3.port)
            else:
                time.sleep(length)
            p.end = time.time()
            for _rcpt, m in inbox[seen:]:
                received.append((sent_at(m), str(m["subject"])))
                log(f"[soak]   mail: {m['subject']}")
            seen = len(inbox)
        recovery(af, phases, interval, log)
        # the runs queued until now end (the DAGs stay unpaused: Airflow's scheduler leaves a paused DAG's running
        # runs as they are, retries and all); the ones queued after this mark are not scored
        mark = time.time()

        def queued_before_mark() -> list[dict]:
            return [
                r
                for d in DAGS
                for r in af.api("GET", f"/api/v2/dags/{d}/dagRuns?limit=1000")["dag_runs"]
                if (_ts(r.get("queued_at")) or _ts(r.get("start_date")) or 0) < mark
            ]

        af.wait(
            lambda: all(r["state"] in ("success", "failed") for r in queued_before_mark()),
            10 * interval + 600,
            "the runs queued before the end to end",
            interval=5,
        )
        for _rcpt, m in inbox[seen:]:
            received.append((sent_at(m), str(m["subject"])))
        runs = {
            d: [
                r
                for r in af.api("GET", f"/api/v2/dags/{d}/dagRuns?limit=1000")["dag_runs"]
                if (_ts(r.get("queued_at")) or _ts(r.get("start_date")) or 0) < mark
            ]
            for d in DAGS
        }
        final = None
        if truth_at_end:
            try:
                final = final_failover(bed, af, topic, group, traffic, interval, log, s3.env)
            except Exception as e:  # noqa: BLE001 - the soak's own result stands; the end's check says why it did not run
                final = {
                    "ran": False,
                    "why": f"{type(e).__name__}: {e} - ",
                    "wrong": [{"partition": -1, "why": str(e)}],
                }
        for dag_id in DAGS:
            af.api("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": True})
    finally:
        traffic.close()
        af.stop()
        smtp.stop()
        s3.stop()
    result = Result(minutes=(time.time() - t_start) / 60, interval_s=interval, final=final)
    return score(result, phases, runs, received, interval, grace=60.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=60.0, help="how long the phases run (default 60)")
    ap.add_argument("--interval", type=int, default=60, help="the DAGs' interval in seconds (default 60)")
    ap.add_argument(
        "--cycle", default=",".join(CYCLE), help=f"the phases in order, repeated (default {','.join(CYCLE)})"
    )
    ap.add_argument("--phase-intervals", type=float, default=2.0, help="a quiet or busy phase's length in intervals")
    ap.add_argument("--workdir", type=Path, default=REPO / "var" / "soak" / time.strftime("%Y%m%d-%H%M%S"))
    ap.add_argument(
        "--out", type=Path, default=REPO / "bench" / "results" / f"soak-{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    a = ap.parse_args(argv)
    a.workdir = a.workdir.resolve()

    from testbed import localenv
    from testbed.bed import Bed, free_port
    from testbed.spark_connect import SparkConnectServer

    with Bed(run_dir=a.workdir / "bed") as bed, contextlib.ExitStack() as stack:
        server = SparkConnectServer.start(bed.run_dir / "spark-connect", free_port())
        stack.callback(server.stop)
        env = localenv.airflow_env(
            a.workdir / "airflow-cli", bed.source_bootstrap, bed.target_bootstrap, spark_conf=localenv.QUICK_JVM_CONF
        )
        env["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"] = localenv.spark_connect_conn(server.port)
        os.environ.update({k: v for k, v in env.items() if k.startswith(("AIRFLOW_CONN_", "SPARK", "MM2_FAILOVER"))})
        cycle = tuple(c.strip() for c in a.cycle.split(",") if c.strip())
        unknown = sorted(set(cycle) - {"quiet", "busy", *FAULTS})
        if unknown:
            ap.error(f"--cycle: unknown phase(s) {', '.join(unknown)} (quiet, busy, {', '.join(FAULTS)})")
        result = run_soak(bed, a.workdir, a.minutes, a.interval, cycle, a.phase_intervals)
    print(render(result))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_suffix(".tmp")
    tmp.write_text(
        json.dumps(
            {"command": "bench/soak.py " + " ".join(argv if argv is not None else sys.argv[1:]), **result.as_dict()},
            indent=2,
        )
    )
    os.replace(tmp, a.out)
    print(f"result: {a.out}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
