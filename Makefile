# The two commands: `make demo` (set up + run the pipeline end to end on the local bed) and `make test`
# (set up + run the whole test suite; .ci/run calls it).
SHELL := /bin/bash
export PYTHONPATH := $(CURDIR)/plugins:$(CURDIR)
PY := $(CURDIR)/.venv/bin/python
SPARK ?= connect
SECURED ?=

.PHONY: setup demo demo-failback ui test test-unit test-fast lint bench bed clean wheel lock-runtime reference screenshots

setup:
	@scripts/setup.sh

demo: setup
	$(PY) -m testbed.demo --spark $(SPARK) $(if $(SECURED),--secured)

# a real Airflow on the bed in your browser: a failover waiting for your approval; Ctrl-C stops it (UI_ARGS=--check:
# exit once it waits)
ui: setup
	$(PY) -m testbed.ui_stack $(UI_ARGS)

# fail over -> consume on backup -> fail back, through the DAG (issue 19)
demo-failback: setup
	$(PY) -m testbed.demo_failback

# the whole suite, its files spread over TEST_WORKERS processes (pytest-xdist; each worker its own bed:
# tests/conftest.py); TEST_WORKERS=0 runs it in this process alone
TEST_WORKERS ?= 3
test: setup lint
	$(PY) -m pytest $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)

test-unit: setup
	$(PY) -m pytest tests/unit

# the browser tests, keeping the screenshots the docs show in docs/screenshots (docs/runbook.md "What you see, step by
# step")
screenshots: setup
	MM2_FAILOVER_DOCS_SCREENSHOTS=$(CURDIR)/docs/screenshots $(PY) -m pytest tests/e2e

# the edit loop: unit and pure property tests (the whole proof path included), about a minute; no bed, no Spark
test-fast: setup
	$(PY) -m pytest tests/unit -q

# the linter alone (tests/unit/test_lint.py runs it in the suite too): rules in pyproject.toml, [tool.ruff]
lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# the generated reference pages (docs/reference/): from their one definition; a unit test fails when they differ
reference: setup
	$(PY) -c "from mm2_failover.rules.run_params import parameters_markdown as m; open('docs/reference/parameters.md', 'w').write(m())"
	$(PY) -c "from mm2_failover.adapters.config import settings_markdown as m; open('docs/reference/settings.md', 'w').write(m())"

bed: setup
	$(PY) -m testbed.bed

# the installable package (pyproject.toml): dist/mm2_failover-<version>-py3-none-any.whl
wheel: setup
	.cache/bootstrap/bin/uv build --wheel --out-dir dist .

# requirements-runtime.txt: requirements.txt's pins without the tests' tools (what the image installs)
lock-runtime: setup
	grep -E '^[A-Za-z0-9_.-]+==' requirements.txt | sed 's/ \\$$//' > .cache/pins.txt
	.cache/bootstrap/bin/uv pip compile -q --python-version 3.11 --generate-hashes --all-extras pyproject.toml -c .cache/pins.txt \
		-o .cache/requirements-runtime.txt
	{ sed -n '1,/^# (make lock-runtime)/p' requirements-runtime.txt; cat .cache/requirements-runtime.txt; } > requirements-runtime.txt.new
	mv requirements-runtime.txt.new requirements-runtime.txt

clean:
	rm -rf var .pytest_cache dist
