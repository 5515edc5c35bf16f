"""Every picture of the report pages (issue 53 item 5) on a real page in a real browser: the reports server
(``mm2_failover.ui.app``'s app, served by uvicorn on loopback, as ``python -m mm2_failover.ui.app`` serves it) over
an artifacts folder holding what the pipeline's own code writes - a failover's report whose groups re-read (MM2's
checkpoints behind the groups' source commits), three drills and two readiness intervals - read in headless
Chromium. The pictures a failover on the bed draws (its timeline from Airflow's own task tries included) are seen in
tests/e2e/test_ui.py; this module covers the ones that bed's run cannot show (a run whose groups re-read, the drill
trend) in seconds, without a bed."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from mm2_failover.rules.plan import COMMIT, Plan, PlanRow
from mm2_failover.rules.report import build_report, render_markdown, run_summary
from testbed.bed import free_port
from testbed.browser import chromium, keep_for_docs, picture_shown

pytestmark = [pytest.mark.ui, pytest.mark.timeout(180)]

GROUPS = 18


def failover_report(root: Path) -> str:
    """A failover whose groups resumed at MM2's checkpoints, each behind its source commit by a different amount."""
    rows = [
        PlanRow(
            "primary",
            f"orders-{i:02d}",
            "primary.orders",
            p,
            1000 + 40 * i,
            900 + p,
            None,
            900 + p,
            COMMIT,
            log_start=100 * p,
            log_end=2000 + 10 * i,
        )
        for i in range(GROUPS)
        for p in range(2)
    ]
    commits = {(r.group, r.topic, r.partition): r.upstream_offset for r in rows}
    rep = build_report(
        dag_id="mm2_failover",
        run_id="manual__pictures",
        params={},
        plan=Plan(rows),
        committed={r.group: {(r.topic, r.partition): r.planned_offset for r in rows} for r in rows},
        log_end={(r.topic, r.partition): r.log_end for r in rows},
        mismatches=[],
        source_commits=commits,
    )
    d = root / "mm2_failover" / "manual__pictures"
    d.mkdir(parents=True)
    (d / "report.json").write_text(json.dumps(rep.as_dict()))
    (d / "report.md").write_text(render_markdown(rep))
    (d / "summary.json").write_text(
        json.dumps(
            run_summary("mm2_failover", "manual__pictures", rep.as_dict(), None, datetime.now(timezone.utc).isoformat())
        )
    )
    top = max(rep.groups, key=lambda g: g["reread_estimate"] or 0)
    return f"{top['reread_estimate']:,}"


def drills(root: Path) -> None:
    for k, (reread, age) in enumerate(((120, 30.0), (80, 12.5), (95, 20.0))):
        run_id = f"scheduled__2026-{9 + k:02d}-01"
        d = root / "mm2_failover_drill" / run_id
        d.mkdir(parents=True)
        totals = {
            "groups_covered": 2,
            "groups_without_checkpoints": 0,
            "partitions_without_checkpoints": k,
            "checkpoint_age_max_seconds": age,
            "replication_lag_max_records": 3 * k,
            "records_reread_estimate": reread,
            "partitions_clamped": 0,
            "records_lost_to_retention": 0,
            "live_groups_on_target": 0,
            "findings": 1,
        }
        drill = {
            "kind": "drill",
            "dag_id": "mm2_failover_drill",
            "run_id": run_id,
            "captured_at": f"{run_id[11:]}",
            "source_alias": "primary",
            "totals": totals,
            "findings": ["f"],
            "groups": [],
            "reread": [],
            "replication_lag": [],
            "writes": {"prefix": ""},
        }
        (d / "drill.json").write_text(json.dumps(drill))
        (d / "summary.json").write_text(
            json.dumps(run_summary("mm2_failover_drill", run_id, None, drill, f"2026-{9 + k:02d}-01T03:00:05+00:00"))
        )


def readiness(root: Path) -> None:
    from mm2_failover.adapters.runfolder import RunFolder
    from mm2_failover.rules import readiness as rd
    from mm2_failover.stages import assess_readiness as stage

    now = int(time.time() * 1000)
    rows = [
        {
            "group": f"orders-{i:02d}",
            "topic": "primary.orders",
            "partition": 0,
            "planned_offset": 5,
            "action": "commit",
            "rule": "exact_sync" if i % 3 else "checkpoint",
            "reason": "",
        }
        for i in range(6)
    ]
    drains = [
        {
            "alias": "primary",
            "topic": "orders",
            "partition": 0,
            "replica_topic": "primary.orders",
            "source_end": 100,
            "replicated": 89,
            "replica_end": 90,
            "state": "replication behind",
        }
    ]
    base = root / "mm2_failover_readiness"
    for k, run_id in enumerate(("scheduled__1", "scheduled__2")):
        r = rd.assess(
            run_id=run_id,
            now_ms=now,
            rpo_seconds=60,
            plan_rows=rows,
            reread=[],
            drain_rows=drains,
            oldest_unreplicated_ms={("primary.orders", 0): now - 45_000 * (k + 1)},
            checkpoint_ms={},
            archive_updated={"primary": None},
            findings=[],
        )
        RunFolder(base / run_id).save_readiness(r)
        stage.append_history(rd.history_line(r), base)
    (base / "latest.json").write_text(json.dumps({"folder": "scheduled__2", "run_id": "scheduled__2"}))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The reports server on loopback over a folder of reports (no login: the stand-alone server's)."""
    import uvicorn

    from mm2_failover.ui.app import create_app

    root = tmp_path_factory.mktemp("artifacts")
    top = failover_report(root)
    drills(root)
    readiness(root)
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app(root), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the reports server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", top, root
    srv.should_exit = True
    thread.join(10)


def test_every_picture_is_drawn_on_its_page_in_the_browser_and_follows_the_dark_theme(server, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    base, top, _root = server
    shots = tmp_path / "screenshots"
    with sync_playwright() as p:
        browser = chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{base}/runs/mm2_failover/manual__pictures")
            expect(page.locator("h1")).to_contain_text("Failover report")
            expect(picture_shown(page, "answer-mix", shots)).to_contain_text(
                f"How each partition resumes ({2 * GROUPS} partition(s))"
            )
            reread = picture_shown(page, "reread-groups", shots)
            expect(reread).to_contain_text(f"The groups with the most re-read (top 15 of {GROUPS})")
            expect(reread).to_contain_text("orders-17")  # the most re-read, with the report's own figure
            expect(reread).to_contain_text(top)
            positions = picture_shown(page, "resume-positions", shots)  # the report's worst first, planned offsets said
            expect(positions).to_contain_text("planned 900, checkpoint 900")
            page.screenshot(path=str(shots / "run-page.png"), full_page=True)

            page.goto(f"{base}/drills")
            trends = page.locator("figure[data-picture=trend]")
            expect(trends).to_have_count(5)
            expect(picture_shown(page, "trend", shots)).to_contain_text("Estimated re-read")
            expect(trends.first).to_contain_text("95")  # the newest drill's figure, beside its point

            page.goto(f"{base}/readiness")
            expect(picture_shown(page, "exposure", shots)).to_contain_text("6 of 6 group(s) known, 6 over the RPO")
            expect(picture_shown(page, "interval-strip", shots)).to_contain_text("The last 24 hours: 2 interval(s)")

            # the ink of every picture is the page's text colour: dark text on the light theme, light on the dark
            colour = "e => getComputedStyle(e).color"
            assert page.locator("figure[data-picture=exposure]").evaluate(colour) == "rgb(29, 41, 57)"
            page.emulate_media(color_scheme="dark")
            assert page.locator("figure[data-picture=exposure]").evaluate(colour) == "rgb(228, 231, 236)"
            assert (
                page.locator("figure[data-picture=exposure] svg text").first.evaluate("e => getComputedStyle(e).fill")
                == "rgb(228, 231, 236)"
            )
            page.screenshot(path=str(shots / "readiness-dark.png"), full_page=True)
        finally:
            browser.close()
    for s in sorted(shots.glob("*.png")):
        assert s.stat().st_size > 3_000, f"{s} looks empty"
    keep_for_docs(
        shots, {"picture-reread-groups.png": "picture-reread-groups.png", "picture-trend.png": "picture-trend.png"}
    )
