"""Benchmark: the failover report at G groups x P partitions - what verify (and the report of the plan an approver
reads) spends after the read-back: build_report, render_markdown, report.json's encoding as one JSON document (its
form until issue 33 item 6) and the run folder's report as written now (RunFolder.save_report: the rows per partition
in report_partitions.parquet, then report.json naming them), read back whole and as the run page reads it.

    PYTHONPATH=plugins:. .venv/bin/python bench/report_bench.py --groups 10000 --partitions 10 [--profile]

Pure Python, no cluster: the plan of bench/apply_bench.py, every planned offset committed, a source commit 3 records
after each checkpoint (re-read estimates). Prints the seconds of each part, their sizes and the process's peak
memory (VmHWM) up to the read-back; --profile adds the 15
costliest functions (cProfile, which slows everything down: use it to see where, not how long).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "plugins"), str(REPO)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=10000)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    from bench.apply_bench import make_plan
    from mm2_failover.rules.report import build_report, render_markdown

    plan = make_plan("p", a.groups, "primary.t", a.partitions, 1000)
    committed = plan.writes()
    log_end = {("primary.t", p): 1000 for p in range(a.partitions)}
    src = {(r.group, r.topic, r.partition): (r.planned_offset or 0) + 3 for r in plan.rows}
    prof = None
    if a.profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    t0 = time.perf_counter()
    rep = build_report(
        dag_id="mm2_failover",
        run_id="r",
        params={},
        plan=plan,
        committed=committed,
        log_end=log_end,
        mismatches=[],
        source_commits=src,
    )
    t1 = time.perf_counter()
    md = render_markdown(rep)
    t2 = time.perf_counter()
    import tempfile

    from mm2_failover.adapters.runfolder import REPORT_JSON, REPORT_PARTITIONS, RunFolder

    with tempfile.TemporaryDirectory() as tmp:
        f = RunFolder(tmp)
        w0 = time.perf_counter()
        f.save_report(rep)
        w1 = time.perf_counter()
        back = f.load_report()
        w2 = time.perf_counter()
        head = f.load_report(partitions=False)
        f.parquet_rows(REPORT_PARTITIONS, "", 2000)
        w3 = time.perf_counter()
        assert back.as_dict() == rep.as_dict(), "the report read back differs from the one written"
        assert head.groups == rep.groups
        sizes = {
            "json_mb": round((Path(tmp) / REPORT_JSON).stat().st_size / 1e6, 2),
            "parquet_mb": round((Path(tmp) / REPORT_PARTITIONS).stat().st_size / 1e6, 2),
        }
    peak = peak_rss_kib()  # before the former one-document JSON below: what the run's path held at most
    t2j = time.perf_counter()
    js = json.dumps(rep.as_dict(), indent=2, sort_keys=True, default=str)
    t3 = time.perf_counter()
    if prof:
        import pstats

        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(15)
    out = {
        "groups": a.groups,
        "partitions": a.groups * a.partitions,
        "build_report_s": round(t1 - t0, 2),
        "render_markdown_s": round(t2 - t1, 2),
        "report_json_s": round(t3 - t2j, 2),
        "total_s": round(t2 - t0 + t3 - t2j, 2),
        "report_md_mb": round(len(md) / 1e6, 1),
        "report_json_mb": round(len(js) / 1e6, 1),
        "save_report_s": round(w1 - w0, 2),
        "load_report_whole_s": round(w2 - w1, 2),
        "run_page_read_s": round(w3 - w2, 2),
        "saved_report_json_mb": sizes["json_mb"],
        "saved_report_partitions_parquet_mb": sizes["parquet_mb"],
        "read_back_equal": True,
        # the most this process held at once (VmHWM) while it built, rendered, saved and read back the report (the
        # former one-document JSON after it)
        "peak_rss_mib": round(peak / 1024, 1),
    }
    print(json.dumps(out))
    return 0


def peak_rss_kib() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))


if __name__ == "__main__":
    sys.exit(main())
