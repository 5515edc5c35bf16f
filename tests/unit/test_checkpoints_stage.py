"""Stage 3's one route (stages/compute_checkpoints.compute), the CLI's and the operator's: how the Spark job's exit is
decided, and when a finished run's answers are kept. The job and its submission are stand-ins (the classification is
the logic here; the real job on both routes: tests/integration/test_latest_checkpoints_job.py, test_cli_end_to_end.py,
test_worst_day.py's quarantine, the e2e run)."""

from __future__ import annotations

import contextlib
import json
import types

import pytest

from mm2_failover.adapters.runfolder import RunFolder
from mm2_failover.rules.run_params import RunParams
from mm2_failover.stages import compute_checkpoints as stage
from mm2_failover.stages import outcomes
from mm2_failover.stages.errors import ConfigurationError, JobFailed, JobUnreachable, QuarantineRefused


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    folder = RunFolder(tmp_path / "run")
    folder.dir.mkdir(parents=True)
    published = []

    @contextlib.contextmanager
    def submission(params, f, snap, conf):
        f.checkpoints_summary.unlink(missing_ok=True)  # as the real one: an old summary never vouches for a new try
        sub = types.SimpleNamespace(publish=lambda: published.append(1))
        yield sub

    monkeypatch.setattr("mm2_failover.adapters.spark.job_submission", submission)
    monkeypatch.setattr(RunFolder, "load_snapshot", lambda self: None)
    c = types.SimpleNamespace(
        folder=folder,
        params=RunParams(max_quarantined_records=2),
        target=types.SimpleNamespace(conf={"bootstrap.servers": "b:9092"}),
    )
    c.published = published
    return c


def summary(folder: RunFolder, quarantined: int = 0):
    folder.checkpoints.mkdir(parents=True, exist_ok=True)
    folder.checkpoints_summary.write_text(
        json.dumps(
            {
                "records_read": 10,
                "checkpoints": 3,
                "groups": 1,
                "tombstones": 0,
                "quarantined": quarantined,
                "quarantined_by_reason": {"bad_value": quarantined} if quarantined else {},
                "quarantine_output": "/q",
            }
        )
    )


def test_a_job_that_ends_well_gives_its_summary_and_a_finished_run_is_kept_only_where_asked(ctx):
    ran = []
    got = stage.compute(ctx, lambda sub: ran.append(1) or summary(ctx.folder) or 0)
    assert got["checkpoints"] == 3 and ran == [1]
    stage.compute(ctx, lambda sub: ran.append(2) or 0, reuse=True)  # the CLI continuing the run: kept
    assert ran == [1]
    stage.compute(ctx, lambda sub: ran.append(3) or summary(ctx.folder) or 0)  # a task's retry: run again
    assert ran == [1, 3]


@pytest.mark.parametrize(
    "rc, error, outcome",
    [
        (2, ConfigurationError, outcomes.USAGE),
        (4, JobUnreachable, outcomes.UNREACHABLE),
        (1, JobFailed, outcomes.FAILED),
        (137, JobFailed, outcomes.FAILED),
        (5, None, None),
    ],
)
def test_each_failing_exit_is_one_error_the_outcome_table_decides(ctx, rc, error, outcome):
    from mm2_failover.rules.plan import PlanError

    with pytest.raises(error or PlanError) as e:
        stage.compute(ctx, lambda sub: rc, said=["latest_checkpoints: the reason"])
    assert outcomes.outcome_of(e.value) is (outcome or outcomes.REFUSED)
    assert f"exit code {rc}" in str(e.value) and "latest_checkpoints: the reason" in str(e.value)
    assert ctx.published == [1]  # a failed job's summary published before it is read (a run folder in a store)


def test_too_many_unusable_records_is_the_plans_quarantine_refusal_whatever_the_exit(ctx):
    with pytest.raises(
        QuarantineRefused, match=r"5 checkpoint record\(s\) are not usable .* max_quarantined_records=2"
    ):
        stage.compute(ctx, lambda sub: summary(ctx.folder, quarantined=5) or 3)
    assert outcomes.outcome_of(QuarantineRefused("x")) is outcomes.REFUSED
    with pytest.raises(QuarantineRefused, match="more unusable records than max_quarantined_records=2"):
        stage.compute(ctx, lambda sub: 3)  # exit 3 with no summary at all
