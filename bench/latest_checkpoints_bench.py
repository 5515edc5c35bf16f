"""Benchmark: the latest-checkpoints Spark job against Kafka's own offset translation, on real brokers.

For each size (G groups x P partitions x U updates = G*P*U checkpoint records) the bench

1. starts a fresh bed (two real Kafka 4.3.1 KRaft brokers, no MirrorMaker 2: only the target is used),
   creates ``primary.checkpoints.internal`` (1 partition, compacted like MM2's, but compaction held off with a
   huge ``min.compaction.lag.ms`` so every record stays) and writes the records with
   :func:`mm2_failover.rules.checkpoints.encode_key`/``encode_value``, in MM2's order (U rounds over every key);
2. runs the Spark job (``spark_jobs/latest_checkpoints.py``) with ``spark-submit`` - wall time, the job's own
   processing time (the summary's ``seconds``: time inside ``run()``), the rest = JVM/Spark start and stop - and
   samples the driver JVM's peak RSS (``VmHWM`` in ``/proc/<pid>/status``);
3. runs the baselines in ``bench/jvm/TranslateBench.java`` (real Kafka client code from ``.cache/jars/kafka``):
   ``per-group`` = ``RemoteClusterUtils.translateOffsets(props, alias, group, timeout)`` for a sample of groups,
   extrapolated to all G groups; ``batch`` = the KIP-1239 overload ``translateOffsets(props, alias, Pattern,
   timeout)``; ``consumer`` = a plain tuned ``KafkaConsumer`` decoding every record;
4. checks every answer: ours against the generator's expected offsets for every key, each baseline against
   ours for the sampled groups (and, for batch/consumer, a count + checksum over every key);
5. prints a table and writes everything to ``bench/results/<timestamp>.json``.

    PYTHONPATH=plugins:. .venv/bin/python bench/latest_checkpoints_bench.py --groups 1000 --partitions 10 --updates 10
    ... --sizes 1000,10000 --min-partitions 0,2,4 --master 'local[2]' --out bench/results/run.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins"))
sys.path.insert(0, str(REPO))

from mm2_failover.adapters.spark import spark_submit_cmd  # noqa: E402
from mm2_failover.rules import checkpoints as cpf  # noqa: E402
from testbed.bed import Bed  # noqa: E402

ALIAS = "primary"
TOPIC = f"{ALIAS}.checkpoints.internal"
JAVA_SRC = REPO / "bench" / "jvm" / "TranslateBench.java"
DEFAULT_JOB = REPO / "spark_jobs" / "latest_checkpoints.py"  # the package's job (mm2_failover.jobs), entry point
REPLICA_TOPICS = 8


# ---------------------------------------------------------------------------------------------- data


def group_name(g: int) -> str:
    return f"bench-group-{g:06d}"


def replica_topic(g: int) -> str:
    return f"{ALIAS}.orders-{g % REPLICA_TOPICS}"


def downstream(g: int, p: int, u: int) -> int:
    """The downstream offset of update u for (group g, partition p): grows with u, differs between keys."""
    return (u + 1) * 1000 + (g * 7 + p * 13) % 997


def expected(g: int, p: int, updates: int) -> int:
    return downstream(g, p, updates - 1)


def in_tail(g: int, p: int, partitions: int, tail_pct: float) -> bool:
    """Whether key (g, p) is among the keys updated since the last refresh (every (100/tail_pct)-th key)."""
    step = max(1, round(100 / tail_pct))
    return (g * partitions + p) % step == 0


def expected_after(g: int, p: int, partitions: int, updates: int, tail_pct: float) -> int:
    """The expected answer once the tail was written (update ``updates`` for the tail's keys)."""
    return downstream(g, p, updates if tail_pct and in_tail(g, p, partitions, tail_pct) else updates - 1)


def write_tail(bootstrap: str, groups: int, partitions: int, updates: int, tail_pct: float) -> dict:
    """One more checkpoint (update number ``updates``) for ``tail_pct`` % of the keys: what MM2 writes between the
    last refresh and the disaster."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    t0 = time.monotonic()
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "acks": 1,
            "enable.idempotence": False,
            "queue.buffering.max.messages": 2_000_000,
        }
    )
    n = 0
    for g in range(groups):
        for p in range(partitions):
            if in_tail(g, p, partitions, tail_pct):
                d = downstream(g, p, updates)
                while True:
                    try:
                        producer.produce(
                            TOPIC, cpf.encode_value(d + 3, d), cpf.encode_key(group_name(g), replica_topic(g), p), 0
                        )
                        break
                    except BufferError:
                        producer.poll(0.05)
                n += 1
    if producer.flush(120):
        raise RuntimeError("tail records not delivered")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks", "enable.auto.commit": False})
    _, hi = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
    c.close()
    return {"records": n, "end_offset": hi, "write_s": round(time.monotonic() - t0, 3)}


def write_checkpoints(bootstrap: str, groups: int, partitions: int, updates: int, compression: str) -> dict:
    """Create the checkpoints topic and write G*P*U records; returns timings and the end offset."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from mm2_failover.adapters.kafka.cluster import Cluster

    cluster = Cluster({"bootstrap.servers": bootstrap}, "target", timeout=30)
    # like MM2's topic (compacted), but no compaction while the bench runs: every record stays readable
    cluster.create_topic(
        TOPIC,
        1,
        {"cleanup.policy": "compact", "min.compaction.lag.ms": str(365 * 86400_000), "segment.bytes": str(1 << 30)},
    )
    t0 = time.monotonic()
    keys = [cpf.encode_key(group_name(g), replica_topic(g), p) for g in range(groups) for p in range(partitions)]
    mods = [(g * 7 + p * 13) % 997 for g in range(groups) for p in range(partitions)]
    # value of update u for a key whose (g*7 + p*13) % 997 is r: downstream (u+1)*1000 + r, upstream 3 more
    values = [
        [cpf.encode_value((u + 1) * 1000 + r + 3, (u + 1) * 1000 + r) for r in range(997)] for u in range(updates)
    ]
    encode_s = time.monotonic() - t0
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "batch.num.messages": 1_000_000,
            "compression.type": compression,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
            "acks": 1,
            "enable.idempotence": False,
        }
    )
    produce = producer.produce
    t1 = time.monotonic()
    n = 0
    for u in range(updates):
        vals = values[u]
        for k, m in zip(keys, mods):
            while True:
                try:
                    produce(TOPIC, vals[m], k, 0)
                    break
                except BufferError:
                    producer.poll(0.05)
            n += 1
            if not n % 200_000:
                producer.poll(0)
    left = producer.flush(300)
    produce_s = time.monotonic() - t1
    if left:
        raise RuntimeError(f"{left} records not delivered")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks", "enable.auto.commit": False})
    lo, hi = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
    c.close()
    if hi - lo != n:
        raise RuntimeError(f"topic holds {hi - lo} records, wrote {n}")
    return {
        "records": n,
        "end_offset": hi,
        "encode_s": round(encode_s, 3),
        "produce_s": round(produce_s, 3),
        "write_s": round(encode_s + produce_s, 3),
        "compression": compression,
    }


# ---------------------------------------------------------------------------------------------- Spark


def proc_status(pid: int) -> dict[str, int]:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmHWM:", "VmRSS:")):
                    k, v = line.split(":", 1)
                    out[k] = int(v.split()[0])  # kB
    except OSError:
        pass
    return out


def is_java(pid: int) -> bool:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("java")
    except OSError:
        return False


def children(pid: int) -> list[int]:
    """Child processes started by any thread of ``pid`` (a JVM starts them from worker threads)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


class RssSampler(threading.Thread):
    """Peak VmHWM of the spark-submit driver JVM (spark-submit execs into it) and of its Python child; with a
    standalone cluster also of the executor JVM(s) the worker (``worker_pid``) starts for the application."""

    def __init__(self, pid: int, every: float = 0.1, worker_pid: int | None = None):
        super().__init__(daemon=True)
        self.pid, self.every, self.worker_pid = pid, every, worker_pid
        self.java_hwm_kb = 0
        self.python_hwm_kb = 0
        self.executor_hwm_kb = 0
        self.stop_flag = threading.Event()

    def run(self) -> None:
        while not self.stop_flag.is_set():
            if is_java(self.pid):
                st = proc_status(self.pid)
                self.java_hwm_kb = max(self.java_hwm_kb, st.get("VmHWM", 0))
                for c in children(self.pid):
                    if not is_java(c):
                        self.python_hwm_kb = max(self.python_hwm_kb, proc_status(c).get("VmHWM", 0))
            if self.worker_pid:
                for c in children(self.worker_pid):
                    if is_java(c):
                        self.executor_hwm_kb = max(self.executor_hwm_kb, proc_status(c).get("VmHWM", 0))
            self.stop_flag.wait(self.every)


def wait_with_cpu(p: subprocess.Popen) -> tuple[int, float]:
    """Wait for the child; return its exit code and the CPU seconds (user + system) of it and its descendants."""
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, ru.ru_utime + ru.ru_stime


def spark_job_times(log_path: Path) -> list[dict]:
    """Spark's own 'Job N finished: <call site>, took X ms' lines: where the job's time goes."""
    import re

    out = []
    for m in re.finditer(r"Job (\d+) finished: (.*?), took ([\d.]+) ms", log_path.read_text(errors="replace")):
        out.append({"job": int(m.group(1)), "site": m.group(2)[-60:], "ms": round(float(m.group(3)))})
    return out


def run_spark(
    args,
    bootstrap: str,
    end_offset: int,
    out_dir: Path,
    min_partitions: int,
    tag: str,
    job: Path | None = None,
    extra: list[str] = (),
    remote: str | None = None,
    refresh: str | None = None,
    label: str | None = None,
    store_kind: str = "local",
) -> dict:
    """One run of the job: through ``spark-submit`` (a Spark of its own), or with ``remote`` as a plain Python
    client of a warm Spark Connect server (the process the failover-time task would be). ``extra``: more job
    arguments (``--state-dir``); ``refresh``: a state folder to refresh (``--refresh-state``) instead of answers.
    ``store_kind`` (``--store``): where the answers go - ``local`` (a folder), ``s3a`` (Spark writes them into the
    bench's S3 server through S3A, as a run folder in s3:// does) or ``stage`` (a local folder, then uploaded to
    that server as the staged route does: the upload is timed and added to the wall time)."""
    job = Path(job or args.job[0])
    out = out_dir / f"latest-{tag}.parquet"
    if store_kind == "s3a":
        out = f"s3a://{args.s3.bucket}/bench/{out_dir.name}/latest-{tag}.parquet"
        from mm2_failover.adapters.config import s3a_settings

        opts = out_dir / f"options-{tag}.json"
        fd = os.open(opts, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"hadoop": s3a_settings(args.s3.env)}, f)
        extra = [*extra, "--kafka-options-file", str(opts)]
    summary_path = out_dir / f"summary-{tag}.json"
    conf = {
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.pyspark.python": sys.executable,
    }
    master = args.current_master
    if args.cluster is not None:  # the bench's own standalone cluster: its URL and executor size
        master = args.cluster.master_url
        conf.update(
            {
                "spark.executor.memory": args.cluster.executor_memory,
                "spark.cores.max": str(args.cluster.cores),
                "spark.executorEnv.PYTHONPATH": str(REPO / "plugins"),
            }
        )
    conf.update(dict(kv.split("=", 1) for kv in args.spark_conf))
    job_args = [
        "--bootstrap-servers",
        bootstrap,
        "--checkpoints-topic",
        f"primary={TOPIC}",
        "--summary",
        str(summary_path),
    ]
    if refresh:
        job_args += ["--end-offsets", "latest", "--state-dir", refresh, "--refresh-state"]
    else:
        job_args += ["--end-offsets", json.dumps({TOPIC: {"0": end_offset}}), "--output", str(out)]
    if min_partitions:
        job_args += ["--min-partitions", str(min_partitions)]
    job_args += list(extra) + list(args.job_arg)
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "plugins"),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    if remote:
        cmd = [sys.executable, str(job), *job_args, "--remote", remote]
        env = {k: v for k, v in env.items() if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")}
    else:
        cmd = spark_submit_cmd(
            master,
            conf,
            job_args,
            job=job,
            name=f"bench-{tag}",
            driver_memory=args.driver_memory,
            s3a=store_kind == "s3a",
        )
    log_path = out_dir / f"spark-{tag}.log"
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, env=env, cwd=REPO)
        sampler = RssSampler(p.pid, worker_pid=args.cluster.worker.popen.pid if args.cluster is not None else None)
        sampler.start()
        stdout = p.stdout.read().decode()
        rc, cpu = wait_with_cpu(p)
    wall = time.monotonic() - t0
    sampler.stop_flag.set()
    sampler.join()
    summary = None
    for line in stdout.splitlines():
        if line.startswith("MM2_FAILOVER_SUMMARY "):
            summary = json.loads(line.split(" ", 1)[1])
    if rc != 0 or summary is None:
        raise RuntimeError(f"spark-submit exited {rc}; log {log_path}\n{stdout[-2000:]}")
    upload_s = None
    if store_kind == "stage":  # the staged route: the answers uploaded after the job, as JobSubmission.publish does
        from mm2_failover.adapters import store

        t_up = time.monotonic()
        url = f"s3://{args.s3.bucket}/bench/{out_dir.name}/staged-{tag}.parquet"
        store.upload_tree(out, url)
        upload_s = round(time.monotonic() - t_up, 3)
        wall += upload_s
        out = url
    proc = float(summary["seconds"])
    if label is None:
        label = (
            "spark"
            if job.resolve() == DEFAULT_JOB.resolve()
            else f"spark[{job.stem.replace('latest_checkpoints_', '')[:12]}]"
        )
        label = f"{label} {args.master_label} minP={min_partitions or '-'}"
        if store_kind != "local":
            label += f" {store_kind}"
    return {
        "variant": label,
        "job": str(job),
        "min_partitions": min_partitions,
        "tag": tag,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 2),
        "processing_s": proc,
        "startup_and_stop_s": round(wall - proc, 3),
        "records_read": summary["records_read"],
        "checkpoints": summary["checkpoints"],
        "groups": summary.get("groups"),
        "phases": summary.get("phases"),
        "spark_jobs": spark_job_times(log_path),
        "tail_offsets": summary.get("tail_offsets"),
        "state": summary.get("state"),
        "spark": summary.get("spark"),
        "summary": summary,
        "driver_java_peak_rss_mb": round(sampler.java_hwm_kb / 1024, 1),
        "driver_python_peak_rss_mb": round(sampler.python_hwm_kb / 1024, 1),
        "executor_java_peak_rss_mb": round(sampler.executor_hwm_kb / 1024, 1) if args.cluster is not None else None,
        "master": master,
        "store": store_kind,
        "upload_s": upload_s,
        "output": str(out),
        "log": str(log_path),
        "cmd": cmd,
    }


def run_dag_task(args, bootstrap: str, end_offset: int, home: Path) -> dict:
    """``compute_latest_checkpoints`` as the DAG runs it (bench/dag_task_bench.py: the real operator under
    ``dag.test()``); its figure is the task instance's duration as Airflow records it."""
    conf = {}
    master = args.current_master
    if args.cluster is not None:
        conf = {"spark.executor.memory": args.cluster.executor_memory, "spark.cores.max": str(args.cluster.cores)}
    cmd = [
        sys.executable,
        str(REPO / "bench" / "dag_task_bench.py"),
        "--home",
        str(home),
        "--bootstrap",
        bootstrap,
        "--topic",
        TOPIC,
        "--end-offset",
        str(end_offset),
        "--spark-master",
        master,
        "--spark-conf",
        json.dumps(conf),
    ]
    log_path = home.with_suffix(".log")
    home.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        r = subprocess.run(
            cmd, stdout=subprocess.PIPE, stderr=log, env={**os.environ, "PYTHONPATH": str(REPO / "plugins")}, cwd=REPO
        )
    out = next(
        (json.loads(x.split(" ", 1)[1]) for x in r.stdout.decode().splitlines() if x.startswith("DAG_TASK_BENCH ")),
        None,
    )
    if r.returncode or out is None:
        raise RuntimeError(f"dag_task_bench failed ({r.returncode}); log {log_path}")
    proc = float(out["summary"]["seconds"])
    return {
        "variant": f"DAG task {args.master_label}",
        "wall_s": round(out["task_duration_s"], 3),
        "cpu_s": None,
        "processing_s": proc,
        "startup_and_stop_s": round(out["task_duration_s"] - proc, 3),
        "driver_java_peak_rss_mb": None,
        "executor_java_peak_rss_mb": None,
        "output": out["output"],
        "dag_test_wall_s": out["dag_test_wall_s"],
        "log": str(log_path),
        "dag_task": True,
    }


def read_ours(path: str) -> dict[str, dict[tuple[str, int], int]]:
    from mm2_failover.adapters.answers import read_table

    t = read_table(path, ["group", "topic", "partition", "downstream_offset"]).to_pydict()
    out: dict[str, dict[tuple[str, int], int]] = {}
    for g, t_, p, o in zip(t["group"], t["topic"], t["partition"], t["downstream_offset"]):
        out.setdefault(g, {})[(t_, p)] = o
    return out


def check_ours(ours: dict, groups: int, partitions: int, updates: int, tail_pct: float = 0) -> dict:
    """Every key of every group against the generator's expected offsets (with the tail's updates, if any)."""
    wrong = missing = 0
    for g in range(groups):
        got = ours.get(group_name(g), {})
        for p in range(partitions):
            exp = expected_after(g, p, partitions, updates, tail_pct)
            v = got.get((replica_topic(g), p))
            if v is None:
                missing += 1
            elif v != exp:
                wrong += 1
    extra = sum(len(v) for v in ours.values()) - (groups * partitions - missing)
    return {"ok": wrong == 0 and missing == 0 and extra == 0, "wrong": wrong, "missing": missing, "extra": extra}


# ---------------------------------------------------------------------------------------------- Java baselines


def run_java(mode: str, bootstrap: str, groups: list[str]) -> dict:
    cmd = [
        "java",
        "-cp",
        str(REPO / ".cache" / "jars" / "kafka") + "/*",
        str(JAVA_SRC),
        mode,
        bootstrap,
        ALIAS,
        *groups,
    ]
    t0 = time.monotonic()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO) as p:
        err_reader = threading.Thread(target=lambda: setattr(p, "_err", p.stderr.read()), daemon=True)
        err_reader.start()
        stdout = p.stdout.read()
        rc, cpu = wait_with_cpu(p)
        err_reader.join()
    wall = time.monotonic() - t0
    if rc:
        raise RuntimeError(f"TranslateBench {mode} exited {rc}:\n{stdout[-2000:]}\n{getattr(p, '_err', '')[-3000:]}")
    events = [json.loads(line.split(" ", 1)[1]) for line in stdout.splitlines() if line.startswith("TRANSLATE_BENCH ")]
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 2), "events": events, "cmd": cmd}


def answers(events: list[dict]) -> dict[str, dict[tuple[str, int], int]]:
    return {e["group"]: {(t, p): o for t, p, o in e["offsets"]} for e in events if e["event"] == "group"}


def compare(sample: list[str], theirs: dict, ours: dict) -> dict:
    bad = [g for g in sample if theirs.get(g) != ours.get(g, {})]
    return {"checked_groups": len(sample), "mismatched_groups": len(bad), "mismatched_sample": bad[:5], "ok": not bad}


def pick_sample(groups: int, n: int) -> list[str]:
    n = max(1, min(n, groups))
    return [group_name(round(i * (groups - 1) / max(1, n - 1))) for i in range(n)] if n > 1 else [group_name(0)]


# ---------------------------------------------------------------------------------------------- one size


def bench_size(args, groups: int, root: Path) -> dict:
    P, U = args.partitions, args.updates
    records = groups * P * U
    res: dict = {"groups": groups, "partitions": P, "updates": U, "records": records, "rows": []}
    bed = Bed(run_dir=root / f"bed-g{groups}", start_mm2=False)
    t0 = time.monotonic()
    bed.start()
    res["bed_start_s"] = round(time.monotonic() - t0, 1)
    try:
        bootstrap = bed.target_bootstrap
        print(f"\n== G={groups:,} P={P} U={U}: {records:,} records (bed up in {res['bed_start_s']} s)", flush=True)
        w = write_checkpoints(bootstrap, groups, P, U, args.compression)
        res["write"] = w
        print(
            f"   wrote {w['records']:,} records in {w['write_s']} s (encode {w['encode_s']} s, produce+flush "
            f"{w['produce_s']} s, {w['records'] / w['produce_s']:,.0f} records/s, compression {w['compression']})",
            flush=True,
        )
        end = w["end_offset"]
        out_dir = root / f"g{groups}"
        out_dir.mkdir(parents=True, exist_ok=True)

        # (a) ours
        ours = None
        spark_rows = []
        for mi, master in enumerate(args.masters):
            with spark_master(args, master, root):
                for j, job in enumerate(args.job):
                    for mp, kind in [(mp, kind) for mp in args.min_partitions for kind in args.stores]:
                        for rep in range(args.repeat):
                            row = run_spark(
                                args,
                                bootstrap,
                                end,
                                out_dir,
                                mp,
                                f"m{mi}-j{j}-mp{mp}-{kind}-r{rep}",
                                job,
                                store_kind=kind,
                            )
                            row_ours = read_ours(row["output"])
                            row["check"] = check_ours(row_ours, groups, P, U)  # every key against the generator
                            row["answers_ok"] = row["check"]["ok"]
                            if ours is None:
                                ours = row_ours  # the reference for the baselines' answers
                                res["ours_check"] = row["check"]
                            print(
                                f"   {row['variant']} run {rep}: wall {row['wall_s']} s, processing {row['processing_s']} s, "
                                f"CPU {row['cpu_s']} s, driver JVM peak RSS {row['driver_java_peak_rss_mb']} MB"
                                + (
                                    f", executor JVM peak RSS {row['executor_java_peak_rss_mb']} MB"
                                    if row["executor_java_peak_rss_mb"] is not None
                                    else ""
                                )
                                + "; "
                                f"every key vs expected: {row['check']}",
                                flush=True,
                            )
                            spark_rows.append(row)
                if args.dag_task:
                    row = run_dag_task(args, bootstrap, end, root / f"airflow-g{groups}-m{mi}")
                    row["check"] = check_ours(read_ours(row["output"]), groups, P, U)
                    row["answers_ok"] = row["check"]["ok"]
                    print(
                        f"   {row['variant']}: Airflow task duration {row['wall_s']} s (job processing "
                        f"{row['processing_s']} s); every key vs expected: {row['check']}",
                        flush=True,
                    )
                    spark_rows.append(row)
        res["spark"] = spark_rows

        sample = pick_sample(groups, args.sample if args.sample else (24 if records <= 2_000_000 else 6))
        res["sample"] = sample
        our_keys = sum(len(v) for v in ours.values())
        our_checksum = sum(o for v in ours.values() for o in v.values())

        # (b) per-group translateOffsets (extrapolated), batch overload, tuned consumer
        pg = run_java("per-group", bootstrap, sample)
        calls = [e["ms"] / 1000 for e in pg["events"] if e["event"] == "group"]
        cpus = [e["cpu_ms"] / 1000 for e in pg["events"] if e["event"] == "group"]
        warm, warm_cpu = (calls[1:] or calls), (cpus[1:] or cpus)
        per_call, per_call_cpu = statistics.mean(warm), statistics.mean(warm_cpu)
        fixed = pg["wall_s"] - sum(calls)  # JVM start + compiling the source file + exit
        fixed_cpu = pg["cpu_s"] - sum(cpus)
        pg_res = {
            "wall_s_sample": pg["wall_s"],
            "cpu_s_sample": pg["cpu_s"],
            "calls_s": [round(c, 4) for c in calls],
            "calls_cpu_s": [round(c, 4) for c in cpus],
            "first_call_s": round(calls[0], 4),
            "warm_mean_s": round(per_call, 4),
            "warm_median_s": round(statistics.median(warm), 4),
            "warm_mean_cpu_s": round(per_call_cpu, 4),
            "jvm_fixed_s": round(fixed, 3),
            "extrapolated": True,
            "extrapolated_wall_s": round(fixed + calls[0] + per_call * (groups - 1), 1),
            "extrapolated_processing_s": round(calls[0] + per_call * (groups - 1), 1),
            "extrapolated_cpu_s": round(fixed_cpu + cpus[0] + per_call_cpu * (groups - 1), 1),
            "check": compare(sample, answers(pg["events"]), ours),
        }
        res["per_group"] = pg_res
        print(
            f"   per-group translateOffsets: {len(calls)} calls, first {calls[0]:.3f} s, warm mean {per_call:.3f} s"
            f" -> extrapolated to {groups:,} groups: {pg_res['extrapolated_wall_s']:,} s; answers {pg_res['check']}",
            flush=True,
        )

        bt = run_java("batch", bootstrap, sample)
        be = next(e for e in bt["events"] if e["event"] == "batch")
        bt_res = {
            "wall_s": bt["wall_s"],
            "cpu_s": bt["cpu_s"],
            "call_cpu_s": round(be["cpu_ms"] / 1000, 3),
            "processing_s": round(be["ms"] / 1000, 3),
            "groups": be["groups"],
            "keys": be["keys"],
            "checksum_ok": be["checksum"] == our_checksum and be["keys"] == our_keys,
            "check": compare(sample, answers(bt["events"]), ours),
        }
        res["batch"] = bt_res
        print(
            f"   batch translateOffsets(Pattern): wall {bt['wall_s']} s, call {bt_res['processing_s']} s; "
            f"checksum ok {bt_res['checksum_ok']}, sample {bt_res['check']}",
            flush=True,
        )

        cs = run_java("consumer", bootstrap, sample)
        ce = next(e for e in cs["events"] if e["event"] == "consumer")
        cs_res = {
            "wall_s": cs["wall_s"],
            "cpu_s": cs["cpu_s"],
            "call_cpu_s": round(ce["cpu_ms"] / 1000, 3),
            "processing_s": round(ce["ms"] / 1000, 3),
            "read_s": round(ce["read_ms"] / 1000, 3),
            "close_s": round(ce["close_ms"] / 1000, 3),
            "records": ce["records"],
            "keys": ce["keys"],
            "checksum_ok": ce["checksum"] == our_checksum and ce["keys"] == our_keys and ce["records"] == records,
            "check": compare(sample, answers(cs["events"]), ours),
        }
        res["consumer"] = cs_res
        print(
            f"   plain KafkaConsumer: wall {cs['wall_s']} s, read {cs_res['read_s']} s + close {cs_res['close_s']} s;"
            f" checksum ok {cs_res['checksum_ok']}, sample {cs_res['check']}",
            flush=True,
        )
        res["rows"] = table_rows(res)
    finally:
        bed.stop()
        if not args.keep:
            shutil.rmtree(bed.run_dir, ignore_errors=True)
    return res


def bench_state_size(args, groups: int, root: Path) -> dict:
    """Issue 17's comparison at one size: the topic written, a refresh (the scheduled state), then ``--tail-pct``
    % of the keys updated; (a) the failover-time job on a warm Spark Connect server with the state, (b) the same
    through spark-submit, (c) today's cold full pass, (d) batch ``translateOffsets(Pattern)``, (e) the refresh of
    the state over that tail (spark-submit and Connect). Every answer checked against the generator's."""
    from testbed.bed import free_port
    from testbed.spark_connect import SparkConnectServer

    P, U, pct = args.partitions, args.updates, args.tail_pct
    records = groups * P * U
    res: dict = {"groups": groups, "partitions": P, "updates": U, "records": records, "tail_pct": pct, "runs": []}
    bed = Bed(run_dir=root / f"bed-g{groups}", start_mm2=False)
    t0 = time.monotonic()
    bed.start()
    res["bed_start_s"] = round(time.monotonic() - t0, 1)
    server = None
    args.cluster, args.current_master, args.master_label = None, args.masters[0], args.masters[0]
    try:
        bootstrap = bed.target_bootstrap
        print(
            f"\n== G={groups:,} P={P} U={U}: {records:,} records, then {pct}% of the keys updated "
            f"(bed up in {res['bed_start_s']} s)",
            flush=True,
        )
        w = write_checkpoints(bootstrap, groups, P, U, args.compression)
        res["write"] = w
        print(f"   wrote {w['records']:,} records in {w['write_s']} s", flush=True)
        out_dir = root / f"g{groups}"
        out_dir.mkdir(parents=True, exist_ok=True)
        state = out_dir / "state"
        t1 = time.monotonic()
        server = SparkConnectServer.start(
            out_dir / "connect", free_port(), master=args.masters[0], driver_memory=args.driver_memory
        )
        res["connect_server"] = {
            "start_s": server.started_seconds,
            "warmup_s": server.warmup_seconds,
            "total_s": round(time.monotonic() - t1, 2),
            "memory_after_start": server.memory(),
        }
        print(
            f"   Spark Connect server {server.url}: port open in {server.started_seconds} s, warm-up "
            f"{server.warmup_seconds} s, {server.memory()}",
            flush=True,
        )

        def one(tag: str, label: str, end: int, **kw) -> dict:
            row = run_spark(args, bootstrap, end, out_dir, 0, tag, label=label, **kw)
            if not kw.get("refresh"):
                row["check"] = check_ours(read_ours(row["output"]), groups, P, U, pct if end > w["end_offset"] else 0)
                row["answers_ok"] = row["check"]["ok"]
            print(
                f"   {label}: wall {row['wall_s']} s, job {row['processing_s']} s, tail {row['tail_offsets']:,}, "
                f"state {json.dumps((row.get('state') or {}).get('aliases', row.get('state')))[:160]}; "
                f"phases {row['phases']}; answers {row.get('check', '-')}",
                flush=True,
            )
            res["runs"].append(row)
            return row

        # the first version as the scheduled refresh writes it where spark_connect_default is defined: on the server
        one(
            "refresh-initial", "refresh, first version (a full pass, Connect)", 0, refresh=str(state), remote=server.url
        )
        tail = write_tail(bootstrap, groups, P, U, pct)
        res["tail"] = tail
        end = tail["end_offset"]
        print(f"   tail: {tail['records']:,} records ({pct}% of the keys) in {tail['write_s']} s", flush=True)
        with_state = ["--state-dir", str(state)]
        for rep in range(args.repeat):
            one(f"a-connect-r{rep}", f"(a) warm Connect + state #{rep + 1}", end, extra=with_state, remote=server.url)
            one(f"b-submit-r{rep}", f"(b) spark-submit + state #{rep + 1}", end, extra=with_state)
        full = one("c-full", "(c) cold full pass (spark-submit)", end)
        ours = read_ours(full["output"])
        sample = pick_sample(groups, args.sample if args.sample else (24 if records <= 2_000_000 else 6))
        bt = run_java("batch", bootstrap, sample)
        be = next(e for e in bt["events"] if e["event"] == "batch")
        res["batch"] = {
            "wall_s": bt["wall_s"],
            "cpu_s": bt["cpu_s"],
            "processing_s": round(be["ms"] / 1000, 3),
            "keys": be["keys"],
            "checksum_ok": be["checksum"] == sum(o for v in ours.values() for o in v.values())
            and be["keys"] == sum(len(v) for v in ours.values()),
            "check": compare(sample, answers(bt["events"]), ours),
        }
        res["batch"]["answers_ok"] = res["batch"]["checksum_ok"] and res["batch"]["check"]["ok"]
        print(
            f"   (d) batch translateOffsets(Pattern): wall {bt['wall_s']} s (call {res['batch']['processing_s']} s);"
            f" answers ok {res['batch']['answers_ok']}",
            flush=True,
        )
        shutil.copytree(state, out_dir / "state-connect")
        one("e-refresh-submit", "(e) refresh over the tail (spark-submit)", 0, refresh=str(state))
        one(
            "e-refresh-connect",
            "(e) refresh over the tail (Connect)",
            0,
            refresh=str(out_dir / "state-connect"),
            remote=server.url,
        )
        one("a-after-refresh", "(a) warm Connect + refreshed state (no tail)", end, extra=with_state, remote=server.url)
        res["connect_server"]["memory_at_end"] = server.memory()
    finally:
        if server is not None:
            server.stop()
        bed.stop()
        if not args.keep:
            shutil.rmtree(bed.run_dir, ignore_errors=True)
    return res


def print_state_table(results: list[dict]) -> str:
    hdr = (
        f"{'records':>11} {'tail':>7} | {'variant':<46} {'wall s':>7} {'job s':>6} {'x batch':>7} {'read':>10} answers"
    )
    lines = [hdr, "-" * len(hdr)]
    for r in results:
        bw = r["batch"]["wall_s"]
        for row in r["runs"]:
            ok = "ok" if row.get("answers_ok", True) else "WRONG"
            lines.append(
                f"{r['records']:>11,} {r['tail']['records']:>7,} | {row['variant']:<46} {row['wall_s']:>7.2f} "
                f"{row['processing_s']:>6.2f} {bw / row['wall_s']:>6.2f}x {row['tail_offsets'] or 0:>10,} "
                f"{ok if 'answers_ok' in row else '(refresh)'}"
            )
        lines.append(
            f"{r['records']:>11,} {r['tail']['records']:>7,} | {'(d) batch translateOffsets(Pattern)':<46} "
            f"{bw:>7.2f} {r['batch']['processing_s']:>6.2f} {1:>6.2f}x {r['records'] + r['tail']['records']:>10,} "
            f"{'ok' if r['batch']['answers_ok'] else 'WRONG'}"
        )
        cs = r["connect_server"]
        lines.append(
            f"{'':>11} {'':>7} | (Connect server: port {cs['start_s']} s + warm-up {cs['warmup_s']} s; memory "
            f"at start {cs['memory_after_start']}, at end {cs.get('memory_at_end')}; write "
            f"{r['write']['write_s']} s)"
        )
    return "\n".join(lines)


def table_rows(res: dict) -> list[dict]:
    n, G = res["records"], res["groups"]
    pg, bt, cs = res["per_group"], res["batch"], res["consumer"]
    batch_rps = n / bt["processing_s"]
    rows = []
    for s in res["spark"]:
        rps = n / s["processing_s"]
        rows.append(
            {
                "variant": s["variant"],
                "wall_s": s["wall_s"],
                "cpu_s": s["cpu_s"],
                "processing_s": s["processing_s"],
                "startup_s": s["startup_and_stop_s"],
                "proc_rps": rps,
                "wall_rps": n / s["wall_s"],
                "x_per_group_wall": pg["extrapolated_wall_s"] / s["wall_s"],
                "x_batch_proc": rps / batch_rps,
                "rss_mb": s["driver_java_peak_rss_mb"],
                "executor_rss_mb": s.get("executor_java_peak_rss_mb"),
                "answers": "ok" if s["answers_ok"] else "WRONG",
            }
        )
    rows.append(
        {
            "variant": f"per-group x{G} (extrap.)",
            "wall_s": pg["extrapolated_wall_s"],
            "cpu_s": pg["extrapolated_cpu_s"],
            "processing_s": pg["extrapolated_processing_s"],
            "startup_s": pg["jvm_fixed_s"],
            "proc_rps": n / pg["extrapolated_processing_s"],
            "wall_rps": n / pg["extrapolated_wall_s"],
            "x_per_group_wall": 1.0,
            "x_batch_proc": (n / pg["extrapolated_processing_s"]) / batch_rps,
            "rss_mb": None,
            "answers": "ok" if pg["check"]["ok"] else "WRONG",
            "note": f"{len(pg['calls_s'])} calls measured, {pg['warm_mean_s']} s each",
        }
    )
    rows.append(
        {
            "variant": "batch Pattern (KIP-1239)",
            "wall_s": bt["wall_s"],
            "cpu_s": bt["cpu_s"],
            "processing_s": bt["processing_s"],
            "startup_s": round(bt["wall_s"] - bt["processing_s"], 3),
            "proc_rps": batch_rps,
            "wall_rps": n / bt["wall_s"],
            "x_per_group_wall": pg["extrapolated_wall_s"] / bt["wall_s"],
            "x_batch_proc": 1.0,
            "rss_mb": None,
            "answers": "ok" if bt["check"]["ok"] and bt["checksum_ok"] else "WRONG",
        }
    )
    rows.append(
        {
            "variant": "tuned KafkaConsumer",
            "wall_s": cs["wall_s"],
            "cpu_s": cs["cpu_s"],
            "processing_s": cs["processing_s"],
            "startup_s": round(cs["wall_s"] - cs["processing_s"], 3),
            "proc_rps": n / cs["processing_s"],
            "wall_rps": n / cs["wall_s"],
            "x_per_group_wall": pg["extrapolated_wall_s"] / cs["wall_s"],
            "x_batch_proc": (n / cs["processing_s"]) / batch_rps,
            "rss_mb": None,
            "answers": "ok" if cs["check"]["ok"] and cs["checksum_ok"] else "WRONG",
        }
    )
    return rows


def print_table(results: list[dict]) -> str:
    hdr = (
        f"{'G':>7} {'records':>11} | {'variant':<30} {'wall s':>9} {'CPU s':>8} {'proc s':>8} {'start s':>7} "
        f"{'proc rec/s':>11} {'wall rec/s':>11} {'x per-grp':>9} {'x batch':>7} {'RSS MB':>6} {'exec MB':>7} answers"
    )
    lines = [hdr, "-" * len(hdr)]
    for r in results:
        for row in r["rows"]:
            rss = f"{row['rss_mb']:.0f}" if row["rss_mb"] else "-"
            ex = f"{row['executor_rss_mb']:.0f}" if row.get("executor_rss_mb") else "-"
            cpu = f"{row['cpu_s']:,.1f}" if row.get("cpu_s") is not None else "-"
            lines.append(
                f"{r['groups']:>7,} {r['records']:>11,} | {row['variant']:<30} {row['wall_s']:>9,.2f} {cpu:>8} "
                f"{row['processing_s']:>8,.2f} {row['startup_s']:>7.2f} {row['proc_rps']:>11,.0f} "
                f"{row['wall_rps']:>11,.0f} {row['x_per_group_wall']:>8,.1f}x {row['x_batch_proc']:>6.2f}x "
                f"{rss:>6} {ex:>7} {row['answers']}"
            )
        w = r["write"]
        lines.append(
            f"{'':>7} {'':>11} | (write: {w['write_s']} s = encode {w['encode_s']} s + produce/flush "
            f"{w['produce_s']} s; not part of any figure above)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--sizes", default="", help="comma-separated group counts (overrides --groups), e.g. 1000,10000")
    ap.add_argument("--partitions", type=int, default=10, help="partitions per group")
    ap.add_argument("--updates", type=int, default=10, help="checkpoints per (group, partition)")
    ap.add_argument(
        "--master",
        default="local[2]",
        help="comma-separated Spark masters to bench in the same run: a master URL, or cluster:N = start "
        "a standalone cluster (one worker, N executor cores), e.g. 'local[2],cluster:1,cluster:2'",
    )
    ap.add_argument("--executor-memory", default="1g", help="executor memory with --master cluster:N")
    ap.add_argument("--driver-memory", default="1g")
    ap.add_argument(
        "--min-partitions",
        default="0",
        help="comma-separated --min-partitions values for the Spark job (0 = not set), e.g. 0,2,4",
    )
    ap.add_argument("--repeat", type=int, default=1, help="Spark runs per --min-partitions value")
    ap.add_argument(
        "--sample",
        type=int,
        default=0,
        help="groups sampled for per-group translateOffsets and answer checks (0: 24, or 6 above 2M records)",
    )
    ap.add_argument(
        "--compression",
        default="none",
        choices=["none", "lz4", "zstd", "snappy", "gzip"],
        help="producer compression of the checkpoint records (MM2's default producer: none)",
    )
    ap.add_argument(
        "--job",
        type=Path,
        action="append",
        default=[],
        help="Spark job file(s) to bench (repeatable; default spark_jobs/latest_checkpoints.py)",
    )
    ap.add_argument("--job-arg", action="append", default=[], help="extra argument for the job (repeatable)")
    ap.add_argument("--spark-conf", action="append", default=[], metavar="K=V", help="extra spark-submit --conf")
    ap.add_argument(
        "--dag-task",
        action="store_true",
        help="also time compute_latest_checkpoints as the DAG runs it (real operator, dag.test()), per master",
    )
    ap.add_argument(
        "--state",
        action="store_true",
        help="issue 17's comparison: refresh a state, update --tail-pct %% of the keys, then (a) warm "
        "Spark Connect + state, (b) spark-submit + state, (c) cold full pass, (d) batch "
        "translateOffsets, (e) the refresh over the tail",
    )
    ap.add_argument(
        "--tail-pct", type=float, default=1.0, help="with --state: %% of the keys updated after the refresh"
    )
    ap.add_argument(
        "--store",
        default="local",
        help="comma-separated: where each Spark run writes its answers - local (a folder), s3a (Spark "
        "writes them into a real S3 server, S3Proxy on loopback, through S3A), stage (a folder, then "
        "uploaded to that server; the upload is in the wall time), e.g. local,s3a,stage",
    )
    ap.add_argument("--keep", action="store_true", help="keep the bed's data folders")
    ap.add_argument("--out", type=Path, default=None, help="results JSON (default bench/results/<timestamp>.json)")
    args = ap.parse_args(argv)
    args.stores = [k.strip() for k in args.store.split(",") if k.strip()]
    if set(args.stores) - {"local", "s3a", "stage"}:
        ap.error(f"--store {args.store}: use local, s3a and/or stage")
    args.job = args.job or [DEFAULT_JOB]
    args.masters = [m for m in re.split(r",(?![^\[]*\])", args.master) if m.strip()]
    args.min_partitions = [int(x) for x in args.min_partitions.split(",") if x.strip()]
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()] if args.sizes else [args.groups]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    root = REPO / "var" / "bench" / stamp
    root.mkdir(parents=True, exist_ok=True)
    args.s3 = None
    if set(args.stores) - {"local"}:  # a real S3 server on loopback, and this process's clients pointed at it
        from testbed.objectstore import ObjectStore, forget_filesystems

        args.s3 = ObjectStore.start(root / "s3")
        os.environ.update(args.s3.env)
        forget_filesystems()
    try:
        return _bench(args, sizes, stamp, root)
    finally:
        if args.s3 is not None:
            args.s3.stop()


@contextlib.contextmanager
def spark_master(args, master: str, root: Path):
    """Set ``args.current_master``/``args.cluster`` for one master: a URL as given, or ``cluster:N`` = the bed's
    standalone cluster (one worker, N executor cores), started here and stopped afterwards."""
    args.cluster, args.current_master, args.master_label = None, master, master
    if master.startswith("cluster:"):
        from testbed.spark_cluster import SparkCluster

        cores = int(master.split(":", 1)[1])
        mem = args.executor_memory
        mem_mb = int(mem.rstrip("gGmM")) * (1024 if mem[-1] in "gG" else 1)
        args.cluster = SparkCluster(
            root / f"spark-cluster-{cores}-{time.monotonic_ns()}",
            cores=cores,
            memory=f"{mem_mb + 256}m",
            executor_memory=mem,
        )
        args.cluster.start()
        args.master_label = f"standalone {cores}c"
        print(
            f"   standalone cluster {args.cluster.master_url}: 1 worker, {cores} executor core(s), executor {mem}",
            flush=True,
        )
    try:
        yield
    finally:
        if args.cluster is not None:
            args.cluster.stop()
        args.cluster = None


def _bench(args, sizes: list[int], stamp: str, root: Path) -> int:
    out = args.out or REPO / "bench" / "results" / f"{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    results = []
    meta = {
        "started": stamp,
        "argv": sys.argv,
        "master": args.master,
        "driver_memory": args.driver_memory,
        "jobs": [str(j) for j in args.job],
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "executor_memory_on_clusters": args.executor_memory,
        "note": "RSS MB = driver JVM peak (VmHWM); with --master cluster:N the executor JVM's peak is in the JSON "
        "(executor_java_peak_rss_mb). Compare loadavg_start with the cores: other load skews figures.",
    }
    for g in sizes:
        results.append(bench_state_size(args, g, root) if args.state else bench_size(args, g, root))
        meta["loadavg_end"] = os.getloadavg()
        meta["total_s"] = round(time.monotonic() - t0, 1)
        out.write_text(json.dumps({"meta": meta, "results": results}, indent=2, default=str))
    table = print_state_table(results) if args.state else print_table(results)
    print("\n" + table)
    print(
        f"\nload average at start {meta['loadavg_start']}, at end {meta['loadavg_end']}; bench took "
        f"{meta['total_s']} s; results in {out}"
    )
    meta["table"] = table
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=2, default=str))
    if args.state:
        wrong = [row for r in results for row in r["runs"] if row.get("answers_ok") is False]
        wrong += [r for r in results if not r["batch"]["answers_ok"]]
    else:
        wrong = [row for r in results for row in r["rows"] if row["answers"] != "ok"]
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
