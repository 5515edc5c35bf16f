"""The reports pages (mm2_failover.ui: app, pages, runs) without Airflow: listing, run page, drill trend, raw files,
escaping, path safety, no secrets, and links that work under the /mm2 mount."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from mm2_failover.rules.plan import CLAMP, COMMIT, SKIP, Plan, PlanRow
from mm2_failover.rules.report import build_report, render_markdown, run_summary
from mm2_failover.ui import pages, runs
from mm2_failover.ui.app import create_app

REPO = Path(__file__).resolve().parents[2]
EVIL = "<script>alert(1)</script>"


def _write_failover(root: Path, run_id: str, group: str):
    plan = Plan(
        [
            PlanRow("primary", group, "primary.t", 0, 45, 40, None, 40, COMMIT),
            PlanRow("primary", group, "primary.t", 1, None, None, None, None, SKIP, "no_checkpoint"),
            PlanRow("primary", "g-other", "primary.t", 0, 10, 3, None, 10, CLAMP, "retention_gap", 10, 90, 7),
        ]
    )
    rep = build_report(
        dag_id="mm2_failover",
        run_id=run_id,
        params={"groups_regex": ".*"},
        plan=plan,
        committed={group: {("primary.t", 0): 40}, "g-other": {("primary.t", 0): 10}},
        log_end={("primary.t", 0): 100},
        mismatches=[],
        warnings=[f"warn {EVIL}"],
    )
    rep.stale_checkpoints = []
    rep.params["sasl.password"] = "hunter2"  # must never be served (reports hold none; defence in depth)
    d = root / "mm2_failover" / run_id.replace(":", "_")
    d.mkdir(parents=True)
    (d / "report.json").write_text(json.dumps(rep.as_dict()))
    (d / "report.md").write_text(render_markdown(rep))
    (d / "backup.json").write_text(json.dumps({"cluster": "secret-host:9093", "groups": {}}))
    return d


def _write_drill(root: Path, run_id: str, captured_at: str, reread: int, age: float):
    d = root / "mm2_failover_drill" / run_id
    d.mkdir(parents=True)
    totals = {
        "groups_covered": 2,
        "groups_without_checkpoints": 0,
        "partitions": 4,
        "partitions_planned": 3,
        "partitions_without_checkpoints": 1,
        "checkpoint_age_max_seconds": age,
        "replication_lag_max_records": 3,
        "records_reread_estimate": reread,
        "partitions_clamped": 0,
        "records_lost_to_retention": 0,
        "live_groups_on_target": 0,
        "findings": 2,
    }
    (d / "drill.json").write_text(
        json.dumps(
            {
                "kind": "drill",
                "dag_id": "mm2_failover_drill",
                "run_id": run_id,
                "captured_at": captured_at,
                "source_alias": "primary",
                "totals": totals,
                "findings": ["f1", f"f2 {EVIL}"],
                "groups": [
                    {
                        "group": "drill-g",
                        "partitions": 2,
                        "without_checkpoint": 1,
                        "checkpoint_age_max_seconds": age,
                        "reread_estimate": reread,
                        "clamped": 0,
                        "retention_lost": 0,
                        "live_on_target": False,
                    }
                ],
                "reread": [],
                "replication_lag": [],
                "writes": {"prefix": ""},
            }
        )
    )
    return d


@pytest.fixture
def client(tmp_path):
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    root = tmp_path / "artifacts"
    _write_failover(root, "manual__2026-11-23T08:00:00+00:00", f"orders-{EVIL}")
    _write_drill(root, "scheduled__2026-10-01", "2026-10-01T03:00:05+00:00", 120, 30.0)
    _write_drill(root, "scheduled__2026-11-01", "2026-11-01T03:00:05+00:00", 80, 12.5)
    outer = FastAPI()
    outer.mount("/mm2", create_app(root))  # as Airflow's API server mounts plugin apps
    c = TestClient(outer)
    c.root = root
    return c


def test_index_lists_failover_and_drill_runs_escaped(client):
    r = client.get("/mm2/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    t = r.text
    assert "manual__2026-11-23T08:00:00+00:00" in t and "scheduled__2026-11-01" in t
    assert "SUCCEEDED" in t and "finding(s)" in t
    assert "/mm2/runs/mm2_failover/manual__2026-11-23T08_00_00_2B00_00" not in t  # folder name, quoted once
    assert "href='/mm2/runs/mm2_failover/manual__2026-11-23T08_00_00%2B00_00'" in t
    assert "<script" not in t
    assert "the DAGs your login may read" in t
    assert "default-src 'none'" in r.headers["content-security-policy"]


class OnlyDrills:
    """An access rule (the shape of mm2_failover.ui.access.AirflowAccess): logged in, may read the drill DAG only."""

    open = False

    @staticmethod
    def get_user() -> str:
        return "reader"

    def can_read(self, user, dag_id: str) -> bool:
        assert user == "reader"
        return dag_id == "mm2_failover_drill"


def test_a_reader_sees_only_the_runs_of_dags_they_may_read_and_gets_403_on_the_others(client):
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    outer = FastAPI()
    outer.mount("/mm2", create_app(client.root, access=OnlyDrills()))
    c = TestClient(outer)
    t = c.get("/mm2/").text
    assert "scheduled__2026-11-01" in t and "manual__2026-11-23T08:00:00+00:00" not in t
    assert "scheduled__2026-11-01" in c.get("/mm2/drills").text
    r = c.get("/mm2/runs/mm2_failover/manual__2026-11-23T08:00:00+00:00")
    assert r.status_code == 403 and "orders" not in r.text and "may not read the runs of mm2_failover" in r.text
    r = c.get("/mm2/runs/mm2_failover/manual__2026-11-23T08:00:00+00:00/report.json")
    assert r.status_code == 403 and "orders" not in r.text
    assert c.get("/mm2/runs/mm2_failover_drill/scheduled__2026-11-01").status_code == 200
    assert c.get("/mm2/readiness").status_code == 403  # the readiness DAG's runs are not theirs either


class DenyFailover:
    """A deny-list access rule: every DAG but mm2_failover."""

    open = False

    @staticmethod
    def get_user() -> str:
        return "reader"

    def can_read(self, user, dag_id: str) -> bool:
        return dag_id != "mm2_failover"


def test_the_folder_served_is_the_dag_id_authorized_never_another_one_that_maps_to_it(client):
    """Issue 31 item 12: permission was checked on the DAG id in the URL, the folder served was safe_name(dag_id):
    'mm2:failover' (allowed by a deny-list) served mm2_failover's report."""
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    outer = FastAPI()
    outer.mount("/mm2", create_app(client.root, access=DenyFailover()))
    c = TestClient(outer)
    run = "manual__2026-11-23T08:00:00+00:00"
    for dag in ("mm2:failover", "mm2 failover", "mm2%3Afailover"):
        for tail in ("", "/report.json", "/report.md"):
            r = c.get(f"/mm2/runs/{dag}/{run}{tail}")
            assert r.status_code == 404 and "orders" not in r.text, (dag, tail, r.status_code)
    assert c.get(f"/mm2/runs/mm2_failover/{run}").status_code == 403


def test_run_page_per_group_table_and_links(client):
    # the dag_run tab passes the real run id; the folder name is derived the same way config.run_dir does it
    r = client.get("/mm2/runs/mm2_failover/manual__2026-11-23T08:00:00+00:00")
    assert r.status_code == 200, r.text
    t = r.text
    assert "orders-&lt;script&gt;alert(1)&lt;/script&gt;" in t and "<script" not in t
    assert "re-read (est.)" in t and "lost to retention" in t
    assert "report.json</a>" in t and "report.md</a>" in t
    assert "WARNING: warn &lt;script&gt;" in t
    # per-group row: partitions 2, committed 1, skipped 1, clamped 0, lag 60, re-read 45-40 = 5
    assert "<td class=n>2</td><td class=n>1</td><td class=n>1</td><td class=n>0</td><td></td><td class=n>60</td>" in t


def test_raw_files_are_whitelisted_and_scrubbed(client):
    base = "/mm2/runs/mm2_failover/manual__2026-11-23T08_00_00+00_00"
    j = client.get(f"{base}/report.json")
    assert j.status_code == 200 and j.headers["content-type"] == "application/json"
    assert "hunter2" not in j.text and "sasl" not in j.text and j.json()["outcome"] == "succeeded"
    md = client.get(f"{base}/report.md")
    assert md.status_code == 200 and md.text.startswith("# mm2-failover report")
    assert md.headers["content-type"].startswith("text/plain")
    for name in ("backup.json", "snapshot.json", "../../etc/passwd"):
        assert client.get(f"{base}/{name}").status_code == 404


@pytest.mark.parametrize(
    "path",
    [
        "/mm2/runs/../mm2_failover",
        "/mm2/runs/%2e%2e/%2e%2e",
        "/mm2/runs/mm2_failover/..",
        "/mm2/runs/mm2_failover/.hidden",
        "/mm2/runs/other_dag/some_run",
        "/mm2/runs/mm2_failover/..%2F..%2Fetc/report.json",
    ],
)
def test_unknown_or_unsafe_paths_are_404(client, path):
    r = client.get(path)
    assert r.status_code == 404
    assert "secret-host" not in r.text


def test_drill_run_page_and_trend_with_svg(client):
    r = client.get("/mm2/runs/mm2_failover_drill/scheduled__2026-11-01")
    assert (
        r.status_code == 200 and "Findings" in r.text and "f2 &lt;script&gt;" in r.text and "drill.json</a>" in r.text
    )
    t = client.get("/mm2/drills").text
    assert t.count("<svg") == 5 and "Estimated re-read" in t
    assert "scheduled__2026-10-01" in t and "<script" not in t
    # oldest to newest in the plot: October first on its time axis, and the newest point is November's 80
    plot = t[t.index("<svg") : t.index("</svg>")]
    assert plot.index("2026-10-01T03:00") < plot.index("2026-11-01T03:00") and ">80<" in plot


def test_empty_and_missing_roots(tmp_path):
    from fastapi.testclient import TestClient

    c = TestClient(create_app(tmp_path / "nothing"))
    assert "does not exist yet" in c.get("/").text
    assert "No drill run" in c.get("/drills").text


def test_a_trend_picture_escapes_and_handles_single_points_and_no_data():
    from mm2_failover import pictures

    s = pictures.trend(f"t {EVIL}", [(f"run {EVIL}", 3.0)], " s")
    assert "<script" not in s and "&lt;script&gt;" in s
    assert "no data" in pictures.trend("x", [("a", None)])


def test_a_picture_that_cannot_be_drawn_never_breaks_the_page(caplog):
    def broken(*a):
        raise ValueError("no")

    assert "could not be drawn" in pages.picture(broken, 1) and "broken" in caplog.text


def test_safe_name_matches_config_run_dir(monkeypatch, tmp_path):
    from mm2_failover.adapters import config

    monkeypatch.setenv("MM2_FAILOVER_ARTIFACTS", str(tmp_path))
    rid = "manual__2026-11-23T08:57:31.979841+00:00"
    assert config.run_dir("mm2_failover", rid).name == runs.safe_name(rid)
    assert runs.safe_name("..") is None and runs.safe_name("") is None


def test_plugin_declares_the_app_and_views():
    spec = importlib.util.spec_from_file_location("mm2_failover_plugin", REPO / "plugins" / "mm2_failover_plugin.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    p = mod.Mm2FailoverPlugin
    [app] = p.fastapi_apps
    assert app["url_prefix"] == "/mm2" and app["name"] == "mm2-failover reports"
    views = {v["url_route"]: v for v in p.external_views}
    assert views["mm2-failover"]["href"] == "/mm2/" and views["mm2-failover"]["destination"] == "nav"
    assert views["mm2-failover-run"]["href"] == "/mm2/runs/{DAG_ID}/{RUN_ID}"


# ------------------------------------------------------------------------------------------ issue 14, item 14


def test_index_renders_from_small_summaries_and_one_bad_run_never_breaks_it(tmp_path):
    """The index lists runs from each run's small summary.json (never parsing whole reports), and a run whose
    files are broken or odd is shown as such while every other run is still listed."""
    from fastapi.testclient import TestClient

    root = tmp_path / "artifacts"
    good = _write_failover(root, "good-run", "orders")
    # a big report the index must not need: its summary says what the index shows
    rep = json.loads((good / "report.json").read_text())
    (good / "summary.json").write_text(
        json.dumps(run_summary("mm2_failover", "good-run", rep, None, "2026-11-23T08:00"))
    )
    (good / "report.json").write_text("{ truncated by a full disk")
    odd = root / "mm2_failover" / "odd-run"
    odd.mkdir(parents=True)
    (odd / "report.json").write_text(json.dumps({"outcome": {"not": "a string"}, "totals": [1, 2]}))
    c = TestClient(create_app(root))
    r = c.get("/")
    assert r.status_code == 200, r.text
    assert "good-run" in r.text and "SUCCEEDED" in r.text and "odd-run" in r.text
    assert "UNREADABLE" in r.text  # the odd run is listed, marked, not fatal


def _write_pending(root: Path, run_id: str, outcome: str, status: str):
    """A run whose plan waits for (or was refused) its approval: its preview report, approval.json and the plan."""
    from mm2_failover.rules import approval

    d = _write_failover(root, run_id, "g-pending")
    rep = json.loads((d / "report.json").read_text())
    decision = approval.Decision(
        status, approval.plan_hash(b"plan"), "2026-11-26T03:00:00+00:00", "2026-11-26T03:02:00+00:00", "admin", 600
    )
    rep.update(outcome=outcome, dry_run=True, approval=decision.as_dict())
    (d / "report.json").write_text(json.dumps(rep))
    (d / "summary.json").write_text(json.dumps(run_summary("mm2_failover", run_id, rep, None, "2026-11-26T03:02")))
    (d / "approval.json").write_text(json.dumps(decision.as_dict()))
    from mm2_failover.adapters.runfolder import RunFolder
    from mm2_failover.rules.plan import PlanRecord

    RunFolder(d).save_plan(
        PlanRecord(
            Plan([PlanRow("primary", "g-pending", "primary.t", 0, 45, 40, None, 40, COMMIT)]),
            "2026-11-26T03:00:00+00:00",
            {"groups_regex": "g-pending"},
            [],
            None,
            None,
        )
    )
    return d, decision


@pytest.mark.parametrize(
    "outcome, status, says",
    [
        ("awaiting_approval", "awaiting", "waiting for approval since 2026-11-26T03:00:00+00:00"),
        ("rejected", "rejected", "REJECTED by admin at 2026-11-26T03:02:00+00:00: nothing was written"),
        ("approval_timed_out", "timed_out", "NOT approved within 600 s"),
    ],
)
def test_a_plan_waiting_for_or_refused_its_approval_is_listed_with_its_reason_and_serves_its_plan(
    client, outcome, status, says
):
    """Issue 33: runs that wrote nothing - waiting for an approval, rejected, timed out - are in the report pages
    with their reason, and the run page serves plan.json, its rows (plan_rows.parquet), plan.csv and approval.json."""
    run_id = f"manual__pending-{status}"
    _d, decision = _write_pending(client.root, run_id, outcome, status)
    index = client.get("/mm2/").text
    assert run_id in index and outcome.replace("_", " ").upper() in index
    page = client.get(f"/mm2/runs/mm2_failover/{run_id}").text
    assert says in page and decision.plan_hash in page
    for f in ("plan.json", "plan_rows.parquet", "plan.csv", "approval.json"):
        assert f"{f}</a>" in page
    base = f"/mm2/runs/mm2_failover/{run_id}"
    plan = client.get(f"{base}/plan.json")
    assert plan.status_code == 200 and plan.json()["params"] == {"groups_regex": "g-pending"}
    assert plan.json()["rows_file"] == "plan_rows.parquet" and plan.json()["row_count"] == 1
    rows = client.get(f"{base}/plan_rows.parquet")
    assert rows.status_code == 200 and rows.headers["content-type"] == "application/vnd.apache.parquet"
    import io

    import pyarrow.parquet as pq

    assert pq.read_table(io.BytesIO(rows.content)).to_pylist()[0]["group"] == "g-pending"
    csv = client.get(f"{base}/plan.csv")
    assert csv.status_code == 200 and csv.text == "g-pending,primary.t,0,40\n"
    assert csv.headers["content-type"].startswith("text/csv")
    assert client.get(f"{base}/approval.json").json()["status"] == status


def test_a_final_report_shows_who_approved_its_plan(client):
    from mm2_failover.rules import approval

    d = _write_failover(client.root, "manual__approved", "g-approved")
    rep = json.loads((d / "report.json").read_text())
    rep["approval"] = approval.Decision(
        approval.APPROVED, approval.plan_hash(b"p"), "a", "2026-11-26T03:05:00+00:00", "admin"
    ).as_dict()
    (d / "report.json").write_text(json.dumps(rep))
    page = client.get("/mm2/runs/mm2_failover/manual__approved").text
    assert "SUCCEEDED" in page and "Approval: approved by admin at 2026-11-26T03:05:00+00:00" in page


def test_the_plan_files_are_served_as_written_because_no_run_parameter_can_hold_a_secret():
    """plan.json carries the run's parameters and is streamed unparsed (tens of MB at 10k groups): no RunParams field
    may look like a connection setting or a credential - the pattern the JSON files are scrubbed with."""
    from dataclasses import fields

    from mm2_failover.rules.run_params import RunParams

    assert [f.name for f in fields(RunParams) if runs._SECRET_KEY.search(f.name)] == []
    assert runs.STREAMED_FILES <= set(runs.SERVED_FILES)


def _readiness(tmp_path: Path, n_groups: int = 3):
    from datetime import datetime, timezone

    from mm2_failover.adapters.runfolder import RunFolder
    from mm2_failover.rules import readiness
    from mm2_failover.stages import assess_readiness as stage

    now = int(datetime.now(timezone.utc).timestamp() * 1000)
    rows = [
        {
            "group": f"g{i:04d}",
            "topic": "primary.t",
            "partition": 0,
            "planned_offset": 5,
            "action": "commit",
            "rule": "exact_sync" if i % 3 else "checkpoint",
            "reason": "",
        }
        for i in range(n_groups)
    ]
    rows.append(
        {
            "group": EVIL,
            "topic": "primary.t",
            "partition": 0,
            "planned_offset": None,
            "action": "skip",
            "rule": "checkpoint",
            "reason": "no_checkpoint",
        }
    )
    drains = [
        {
            "alias": "primary",
            "topic": "t",
            "partition": 0,
            "replica_topic": "primary.t",
            "source_end": 100,
            "replicated": 89,
            "replica_end": 90,
            "state": "replication behind",
        }
    ]
    base = tmp_path / "mm2_failover_readiness"
    for k, run_id in enumerate(("scheduled__1", "scheduled__2")):
        r = readiness.assess(
            run_id=run_id,
            now_ms=now,
            rpo_seconds=60,
            plan_rows=rows,
            reread=[],
            drain_rows=drains,
            oldest_unreplicated_ms={("primary.t", 0): now - 90_000 * (k + 1)},
            checkpoint_ms={},
            archive_updated={"primary": None},
            findings=[{"key": "audit:primary:x", "text": f"audit finding {EVIL}"}],
        )
        RunFolder(base / run_id).save_readiness(r)
        stage.append_history(readiness.history_line(r), base)
    (base / "latest.json").write_text(json.dumps({"folder": "scheduled__2", "run_id": "scheduled__2"}))
    return base


def test_the_readiness_page_shows_the_newest_interval_its_trend_and_filters_the_groups_escaped(tmp_path):
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    _readiness(tmp_path)
    outer = FastAPI()
    outer.mount("/mm2", create_app(tmp_path))
    c = TestClient(outer)
    t = c.get("/mm2/readiness").text
    assert "run scheduled__2" in t and "4 group(s) match" in t
    assert "would lose more than the RPO (60 s)" in t and "worst: 180 s" in t  # the newest interval's, not the first
    # the exposure against the RPO, the day's strip of intervals and two trends (tests/unit/test_pictures.py)
    assert "Over the last day (2 interval(s))" in t and t.count("<svg") == 4
    assert "data-picture='exposure'" in t and "The last 24 hours: 2 interval(s)" in t
    assert EVIL not in t and "&lt;script&gt;" in t
    assert "href='/mm2/runs/mm2_failover_readiness/scheduled__2/readiness.json'" in t
    assert "2 group(s) match" in c.get("/mm2/readiness?answer=not_exact").text  # g0000 (checkpoint) and the skipped
    assert "1 group(s) match" in c.get("/mm2/readiness?answer=exact&group=G0001").text
    assert "0 group(s) match" in c.get("/mm2/readiness?answer=none&group=g0").text
    assert "4 group(s) match" in c.get("/mm2/readiness?answer=nonsense").text  # an unknown filter is no filter
    raw = c.get("/mm2/runs/mm2_failover_readiness/scheduled__2/readiness.json")
    assert raw.status_code == 200 and raw.json()["run_id"] == "scheduled__2"
    rows = c.get("/mm2/runs/mm2_failover_readiness/scheduled__2/readiness_partitions.parquet")
    assert rows.status_code == 200 and rows.content[:4] == b"PAR1"


def test_the_readiness_page_before_any_interval_says_what_to_do(tmp_path):
    from fastapi.testclient import TestClient

    t = TestClient(create_app(tmp_path)).get("/readiness").text
    assert "unpause the mm2_failover_readiness DAG" in t


def test_a_report_with_its_rows_in_parquet_shows_the_first_rows_and_serves_the_file(tmp_path, monkeypatch):
    """Issue 33 item 6: the run page reads report.json (the summary and the groups) and only the first MAX_ROWS rows
    of report_partitions.parquet, says how many there are in all, and serves the file as written."""
    import io

    import pyarrow.parquet as pq
    from fastapi.testclient import TestClient

    from mm2_failover.adapters.runfolder import REPORT_PARTITIONS, RunFolder

    monkeypatch.setattr(pages, "MAX_ROWS", 5)
    rows = [PlanRow("primary", f"g{i // 4}", "primary.t", i % 4, 50, 40 + i, None, 40 + i, COMMIT) for i in range(12)]
    rep = build_report(
        dag_id="mm2_failover",
        run_id="r12",
        params={},
        plan=Plan(rows),
        committed=Plan(rows).writes(),
        log_end={("primary.t", p): 100 for p in range(4)},
        mismatches=[],
    )
    RunFolder(tmp_path / "mm2_failover" / "r12").save_report(rep)
    c = TestClient(create_app(tmp_path))
    t = c.get("/runs/mm2_failover/r12").text
    assert "Partitions (12)" in t and f"First 5 shown; {REPORT_PARTITIONS} has all 12." in t
    assert t.count("<tr>", t.index("Partitions (12)")) <= 1 + 5 + 1  # header + 5 rows (+ the groups' own table)
    assert f"{REPORT_PARTITIONS}</a>" in t
    got = c.get(f"/runs/mm2_failover/r12/{REPORT_PARTITIONS}")
    assert got.status_code == 200 and got.headers["content-type"] == "application/vnd.apache.parquet"
    assert pq.read_table(io.BytesIO(got.content)).to_pylist() == rep.partitions
    j = c.get("/runs/mm2_failover/r12/report.json").json()
    assert j["partitions"] == REPORT_PARTITIONS and j["totals"]["partitions"] == 12


def test_the_live_diff_reads_the_plans_groups_from_the_target_now_and_says_where_each_partition_is(tmp_path):
    """Issue 33 item 4: the plan against the target's commits when the page is asked for (rules in plandiff.py),
    filtered by group name; a target that cannot be read is said on the page without naming the cluster."""
    from fastapi.testclient import TestClient

    from mm2_failover.adapters.runfolder import RunFolder
    from mm2_failover.rules.plan import PlanRecord

    rows = [
        PlanRow("primary", "app", "primary.t", 0, 45, 40, None, 40, COMMIT),
        PlanRow("primary", "app", "primary.t", 1, 50, 44, 30, 44, COMMIT),
        PlanRow("primary", f"web-{EVIL}", "primary.t", 0, 20, 15, 12, 15, COMMIT),
        PlanRow("primary", "idle", "primary.t", 0, None, None, None, None, SKIP, "no_checkpoint"),
    ]
    RunFolder(tmp_path / "mm2_failover" / "r1").save_plan(
        PlanRecord(Plan(rows), "2026-11-26T09:00:00+00:00", {}, [], "2026-11-26T09:00:00+00:00", 1.0)
    )
    asked: list = []

    def commits(groups):
        asked.append(list(groups))
        return {"app": {("primary.t", 0): 40, ("primary.t", 1): 30}, f"web-{EVIL}": {("primary.t", 0): 99}}

    c = TestClient(create_app(tmp_path, commits=commits))
    t = c.get("/runs/mm2_failover/r1/live-diff").text
    assert asked == [["app", f"web-{EVIL}"]]  # the writing groups only, in the plan's order
    assert "<td class=n>1</td><td class=n>0</td><td class=n>1</td><td class=n>1</td>" in t  # moved, gone, not yet, ok
    assert "Not where the plan puts them: web-&lt;script&gt;alert(1)&lt;/script&gt;, app" in t and "<script" not in t
    c.get("/runs/mm2_failover/r1/live-diff?group=app")
    assert asked[-1] == ["app"]
    RunFolder(tmp_path / "mm2_failover" / "r1").save_report(
        build_report(
            dag_id="mm2_failover",
            run_id="r1",
            params={},
            plan=Plan(rows),
            committed={},
            log_end={},
            mismatches=[],
            dry_run=True,
        )
    )
    assert "live-diff'>The plan against the target's commits now</a>" in c.get("/runs/mm2_failover/r1").text

    def down(groups):
        raise RuntimeError("target: cannot reach secret-host:9093")

    r = TestClient(create_app(tmp_path, commits=down)).get("/runs/mm2_failover/r1/live-diff")
    assert r.status_code == 502 and "could not be read now (RuntimeError)" in r.text and "secret-host" not in r.text
    assert TestClient(create_app(tmp_path, commits=commits)).get("/runs/mm2_failover/nope/live-diff").status_code == 404


def test_the_live_diff_names_a_missing_connection_and_what_to_do(tmp_path):
    """Issue 49 item 6: the page said "(AirflowNotFoundException)" where the API server has no kafka_target."""
    from airflow.exceptions import AirflowNotFoundException
    from fastapi.testclient import TestClient

    from mm2_failover.adapters.runfolder import RunFolder
    from mm2_failover.rules.plan import PlanRecord

    rows = [PlanRow("primary", "app", "primary.t", 0, 45, 40, None, 40, COMMIT)]
    RunFolder(tmp_path / "mm2_failover" / "r1").save_plan(
        PlanRecord(Plan(rows), "2026-11-26T09:00:00+00:00", {}, [], "2026-11-26T09:00:00+00:00", 1.0)
    )

    def no_connection(groups):
        raise AirflowNotFoundException("The conn_id `kafka_target` isn't defined")

    r = TestClient(create_app(tmp_path, commits=no_connection)).get("/runs/mm2_failover/r1/live-diff")
    assert r.status_code == 502 and "no connection &#x27;kafka_target&#x27;" in r.text, r.text[-1500:]
    assert "AIRFLOW_CONN_KAFKA_TARGET" in r.text and "Admin &gt; Connections" in r.text


@pytest.mark.parametrize(
    "dag_id, says",
    [
        ("mm2_sync_archive", "keeps no per-run report"),
        ("mm2_failover_readiness", "Readiness page"),
        ("mm2_failover_rollback", "rollback.json"),
        ("someone_elses_dag", "is not one of mm2-failover&#x27;s DAGs"),
    ],
)
def test_the_run_tab_of_a_dag_without_a_report_says_where_to_look(client, dag_id, says):
    """Issue 49 item 6: Airflow adds the plugin's run tab to every DAG's runs; it answered 404 on all but the
    failover's and the drill's (and the archive's failure mail linked to it)."""
    r = client.get(f"/mm2/runs/{dag_id}/scheduled__2026-11-27T10:00:00+00:00")
    assert r.status_code == (404 if dag_id == "someone_elses_dag" else 200)
    assert says in r.text and "No mm2-failover report" in r.text


def test_a_failure_mail_links_only_to_pages_that_exist():
    from mm2_failover.rules import notify

    base = dict(
        run_id="scheduled__2026-11-27T10:00:00+00:00",
        task_id="refresh_latest_state",
        try_number=3,
        reason="boom",
        run_folder="scheduled__2026-11-27T10_00_00_00_00",
        base_url="http://af",
    )
    archive = notify.message(notify.Failure(dag_id="mm2_sync_archive", **base))
    assert "/mm2/runs/" not in archive.text and "Airflow: http://af/dags/mm2_sync_archive/runs/" in archive.text
    readiness = notify.message(notify.Failure(dag_id="mm2_failover_readiness", **base))
    assert "Readiness: http://af/mm2/readiness" in readiness.text and "/mm2/runs/" not in readiness.text
    failover = notify.message(notify.Failure(dag_id="mm2_failover", **base))
    assert "Report: http://af/mm2/runs/mm2_failover/" in failover.text


def test_a_run_waiting_for_its_approval_says_its_groups_will_move_once_approved(tmp_path):
    """Issue 49 item 5: while the run waits for approval its page said every group "would move (dry run)" although it
    writes as soon as someone approves; after a decision, what the decision means."""
    from fastapi.testclient import TestClient

    from mm2_failover.adapters.runfolder import RunFolder
    from mm2_failover.rules import approval as ap

    rows = [PlanRow("primary", "app", "primary.t", 0, 45, 40, None, 40, COMMIT)]
    for outcome, says in [(ap.AWAITING, "will move once approved"), (ap.REJECTED, "not moved: the plan was rejected")]:
        rep = build_report(
            dag_id="mm2_failover",
            run_id="r1",
            params={},
            plan=Plan(rows),
            committed={},
            log_end={},
            mismatches=[],
            dry_run=True,
            outcome=ap.OUTCOMES[outcome],
        )
        RunFolder(tmp_path / "mm2_failover" / "r1").save_report(rep)
        t = TestClient(create_app(tmp_path)).get("/runs/mm2_failover/r1").text
        assert says in t and "would move (dry run)" not in t


def test_the_index_says_a_runs_unknown_re_read_not_a_partial_sum(tmp_path):
    """Issue 50 item 7: a run whose re-read is not counted on some partitions says so on the index too."""
    from fastapi.testclient import TestClient

    root = tmp_path / "artifacts"
    d = _write_failover(root, "lost-run", "orders")
    rep = json.loads((d / "report.json").read_text())
    rep["totals"].update(records_reread_estimate=7, partitions_reread_unknown=2)
    s = run_summary("mm2_failover", "lost-run", rep, None, "2026-11-28T04:00")
    assert (s["reread"], s["reread_unknown"]) == (7, 2)
    (d / "summary.json").write_text(json.dumps(s))
    assert "7 + unknown on 2" in TestClient(create_app(root)).get("/").text


def test_a_run_page_says_its_outcome_first_and_lists_the_worst_groups_first(tmp_path):
    """Issue 53 item 4: the outcome before the files, the mismatches before the groups, the groups worst first
    (refused, not as planned, lost to retention, then by re-read) whatever their names; report.md in the same order;
    the page follows a dark colour scheme and its tables scroll inside a narrow panel."""
    from mm2_failover.rules.plan import Mismatch

    rows = [
        PlanRow("primary", g, "primary.t", 0, up, down, None, down, COMMIT)
        for g, up, down in (("a-fine", 10, 10), ("b-reread", 60, 10), ("m-mismatch", 10, 10), ("z-refused", 5, 5))
    ]
    rep = build_report(
        dag_id="mm2_failover",
        run_id="r1",
        params={},
        plan=Plan(rows),
        committed={
            "a-fine": {("primary.t", 0): 10},
            "b-reread": {("primary.t", 0): 10},
            "m-mismatch": {("primary.t", 0): 7},
        },
        log_end={("primary.t", 0): 100},
        mismatches=[Mismatch("m-mismatch", "primary.t", 0, 10, 7)],
        refused={"z-refused": "live members"},
        source_commits={("b-reread", "primary.t", 0): 60, ("a-fine", "primary.t", 0): 10},
    )
    d = tmp_path / "mm2_failover" / "r1"
    d.mkdir(parents=True)
    (d / "report.json").write_text(json.dumps(rep.as_dict()))
    md = render_markdown(rep)
    (d / "report.md").write_text(md)
    t = pages.render_run("mm2_failover", "r1", rep.as_dict(), None, ["report.json", "report.md"], "/mm2")
    assert t.index("Outcome:") < t.index("Mismatches") < t.index("Groups (4)") < t.index("Files:")
    groups = t[t.index("class='groups'") :]
    assert [groups.index(f"<td>{g}</td>") for g in ("z-refused", "m-mismatch", "b-reread", "a-fine")] == sorted(
        groups.index(f"<td>{g}</td>") for g in ("z-refused", "m-mismatch", "b-reread", "a-fine")
    )
    section = md[md.index("## Groups") : md.index("## Partitions")]
    assert [section.index(g) for g in ("z-refused", "m-mismatch", "b-reread", "a-fine")] == sorted(
        section.index(g) for g in ("z-refused", "m-mismatch", "b-reread", "a-fine")
    )
    assert "prefers-color-scheme: dark" in t and "overflow-x:auto" in t


def test_the_readiness_table_ranks_what_it_does_not_know_above_what_is_known_to_be_nothing():
    """Worst first, as the report's groups are: an exposure or a re-read that could not be read ranks below every known
    one above zero and above zero itself, never as zero (a group nobody can vouch for is not the safest one)."""

    def g(name, exposure, reread, reread_unknown=0, answer="exact"):
        return {
            "group": name,
            "exposure_seconds": exposure,
            "reread": reread,
            "reread_unknown": reread_unknown,
            "answer": answer,
        }

    rows = [
        g("a-fine", 0, 0),
        g("b-exposed", 30, 0),
        g("c-exposure-unknown", None, 0),
        g("d-rereads", 0, 7),
        g("e-reread-unknown", 0, 0, reread_unknown=2),
        g("f-not-exact", 0, 0, answer="checkpoint"),
        g("g-rereads-and-unknown", 0, 7, reread_unknown=1),
    ]
    assert [r["group"] for r in pages.readiness_rows(rows)] == [
        "b-exposed",
        "c-exposure-unknown",
        "f-not-exact",
        "g-rereads-and-unknown",
        "d-rereads",
        "e-reread-unknown",
        "a-fine",
    ]


def test_the_index_on_an_object_store_lists_each_dag_folder_once_and_never_looks_inside_a_file(tmp_path, monkeypatch):
    """A DAG's folder also holds files (readiness's latest.json and history.jsonl, the archive's
    scheduled-archive.json): the index looked for each run's summary.json, drill.json and report.json inside them
    too, and S3Proxy took 5-11 s to answer each such name (s3fs retrying its errors): the index took 63 s on the e2e
    bed's store (fresh clone at 936e09e). Here on fsspec's memory store, every path the filesystem is asked about is
    recorded: none lies below a file, and the runs are the ones a local copy lists."""
    import shutil
    import uuid

    from fsspec.implementations.memory import MemoryFileSystem

    from mm2_failover.adapters import store

    local = tmp_path / "artifacts"
    _write_failover(local, "manual__2026-11-23T08:00:00+00:00", "orders")
    _write_drill(local, "scheduled__2026-11-01", "2026-11-01T03:00:05+00:00", 80, 12.5)
    (local / "mm2_failover_readiness").mkdir()
    (local / "mm2_failover_readiness" / "latest.json").write_text("{}")
    (local / "mm2_failover_readiness" / "history.jsonl").write_text("{}\n")
    (local / "archive").mkdir()
    (local / "archive" / "scheduled-archive.json").write_text("{}")
    remote = store.as_path(f"memory://ui-{uuid.uuid4().hex[:8]}/artifacts")
    store.upload_tree(local, remote)
    files = {p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file()}

    asked: list[str] = []
    for name in ("info", "exists", "isfile", "isdir", "ls", "find"):
        real = getattr(MemoryFileSystem, name)

        def spy(self, path, *a, _real=real, **k):
            asked.append(self._strip_protocol(path))
            return _real(self, path, *a, **k)

        monkeypatch.setattr(MemoryFileSystem, name, spy)
    got = runs.scan_runs(remote, {}, 100)
    below_a_file = [p for p in asked if any(p.startswith(f"{remote.path}/{f}/") for f in files)]
    assert not below_a_file, below_a_file
    want = runs.scan_runs(shutil.copytree(local, tmp_path / "copy"), {}, 100)
    assert sorted((r["dag_id"], r["folder"], r["outcome"]) for r in got) == sorted(
        (r["dag_id"], r["folder"], r["outcome"]) for r in want
    )
    assert len(got) == 2
