"""Outputs a killed process may have left half-written are never read (issue 18, fault drill 2): the Spark job's
answers count only once its summary - written last, atomically - says so. Pure rules on a run folder, no cluster."""

from __future__ import annotations

import pytest

from mm2_failover.adapters.runfolder import RunFolder, RunFolderError
from mm2_failover.rules.checkpoints import Checkpoint
from mm2_failover.rules.run_params import RunParams
from mm2_failover.stages.compute_checkpoints import selected_checkpoint_groups, selected_checkpoints
from mm2_failover.stages.context import RunContext
from testbed.scenario import write_latest

CONFS = {"target": {"bootstrap.servers": "127.0.0.1:9"}, "source": {"bootstrap.servers": "127.0.0.1:9"}}


def ctx_with_answers(tmp_path) -> RunContext:
    folder = RunFolder(tmp_path / "run")
    write_latest(folder, [Checkpoint("orders-app", "primary.orders", 0, 40, 39, "")])
    return RunContext.from_cli(RunParams(groups_regex="orders-app"), folder.dir, CONFS, 1.0)


def test_answers_with_their_summary_are_read(tmp_path):
    ctx = ctx_with_answers(tmp_path)
    assert [(c.group, c.downstream_offset) for c in selected_checkpoints(ctx)] == [("orders-app", 39)]


@pytest.mark.parametrize("read", [selected_checkpoints, selected_checkpoint_groups])
def test_answers_without_the_jobs_summary_are_refused_naming_the_folder_and_what_to_do(tmp_path, read):
    ctx = ctx_with_answers(tmp_path)
    ctx.folder.checkpoints_summary.unlink()  # the job was killed after writing answers, before its summary
    with pytest.raises(RunFolderError) as e:
        read(ctx)
    msg = str(e.value)
    assert str(ctx.folder.checkpoints) in msg and "did not finish" in msg and "compute_latest_checkpoints" in msg


def test_the_gates_groups_are_the_groups_of_the_selected_checkpoints(tmp_path):
    """The gate reads only the answers' names (selected_checkpoint_groups): the same groups as the plan's
    checkpoints - selected by the regex, of the run's aliases only, each once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = RunFolder(tmp_path / "run")
    write_latest(
        folder,
        [
            Checkpoint(g, "primary.orders", p, 40, 39, "")
            for g in ("orders-app", "orders-b", "billing")
            for p in range(3)
        ],
    )
    t = pq.read_table(folder.checkpoints / "part-0.parquet")
    dc2 = t.set_column(0, "source_alias", pa.array(["dc2"] * t.num_rows, pa.string()))
    dc2 = dc2.set_column(
        1, "group", pa.array([g.replace("orders-b", "orders-dc2") for g in t.column("group").to_pylist()])
    )
    pq.write_table(pa.concat_tables([t, dc2]), folder.checkpoints / "part-0.parquet")  # an alias the run does not move
    for regex in ("orders-.*", "billing|orders-app", "nothing"):
        ctx = RunContext.from_cli(RunParams(groups_regex=regex), folder.dir, CONFS, 1.0)
        assert selected_checkpoint_groups(ctx) == {c.group for c in selected_checkpoints(ctx)}
    ctx = RunContext.from_cli(RunParams(groups_regex="orders-.*"), folder.dir, CONFS, 1.0)
    assert ctx.aliases == ["primary"] and selected_checkpoint_groups(ctx) == {"orders-app", "orders-b"}


def test_every_job_submission_first_deletes_the_old_summary_so_a_killed_rerun_is_never_vouched_for(tmp_path):
    """A rerun killed while rewriting the answers must not leave the previous run's summary beside them."""
    from types import SimpleNamespace

    from mm2_failover.adapters.spark import job_submission

    ctx = ctx_with_answers(tmp_path)
    assert ctx.folder.checkpoints_summary.exists()
    snap = SimpleNamespace(
        checkpoints_topics={"primary": "primary.checkpoints.internal"},
        checkpoints_end={("primary.checkpoints.internal", 0): 5},
        checkpoints_start={("primary.checkpoints.internal", 0): 0},
    )
    sub = job_submission(ctx.params, ctx.folder, snap, CONFS["target"])
    try:
        assert not ctx.folder.checkpoints_summary.exists()
        with pytest.raises(RunFolderError, match="did not finish"):
            selected_checkpoints(ctx)
    finally:
        sub.cleanup()
