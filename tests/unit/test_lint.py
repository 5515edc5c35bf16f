"""The linter runs with the suite (issue 51): ruff over the whole tree with the project's rules (pyproject.toml,
``[tool.ruff]``: pyflakes, blind excepts, bugbear, the import order) and its formatter, so that `make test` - and
CI - fails on what they find, and every blind ``except`` says why. `make lint` runs both before the suite."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing():
    r = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--output-format", "concise", "--no-cache", str(REPO)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, f"ruff (pyproject.toml's rules) found:\n{r.stdout[-4000:]}{r.stderr[-2000:]}"


def test_ruff_format_would_change_nothing():
    """The formatter's style (issue 51): ``ruff format --check`` over the whole tree; ``ruff format .`` fixes it."""
    r = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", str(REPO)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, f"ruff format would change (run `ruff format .`):\n{r.stdout[-4000:]}{r.stderr[-2000:]}"


def test_every_blind_except_says_why():
    """Every BLE001 exemption (an ``except Exception`` on purpose) carries its reason after a dash."""
    bare = []
    for d in ("plugins", "dags", "spark_jobs", "testbed", "bench", "tests", "scripts"):
        for f in sorted((REPO / d).rglob("*.py")):
            for n, line in enumerate(f.read_text().splitlines(), 1):
                if "noqa: BLE001" in line and not re.search(r"noqa: BLE001 - \S", line):
                    bare.append(f"{f.relative_to(REPO)}:{n}")
    assert not bare, bare
