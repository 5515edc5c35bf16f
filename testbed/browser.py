"""The browser tests' shared parts: Debian's Chromium driven by Playwright, a page's picture seen in it, and the
screenshots the docs show (tests/e2e/)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-dev-shm-usage",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: with this set (make screenshots), the screenshots the docs show are copied there under the docs' names
DOCS_SCREENSHOTS = "MM2_FAILOVER_DOCS_SCREENSHOTS"


def chromium(p):
    """Headless Chromium (``p``: a started ``sync_playwright``). A missing Chromium fails the test, never skips it."""
    import pytest
    from playwright.sync_api import expect

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"{CHROMIUM} is missing: install it (scripts/setup.sh does, as root: apt-get install chromium "
            "chromium-driver)"
        )
    # Playwright waits 5 s for an element by default; a fresh-clone run's DAG grid (Airflow's React UI, rendered in
    # Chromium beside three workers' beds on 2 cores) had not shown its tasks after 5 s. What is expected is unchanged
    expect.set_options(timeout=30_000)
    return p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


def picture_shown(page, name: str, shots: Path):
    """The page's picture ``name`` (mm2_failover.pictures), seen in the browser: a drawn SVG of a readable size with
    no script; its own screenshot kept as ``picture-<name>.png``. Returns its locator."""
    from playwright.sync_api import expect

    fig = page.locator(f"figure[data-picture={name}]").first
    expect(fig.locator("svg")).to_be_visible()
    box = fig.locator("svg").bounding_box()
    assert box and box["width"] > 200 and box["height"] > 60, (name, box)
    assert fig.locator("script").count() == 0
    shots.mkdir(parents=True, exist_ok=True)
    fig.screenshot(path=str(shots / f"picture-{name}.png"))
    return fig


def keep_for_docs(shots: Path, names: dict[str, str]) -> None:
    """Copy the screenshots ``names`` maps (found under ``shots``) to the docs' folder under the docs' names, when
    :data:`DOCS_SCREENSHOTS` is set; otherwise they stay in the test's run folder only."""
    dest = os.environ.get(DOCS_SCREENSHOTS)
    if not dest:
        return
    Path(dest).mkdir(parents=True, exist_ok=True)
    for src, name in names.items():
        found = sorted(shots.rglob(src))
        if found:
            shutil.copyfile(found[0], Path(dest) / name)
            print(f"[ui] kept for the docs: {Path(dest) / name}")
