"""Knowing it is safe to fail over, on real brokers and real MM2: producers still writing, MM2 stopped with
unreplicated records, and the source cluster lost (disaster mode)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from mm2_failover.adapters.config import artifacts_root, run_dir
from testbed import localenv, scenario

pytestmark = [pytest.mark.bed, pytest.mark.spark, pytest.mark.airflow]


def test_sensor_waits_while_producers_write_then_succeeds(bed, target, names, capfd):
    g, topic = names["group"], names["topic"]
    prep = scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        group=g,
        topic=topic,
        partitions=1,
        produced=30,
        consumed_upto={0: 30},
    )
    t0 = time.time()

    def a_poke_saw_writes() -> bool:  # this run's drain.json says "not drained" (the sensor poked while we wrote)
        for f in artifacts_root().glob("mm2_failover/*/drain.json"):
            try:
                if f.stat().st_mtime >= t0 and not json.loads(f.read_text()).get("drained"):
                    return True
            except (OSError, ValueError):
                pass
        return False

    # produce until a poke has seen the source move (the audit task runs first), 60 s at most
    with scenario.producing(bed.source_bootstrap, topic, 30, until=a_poke_saw_writes):
        dr = localenv.run_dag("mm2_failover", {"groups_regex": g, "drain_quiet_seconds": 2, "dry_run": True})
    out = capfd.readouterr().out
    assert "producers still writing" in out  # a poke saw the source end offset move...
    assert dr.state == "success"  # ...and a later one found everything drained
    drained = json.loads((run_dir("mm2_failover", dr.run_id) / "drain.json").read_text())
    assert drained["drained"] and not drained["disaster"]
    row = drained["rows"][0]
    assert row["topic"] == topic and row["replicated"] + 1 == row["source_end"] == row["replica_end"]
    assert prep.replica_topic == row["replica_topic"]


def test_detect_with_a_mistyped_source_stops_the_run_and_says_how_to_declare_the_source_lost(bed, names, tmp_path):
    """Issue 33: ``source_reachable=detect`` used to enter disaster mode when the source never answered - with a
    mistyped source bootstrap it planned on without any source-side gate. A silent source now stops the run at its
    start (exit 4, nothing planned): disaster mode is the operator's call, said with --source-reachable no."""
    from testbed.bed import free_port

    typo = f"127.0.0.1:{free_port()}"  # nothing listens there
    g = names["group"]
    scenario.prepare(
        bed.source_bootstrap,
        bed.target_bootstrap,
        group=g,
        topic=names["topic"],
        partitions=1,
        produced=10,
        consumed_upto={0: 10},
    )
    r = localenv.run_cli(
        "--source-bootstrap",
        typo,
        "--target-bootstrap",
        bed.target_bootstrap,
        "--timeout",
        "3",
        "plan",
        "--groups-regex",
        g,
        "--run-dir",
        str(tmp_path / "run"),
        timeout=180,
    )
    assert r.returncode == 4, (r.returncode, r.stderr[-3000:])
    assert typo in r.stderr and "never enters disaster mode by itself" in r.stderr, r.stderr[-3000:]
    assert "--source-reachable no" in r.stderr
    assert "DISASTER MODE" not in r.stderr
    assert not (tmp_path / "run" / "plan.json").exists()


@pytest.fixture(scope="module")
def own_bed(bed, run_root):
    """A bed of its own: these tests stop MM2 and then the source broker."""
    from testbed.bed import Bed

    b = Bed(run_dir=run_root / "bed-disaster")
    with b:
        yield b


@pytest.fixture
def on_own_bed(own_bed, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_SOURCE", localenv.kafka_conn(own_bed.source_bootstrap))
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_TARGET", localenv.kafka_conn(own_bed.target_bootstrap))
    return own_bed


def test_target_broker_killed_mid_apply_then_restarted_the_retry_moves_the_rest(on_own_bed):
    """Fault drill 1 (issue 18): the target broker SIGKILLed while the CLI's apply commits group by group (one
    request at a time, a pause after each: fault point ``alter.after_group``), after the first group was written;
    the run fails; the broker is restarted; the retry moves the other groups, leaves the first as it is, keeps the
    backup of the state before the run, and reads every planned group back at its planned offsets."""
    import os
    import subprocess
    import sys

    b = on_own_bed
    target = b.client("target")
    groups = ["brk-a", "brk-b", "brk-c"]
    prep = scenario.prepare(
        b.source_bootstrap,
        b.target_bootstrap,
        group=groups[0],
        topic="brk",
        partitions=2,
        produced=30,
        consumed_upto={0: 30, 1: 12},
    )
    for g in groups[1:]:
        scenario.consume_and_commit(b.source_bootstrap, g, "brk", {0: 20, 1: 5})
    scenario.wait_checkpointed_groups(target, b.checkpoints_topic, {g: (prep.replica_topic, 2) for g in groups[1:]})
    run = b.run_dir / "killed-broker-run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_KAFKA_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "plugins")
    cmd = [
        sys.executable,
        "-m",
        "mm2_failover",
        "--source-bootstrap",
        b.source_bootstrap,
        "--target-bootstrap",
        b.target_bootstrap,
        "--timeout",
        "8",
        "apply",
        "--execute",
        "--run-dir",
        str(run),
        "--groups-regex",
        "brk-.*",
        "--drain-quiet-seconds",
        "1",
        "--translation",
        "checkpoint",
        "--apply-concurrency",
        "1",
    ]
    log = run.parent / "killed-broker-run.log"
    with open(log, "wb") as out:
        p = subprocess.Popen(
            cmd, env={**env, "MM2_FAILOVER_FAULT": "sleep12@alter.after_group"}, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 240
        while not target.committed(groups[0]):  # the first group written; the apply pauses after it
            assert p.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        b.kill_target()
        # the run fails on its next request, with the documented exit code (4: the cluster did not answer), not a crash
        assert p.wait(120) == 4, log.read_text()[-3000:]
    finally:
        if p.poll() is None:
            p.kill()
        b.restart_target()
    target = b.client("target")
    assert not target.committed(groups[1]) and not target.committed(groups[2])
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)  # the retry
    assert r.returncode == 0, r.stderr[-3000:]
    planned: dict = {}
    for line in (run / "plan.csv").read_text().splitlines():
        g, t, part, o = line.split(",")
        planned.setdefault(g, {})[(t, int(part))] = int(o)
    assert sorted(planned) == groups
    assert {g: target.committed(g) for g in groups} == planned
    backup = json.loads((run / "backup.json").read_text())
    assert sorted(backup["groups"]) == groups  # taken once, before the first write: nothing was committed then
    report = json.loads((run / "report.json").read_text())
    assert report["outcome"] == "succeeded" and report["totals"]["committed"] == 6


READER = """
import json, os, sys, time
from mm2_failover.adapters.kafka.cluster import Cluster
boot, stop_file, groups = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
reads = fails = 0
while not os.path.exists(stop_file):
    try:
        last = Cluster({"bootstrap.servers": boot}, "target", timeout=3).commits_many(groups)
        reads += 1
    except Exception:  # noqa: BLE001 - the broker is down for a while: a clear error, then the next try
        fails += 1
    time.sleep(0.01)
last = Cluster({"bootstrap.servers": boot}, "target", timeout=30).commits_many(groups)
print(json.dumps({"reads": reads, "fails": fails, "last": {g: sorted([t, p, c.offset] for (t, p), c in cs.items())
                                                            for g, cs in last.items()}}))
"""


def _tail(stderr: Path) -> str:
    """The end of a reader's stderr without librdkafka's connection-refused lines (the broker is down meanwhile)."""
    return "\n".join(ln for ln in stderr.read_text().splitlines() if "Connection refused" not in ln)[-2000:]


def test_commit_reads_while_the_target_broker_restarts_never_take_the_process_down(on_own_bed, tmp_path):
    """A CI run died of SIGSEGV here: the test process read a group's commits just after the target broker came back.
    librdkafka's admin ListConsumerGroupOffsets dereferences a NULL consumer-group object when the answer is
    NOT_COORDINATOR (librdkafka#5040), and under a flapping broker its coordinator requests also abort on an
    assertion. Commits are read through consumer handles now: a reader that reads three groups' commits without
    pause while the target broker is SIGKILLed and restarted, twice, stays up and ends with the right commits."""
    import os
    import subprocess
    import sys

    b = on_own_bed
    target = b.client("target", 30)
    target.create_topic("flap", 2)
    groups = {f"flap-{i}": {("flap", 0): 3 + i, ("flap", 1): 7 + i} for i in range(3)}
    deadline = time.monotonic() + 60
    while any(target.alter_many(groups).values()):  # a new coordinator may still be loading
        assert time.monotonic() < deadline
        time.sleep(1)
    del target
    stop = tmp_path / "stop"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(Path(__file__).resolve().parents[2] / d) for d in ("plugins", ".")),
    }
    err = tmp_path / "reader.err"  # a file, not a pipe: the reader's log lines must never make it wait
    with open(err, "wb") as err_out:
        reader = subprocess.Popen(
            [sys.executable, "-c", READER, b.target_bootstrap, str(stop), ",".join(groups)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=err_out,
            text=True,
        )
    try:
        for _ in range(2):
            time.sleep(2)
            b.kill_target()
            time.sleep(1)
            b.restart_target()
            time.sleep(6)  # the coordinator loads __consumer_offsets while the reader keeps asking
            assert reader.poll() is None, f"the reader died (exit {reader.returncode}): {_tail(err)}"
        stop.touch()
        out, _ = reader.communicate(timeout=120)
    finally:
        if reader.poll() is None:
            reader.kill()
    assert reader.returncode == 0, f"the reader died (exit {reader.returncode}): {_tail(err)}"
    res = json.loads(out.strip().splitlines()[-1])
    assert res["reads"] > 0 and res["last"] == {
        g: sorted([t, p, o] for (t, p), o in c.items()) for g, c in groups.items()
    }, res


def test_mm2_stopped_with_unreplicated_records_times_out_naming_the_partitions_and_passes_once_restarted(
    on_own_bed, capfd, monkeypatch, tmp_path
):
    """The failover's drain check while MM2 is stopped, and (issue 33 item 1) what the readiness check says then, once
    the archive DAG has failed: the records not replicated and their age on the Readiness page, and one message to
    on-call naming what got worse."""
    from testbed.smtp import smtp_conn, smtp_server

    b = on_own_bed
    smtp, mails = smtp_server()
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", smtp_conn(smtp.port))
    monkeypatch.setenv("MM2_FAILOVER_NOTIFY_EMAIL", "oncall@example.com")
    monkeypatch.setenv("MM2_FAILOVER_ARCHIVE", str(tmp_path / "archive"))  # one no archive run has written yet
    try:
        _mm2_stopped(b, capfd, mails)
    finally:
        smtp.stop()


PREPARED: set[str] = set()  # the scenarios this module's bed holds: its tests share it, one run alone makes its own


def _lost_app(b) -> None:
    """``lost-app`` on ``payments`` (2 partitions): 40 records replicated, consumed up to 40 and 20, then MM2
    stopped and 15 more records produced, never replicated. Made once per bed, with the source and MM2 started
    again when an earlier test stopped them."""
    if "lost-app" in PREPARED:
        return
    if not (b.source.process and b.source.process.alive):
        b.restart_source()
    if not (b.mm2 and b.mm2.alive):
        b.start_mm2()
    scenario.prepare(
        b.source_bootstrap,
        b.target_bootstrap,
        group="lost-app",
        topic="payments",
        partitions=2,
        produced=40,
        consumed_upto={0: 40, 1: 20},
    )
    b.stop_mm2()
    scenario.produce(b.source_bootstrap, "payments", 2, 15, start=40)  # never replicated
    PREPARED.add("lost-app")


def _mm2_stopped(b, capfd, mails):
    _lost_app(b)
    dr = localenv.run_dag(
        "mm2_failover", {"groups_regex": "lost-app", "drain_quiet_seconds": 1, "drain_timeout_seconds": 12}
    )
    assert dr.state == "failed"
    states = localenv.task_states("mm2_failover", dr.run_id)
    assert states["verify_producers_drained"] == "failed"
    out = capfd.readouterr().out
    assert "Not drained" in out and "replication behind" in out
    drained = json.loads((run_dir("mm2_failover", dr.run_id) / "drain.json").read_text())
    rows = {r["partition"]: r for r in drained["rows"]}
    assert {p: (r["source_end"], r["replica_end"], r["state"]) for p, r in rows.items()} == {
        0: (55, 40, "replication behind"),
        1: (55, 40, "replication behind"),
    }
    assert all(r["replicated"] == 39 for r in rows.values())  # MM2's own progress record
    readiness_while_mm2_is_stopped(b, mails)

    # fault drill 5 (issue 18): MM2 comes back while the sensor waits; it catches up and the sensor passes
    # (started from a thread that lives as long as the DAG run: the bed ties its processes to the starting
    # thread with PR_SET_PDEATHSIG, so MM2 started by a short-lived timer thread would be stopped at once)
    done = threading.Event()

    def restart_mm2_while_the_sensor_waits() -> None:
        time.sleep(4.0)
        b.start_mm2()
        done.wait()

    restarter = threading.Thread(target=restart_mm2_while_the_sensor_waits)
    restarter.start()
    try:
        dr = localenv.run_dag(
            "mm2_failover",
            {"groups_regex": "lost-app", "drain_quiet_seconds": 1, "drain_timeout_seconds": 150, "dry_run": True},
        )
    finally:
        done.set()
        restarter.join()
        b.stop_mm2()  # its thread ended: stop it in order and start it again from this one for the next test
        b.start_mm2()
    assert dr.state == "success", localenv.task_states("mm2_failover", dr.run_id)
    out = capfd.readouterr().out
    assert "replication behind" in out  # a poke saw MM2 behind before it caught up
    drained = json.loads((run_dir("mm2_failover", dr.run_id) / "drain.json").read_text())
    assert drained["drained"] and not drained["disaster"]
    assert {r["partition"]: (r["source_end"], r["replica_end"]) for r in drained["rows"]} == {0: (55, 55), 1: (55, 55)}


def readiness_while_mm2_is_stopped(b, mails) -> None:
    """The archive DAG fails (an alias whose offset-sync topic does not exist: told to on-call as any final failure),
    then one readiness interval: 15 records per partition not replicated, the oldest older than the 5 s RPO, each
    partition's answer the plan's own; the page shows it; one message says what is wrong (the first interval has
    nothing to compare with: everything wrong is news)."""
    from fastapi.testclient import TestClient

    from mm2_failover.adapters.runfolder import RunFolder
    from mm2_failover.rules import readiness
    from mm2_failover.ui.app import create_app

    def new_mails(n: int) -> list:
        deadline = time.monotonic() + 20
        while len(mails) < seen + n and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(mails) == seen + n, [m["Subject"] for _, m in mails[seen:]]
        return [m for _, m in mails[seen:]]

    seen = len(mails)  # the failover run before failed: told too
    dr = localenv.run_dag("mm2_sync_archive", {"mm2_target_alias": "nosuch"})
    assert dr.state == "failed"
    (failed,) = new_mails(1)
    assert "mm2_sync_archive" in failed["Subject"] and "archive_offset_syncs FAILED" in failed["Subject"]
    seen = len(mails)
    rd = localenv.run_dag(
        "mm2_failover_readiness", {"groups_regex": "lost-app", "drain_quiet_seconds": 1, "rpo_seconds": 5}
    )
    assert rd.state == "success", localenv.task_states("mm2_failover_readiness", rd.run_id)
    folder = RunFolder(run_dir("mm2_failover_readiness", rd.run_id))
    r = folder.load_readiness()
    (g,) = r.groups
    assert (g["group"], g["partitions"], g["not_replicated"]) == ("lost-app", 2, 30)
    assert g["exposure_seconds"] > 5 and r.summary["groups_over_rpo"] == 1
    plan = {(x["topic"], x["partition"]): readiness.kind_of(x) for x in folder.load_plan().plan.as_dicts()}
    assert {(p["topic"], p["partition"]): p["kind"] for p in r.partitions} == plan  # the plan's own answers
    assert r.archive["primary"]["updated_at"] is None  # mm2_sync_archive never succeeded here
    (told,) = new_mails(1)
    assert told["Subject"].startswith("[mm2-failover] readiness degraded: ")
    text = told.get_body(("plain", "html")).get_content()
    assert "lost-app" in text and "rpo_seconds=5" in text and "mm2_sync_archive has never succeeded" in text
    page = TestClient(create_app(artifacts_root())).get("/readiness").text
    assert "lost-app" in page and "would lose more than the RPO (5 s)" in page and rd.run_id in page


def test_records_never_replicated_and_gone_from_the_source_refuse_the_run_at_once(on_own_bed, tmp_path):
    """Issue 31 item 5: MM2 stopped after copying 40 records of a partition; 15 more produced, then retention
    (DeleteRecords) moved the source's log start to 50: offsets 40-49 were never replicated and are gone. The check
    after MM2's progress read from 40 - below the log start - and librdkafka's default reset made it read nothing:
    "drained". Now the drain refuses at once (exit 5), naming how many, and says what would move the groups anyway."""
    import os
    import subprocess
    import sys

    b = on_own_bed
    source = b.client("source")
    scenario.prepare(
        b.source_bootstrap,
        b.target_bootstrap,
        group="gone-app",
        topic="gone",
        partitions=1,
        produced=40,
        consumed_upto={0: 40},
    )
    time.sleep(3)  # MM2 flushes its progress every second on the bed
    b.stop_mm2()
    try:
        scenario.produce(b.source_bootstrap, "gone", 1, 15, start=40)  # never replicated
        source.delete_records({("gone", 0): 50})
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(str(Path(__file__).resolve().parents[2] / d) for d in ("plugins", ".")),
        }
        t0 = time.monotonic()
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "mm2_failover",
                "--source-bootstrap",
                b.source_bootstrap,
                "--target-bootstrap",
                b.target_bootstrap,
                "drain",
                "--run-dir",
                str(tmp_path / "run"),
                "--groups-regex",
                "gone-app",
                "--drain-quiet-seconds",
                "1",
                "--drain-timeout-seconds",
                "300",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert r.returncode == 5, (r.returncode, r.stderr[-3000:])
        assert "10 record offset(s) were never replicated and are gone from the source" in r.stderr
        assert "gone[0]" in r.stderr and "source_reachable=no" in r.stderr
        assert time.monotonic() - t0 < 90
        drained = json.loads((tmp_path / "run" / "drain.json").read_text())
        assert [row["state"] for row in drained["rows"]] == ["never replicated and gone from the source"]
    finally:
        b.start_mm2()


def test_without_mm2_progress_a_replica_longer_than_the_source_is_not_drained_until_the_last_record_is_copied(
    bed, names, tmp_path
):
    """Issue 50 item 2 on real brokers: a flow of this test's own (alias ``np<tag>``: its checkpoints topic, its
    replica topic, no MM2 progress topic - as MM2 on a Connect cluster keeps it in the worker's offset.storage.topic)
    whose copies the test writes as MM2 does (key, value, timestamp, headers). The source holds 0..109; 0..89 were
    copied, then 60..89 again (a restart's re-copies): replica end 120 > source end 110 while 90..109 exist only on
    the source. The old fallback said "drained (replica end == source end)". Now the source's last record is looked
    up on the replica: not there, "replication behind"; once the rest is copied, drained."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from mm2_failover.rules import drain as drainmod
    from mm2_failover.stages.drain_check import drain_status

    alias, topic, group = f"np{names['group'][-6:]}", names["topic"], names["group"]
    replica = f"{alias}.{topic}"
    source, target = bed.client("source"), bed.client("target")
    source.create_topic(topic, 1)
    target.create_topic(replica, 1)
    target.create_topic(f"{alias}.checkpoints.internal", 1)
    scenario.produce(bed.source_bootstrap, topic, 1, 110)
    c = Consumer({"bootstrap.servers": bed.source_bootstrap, "group.id": group, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    records = []
    while len(records) < 110:
        records += [m for m in c.consume(110, timeout=10) if not m.error()]
    c.commit(offsets=[TopicPartition(topic, 0, 95)], asynchronous=False)  # the group, at 95 on the source
    c.close()
    p = Producer({"bootstrap.servers": bed.target_bootstrap, "acks": "all"})

    def copy(recs) -> None:
        for m in recs:
            p.produce(replica, m.value(), m.key(), 0, timestamp=m.timestamp()[1], headers=m.headers())
        p.flush(10)

    copy(records[:90] + records[60:90])
    ctx = bed.run_context(tmp_path / "run", source_alias=alias, groups_regex=group)
    v = drain_status(ctx)
    (row,) = v.rows
    assert (row["source_end"], row["replica_end"], row["replicated"]) == (110, 120, None), row
    assert not v.drained and row["state"] == drainmod.BEHIND and "offset 109" in row["why"], row
    assert any(f"mm2-offsets.{alias}.internal not found" in n for n in v.notes), v.notes
    copy(records[90:])  # the rest, as MM2 would once back
    v = drain_status(ctx)
    assert v.drained and v.rows[0]["state"] == drainmod.PROGRESS_UNKNOWN, v.table()


def test_source_lost_mid_run_fails_the_run_and_an_explicit_disaster_re_trigger_completes(on_own_bed, capfd):
    """Fault drill 6 (issue 18): the run decided at its drain check that the source is reachable; the source broker is
    then stopped (a real process, mid-run, while the Spark job runs). The run fails at the next gate that needs the
    source - it never switches to disaster mode by itself; re-triggered with ``source_reachable=no`` it completes in
    disaster mode and reports the loss window."""
    b = on_own_bed
    g = "mid-app"
    scenario.prepare(
        b.source_bootstrap,
        b.target_bootstrap,
        group=g,
        topic="midrun",
        partitions=1,
        produced=20,
        consumed_upto={0: 12},
    )
    t0 = time.time()
    stopped = threading.Event()

    def stop_the_source_once_drained() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not stopped.is_set():
            for f in artifacts_root().glob("mm2_failover/*/drain.json"):
                try:
                    if f.stat().st_mtime >= t0 and json.loads(f.read_text()).get("drained"):
                        b.stop_source()
                        stopped.set()
                        return
                except (OSError, ValueError):
                    pass
            time.sleep(0.2)

    watcher = threading.Thread(target=stop_the_source_once_drained)
    watcher.start()
    try:
        dr = localenv.run_dag("mm2_failover", {"groups_regex": g, "drain_quiet_seconds": 1})
    finally:
        stopped.set()
        watcher.join()
    out = capfd.readouterr().out
    states = localenv.task_states("mm2_failover", dr.run_id)
    assert dr.state == "failed" and states["verify_producers_drained"] == "success", states
    assert states["apply_group_offsets"] != "success"
    assert "DISASTER MODE" not in out and "source primary" in out
    art = run_dir("mm2_failover", dr.run_id)
    from mm2_failover.adapters.runfolder import RunFolder
    from mm2_failover.stages.context import REACHABILITY

    assert RunFolder(art).decision(REACHABILITY)["aliases"]["primary"]["decision"] == "reachable"  # never downgraded
    target = b.client("target")
    assert target.committed(g) == {}  # nothing written

    dr = localenv.run_dag("mm2_failover", {"groups_regex": g, "drain_quiet_seconds": 1, "source_reachable": "no"})
    assert dr.state == "success", localenv.task_states("mm2_failover", dr.run_id)
    report = json.loads((run_dir("mm2_failover", dr.run_id) / "report.json").read_text())
    assert any(w.startswith("DISASTER MODE") for w in report["warnings"])
    assert report["rpo"]["seconds_since_newest_replicated_record"] is not None
    committed = target.committed(g)
    assert set(committed) == {("primary.midrun", 0)} and committed[("primary.midrun", 0)] <= 12  # nothing skipped


def test_source_lost_disaster_mode_completes_with_warning_and_loss_window(on_own_bed, capfd):
    """The source is gone. With the default ``source_reachable=detect`` disaster mode is never entered by itself
    (issue 33): a dry run plans in disaster mode *unconfirmed* and says so, nothing written (a run that writes would
    wait for a human's approval that asks whether the source is really lost: tests/e2e/test_ui.py); declared lost
    (``source_reachable=no``) the run completes in disaster mode, with the warning and the data-loss window."""
    b = on_own_bed
    target = b.client("target")
    _lost_app(b)  # this module's earlier test made it; run alone, this test does
    b.stop_source()
    dr = localenv.run_dag(
        "mm2_failover",
        {"groups_regex": "lost-app", "drain_quiet_seconds": 1, "drain_timeout_seconds": 60, "dry_run": True},
    )
    states = localenv.task_states("mm2_failover", dr.run_id)
    assert dr.state == "success" and states["approve_plan"] == "skipped", states
    report = json.loads((run_dir("mm2_failover", dr.run_id) / "report.json").read_text())
    assert report["outcome"] == "dry_run"
    assert any(w.startswith("DISASTER MODE NOT CONFIRMED for source alias(es) primary") for w in report["warnings"])
    assert target.committed("lost-app") == {}  # nothing written
    capfd.readouterr()

    dr = localenv.run_dag(
        "mm2_failover",
        {"groups_regex": "lost-app", "drain_quiet_seconds": 1, "drain_timeout_seconds": 60, "source_reachable": "no"},
    )
    assert dr.state == "success"
    out = capfd.readouterr().out
    assert "DISASTER MODE" in out
    art = run_dir("mm2_failover", dr.run_id)
    report = json.loads((art / "report.json").read_text())
    assert any(w.startswith("DISASTER MODE") for w in report["warnings"])
    assert not any("{" in w for w in report["warnings"]), report["warnings"]  # the window in words, not a dict
    assert report["rpo"]["seconds_since_newest_replicated_record"] is not None
    assert report["rpo"]["seconds_since_newest_replicated_record"] >= 0
    snap = json.loads((art / "snapshot.json").read_text())
    # nothing read from the lost source; no scheduled archive ran here, so no reading of the groups' commits either
    assert snap["sources"]["primary"] == {
        "alias": "primary",
        "reachable": False,
        "end_offsets": None,
        "group_commits": None,
        "archived_commits": None,
        "archived_read": None,
    }
    assert snap["disaster_aliases"] == ["primary"]
    committed = target.committed("lost-app")
    assert set(committed) == {("primary.payments", 0), ("primary.payments", 1)}
    assert all(o <= 40 for o in committed.values())  # never past what was replicated and consumed
