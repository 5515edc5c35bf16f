"""The DR drill's pure parts (write gate, re-read estimate, checkpoint age, lag, findings) and its apply step
with a fake target: nothing is ever written unless a non-empty prefix allows it, and then only those groups."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from mm2_failover.adapters.kafka.groups import GroupState, Member
from mm2_failover.rules import drill
from mm2_failover.rules.plan import Plan
from mm2_failover.rules.values import Commit
from testbed.plan_rows import rows

REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------ the write gate


@pytest.mark.parametrize("prefix", ["", None, "   ", "\t"])
def test_no_prefix_means_nothing_is_writable(prefix):
    assert drill.writable_plan(Plan(rows()), prefix).rows == []


def test_prefix_selects_only_groups_starting_with_it():
    sub = drill.writable_plan(Plan(rows()), "drill-")
    assert sub.groups() == ["drill-a"] and sub.writes() == {"drill-a": {("primary.t", 0): 40, ("primary.t", 1): 1}}
    # a prefix is literal, not a regex; and it is a prefix, not a substring
    assert drill.writable_plan(Plan(rows()), ".*").rows == []
    assert drill.writable_plan(Plan(rows()), "rders").rows == []
    assert drill.writable_plan(Plan(rows()), "drill").groups() == ["drill-a", "drilling"]


def test_prefix_must_be_a_string():
    with pytest.raises(ValueError):
        drill.normalize_prefix(["drill-"])


# ------------------------------------------------------------------------------------------ estimates


def test_checkpoint_ages_accept_datetimes_naive_or_aware_and_epoch_ms():
    cap = "2026-11-23T10:00:00.000+00:00"
    ages = drill.checkpoint_ages(
        [
            {"group": "g", "topic": "t", "partition": 0, "checkpoint_timestamp": datetime(2026, 11, 23, 9, 59, 30)},
            {
                "group": "g",
                "topic": "t",
                "partition": 1,
                "checkpoint_timestamp": datetime(2026, 11, 23, 8, 0, tzinfo=timezone.utc),
            },
            {"group": "g", "topic": "t", "partition": 2, "checkpoint_timestamp": 1795427940000},  # 09:59:00Z
            {"group": "g", "topic": "t", "partition": 3, "checkpoint_timestamp": None},
        ],
        cap,
    )
    assert [a["age_seconds"] for a in ages] == [30.0, 7200.0, 60.0, None]


def test_replication_lag_from_a_drain_observation():
    lag = drill.replication_lag(
        [
            {
                "topic": "t",
                "partition": 0,
                "replica_topic": "primary.t",
                "source_end": 100,
                "moved": 4,
                "replicated": 89,
                "replica_end": 95,
                "state": "producers still writing",
            },
            {
                "topic": "t",
                "partition": 1,
                "replica_topic": "primary.t",
                "source_end": 50,
                "moved": 0,
                "replicated": None,
                "replica_end": 50,
                "state": "drained",
            },
        ]
    )
    assert [(x["lag_records"], x["mm2_progress_lag"], x["producers_active"]) for x in lag] == [
        (5, 10, True),
        (0, None, False),
    ]


def test_partitions_without_checkpoints_include_source_commits_never_checkpointed():
    plan_rows = [r.as_dict() for r in rows()]
    src = {
        ("drill-a", "primary.t", 0): 45,
        ("drill-a", "primary.t", 3): 7,
        ("drill-a", "primary.v", 0): 1,
        ("unknown", "primary.t", 0): 1,
    }
    missing = drill.partitions_without_checkpoints(plan_rows, src)
    assert [(m["group"], m["topic"], m["partition"]) for m in missing] == [
        ("drill-a", "primary.t", 2),
        ("drill-a", "primary.t", 3),
        ("drill-a", "primary.v", 0),
    ]


def test_build_drill_report_totals_findings_and_markdown():
    plan_rows = [r.as_dict() for r in rows()]
    snap = {
        "captured_at": "2026-11-23T10:00:00+00:00",
        "checkpoints_topics": {"primary": "primary.checkpoints.internal"},
    }
    src = {
        ("drill-a", "primary.t", 0): 45,
        ("drill-a", "primary.t", 1): 50,
        ("orders", "primary.u", 0): 10,
        ("lost-group", "primary.t", 0): 3,
    }
    cps = [
        {
            "group": r.group,
            "topic": r.topic,
            "partition": r.partition,
            "checkpoint_timestamp": datetime(2026, 11, 23, 9, 58, tzinfo=timezone.utc),
        }
        for r in rows()
        if r.upstream_offset is not None
    ]
    d = drill.build_drill_report(
        dag_id="mm2_failover_drill",
        run_id="scheduled__x",
        params={"groups_regex": ".*"},
        snapshot=snap,
        plan_rows=plan_rows,
        checkpoints=cps,
        drain_rows=[
            {
                "topic": "t",
                "partition": 0,
                "replica_topic": "primary.t",
                "source_end": 100,
                "moved": 3,
                "replicated": 96,
                "replica_end": 97,
                "state": "producers still writing",
            }
        ],
        live_target_groups=["orders"],
        source_commits=src,
        selected_source_groups=["drill-a", "lost-group", "orders"],
        plan_refusal=None,
        writes={"prefix": "", "applied": {}},
    )
    t = d.totals
    assert t["groups_covered"] == 3 and t["groups_without_checkpoints"] == 1
    assert t["partitions_without_checkpoints"] == 1
    assert t["checkpoint_age_max_seconds"] == 120.0
    assert t["replication_lag_max_records"] == 3
    assert t["records_reread_estimate"] == 5 + 49  # drill-a p0 behind commit, p1 translation slack
    assert t["partitions_clamped"] == 1 and t["records_lost_to_retention"] == 7
    assert t["live_groups_on_target"] == 1 and t["findings"] == len(d.findings)
    text = " | ".join(d.findings)
    for needle in (
        "lost-group",
        "no checkpoint",
        "oldest checkpoint",
        "replication lag",
        "re-read",
        "clamped",
        "live members on the TARGET",
    ):
        assert needle in text, needle
    g = {x["group"]: x for x in d.groups}
    assert g["drill-a"]["reread_estimate"] == 54 and g["drill-a"]["without_checkpoint"] == 1
    assert g["orders"]["live_on_target"] and g["orders"]["retention_lost"] == 7
    md = drill.render_drill_markdown(d)
    assert md.startswith("# mm2-failover DR drill") and "| drill-a | 3 | 1 |" in md
    json.dumps(d.as_dict())  # plain data


# ------------------------------------------------------------------------------------------ the apply step


class FakeTarget:
    """The few Cluster methods the drill's apply step uses, in memory (the step is tested on the real bed too)."""

    conf = {"bootstrap.servers": "fake:9092"}

    def __init__(self, live=()):
        self.live = set(live)
        self.commits: dict[str, dict] = {}
        self.altered: list[str] = []

    def cluster_id(self):
        return "fake-cluster"

    def commits_many(self, groups, window=32):
        return {
            g: {tp: c if isinstance(c, Commit) else Commit(c) for tp, c in self.commits.get(g, {}).items()}
            for g in groups
        }

    def group_states(self):  # a listing that proves nothing: every group is described
        return {}

    def describe_groups(self, groups):
        return {
            g: GroupState(g, "STABLE", [Member("m", "c", "h")]) if g in self.live else GroupState(g, "UNKNOWN")
            for g in groups
        }

    def offsets(self, tps, spec="latest"):
        return {tp: (0 if spec == "earliest" else 100) for tp in tps}

    def alter_many(self, offsets, window=32):
        for g, o in offsets.items():
            self.altered.append(g)
            self.commits.setdefault(g, {}).update({tp: c.offset for tp, c in o.items()})
        return {g: None for g in offsets}


@pytest.fixture
def drill_run(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mm2_failover.adapters import config
    from mm2_failover.adapters.runfolder import RunFolder, Snapshot, SourceState
    from mm2_failover.rules.run_params import RunParams
    from mm2_failover.stages import drill_report as drill_stage
    from mm2_failover.stages.context import RunContext

    monkeypatch.setenv("MM2_FAILOVER_ARTIFACTS", str(tmp_path))
    folder = RunFolder(config.run_dir("mm2_failover_drill", "manual__1"))
    folder.checkpoints.mkdir(parents=True)
    cps = [("drill-a", 0, 40, 40), ("drill-a", 1, 50, 1), ("orders", 0, 30, 30), ("drill-live", 0, 5, 5)]
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "source_alias": "primary",
                    "group": g,
                    "topic": "primary.t",
                    "partition": p,
                    "upstream_offset": u,
                    "downstream_offset": d,
                    "metadata": "",
                    "checkpoint_timestamp": datetime(2026, 11, 23, 9, 0),
                }
                for g, p, u, d in cps
            ]
        ),
        str(folder.checkpoints / "part-0.parquet"),
    )
    folder.save(
        "latest_checkpoints.summary.json", {"output": str(folder.checkpoints), "quarantined": 0}
    )  # the job's, last
    t, cp = "primary.t", "primary.checkpoints.internal"
    folder.save_snapshot(
        Snapshot(
            "2026-11-23T10:00:00+00:00",
            {"primary": cp},
            {(cp, 0): 4},
            {(cp, 0): 0},
            {t: 2},
            {(t, 0): 0, (t, 1): 0},
            {(t, 0): 100, (t, 1): 100},
            {"primary": SourceState("primary", False)},
            "fake-cluster",
        )
    )
    target = FakeTarget(live=["drill-live"])

    def ctx_of(**params):
        return RunContext(
            RunParams.from_mapping({"groups_regex": ".*", **params}),
            folder,
            "mm2_failover_drill",
            "manual__1",
            lambda conn, role, timeout: target,
        )

    def run(**params):
        return drill_stage.drill_plan(ctx_of(**params), params.get("allow_drill_writes_for_prefix"))

    def report(**params):
        drill_stage.drill_report(ctx_of(**params))
        return folder.load_drill()  # the file, read back through its type

    return SimpleNamespace(art=folder, target=target, run=run, report=report)


def test_drill_apply_without_prefix_writes_nothing(drill_run):
    out = drill_run.run()
    assert drill_run.target.altered == [] and out["groups_written"] == []
    assert drill_run.art.plan_json.exists() and not drill_run.art.backup.exists()
    w = json.loads((drill_run.art.dir / "drill_writes.json").read_text())
    assert w["prefix"] == "" and w["applied"] == {}


def test_drill_apply_with_prefix_writes_only_those_groups_after_a_backup(drill_run):
    out = drill_run.run(allow_drill_writes_for_prefix="drill-")
    assert drill_run.target.altered == ["drill-a"]  # not 'orders', not the live 'drill-live'
    assert drill_run.target.commits == {"drill-a": {("primary.t", 0): 40, ("primary.t", 1): 1}}
    assert out["groups_written"] == ["drill-a"]
    backup = json.loads(drill_run.art.backup.read_text())
    assert set(backup["groups"]) == {"drill-a"}
    assert backup["groups"]["drill-a"]["primary.t"]["0"] == {"before": None, "after": {"offset": 40, "metadata": ""}}
    w = json.loads((drill_run.art.dir / "drill_writes.json").read_text())
    assert w["skipped_live"] == ["drill-live"] and w["mismatches"] == []


def test_drill_apply_records_a_plan_refusal_instead_of_failing(drill_run):
    drill_run.target.commits = {"orders": {("primary.t", 0): 3}}  # different commits already on the target
    out = drill_run.run()
    assert out["refused_plan"] is True and drill_run.target.altered == []
    refusal = json.loads((drill_run.art.dir / "plan_refusal.json").read_text())["refusal"]
    assert "orders" in refusal


def test_the_drill_report_names_the_source_alias_of_the_run(drill_run):
    """Issue 32: the report read snapshot.get("source_alias"), which a snapshot never holds: the drill report and its
    page showed an empty alias (the unit test of the pure function passed on a hand-made dict)."""
    drill_run.run()
    d = drill_run.report(source_alias="primary")
    assert d.source_alias == "primary"
    assert "source alias primary." in (drill_run.art.dir / "drill.md").read_text()


# ------------------------------------------------------------------------------------------ the DAG


def test_drill_dag_is_paused_scheduled_and_reuses_the_pipeline():
    from airflow.dag_processing.dagbag import DagBag

    from mm2_failover.operators.checkpoint_job import LatestCheckpointsOperator
    from mm2_failover.sensors.groups_empty import GroupsEmptySensor

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    dag = bag.dags["mm2_failover_drill"]
    assert dag.is_paused_upon_creation is True
    assert dag.schedule == "0 3 1 * *"
    order = [
        "preflight_audit",
        "measure_replication_lag",
        "capture_end_offsets",
        "compute_latest_checkpoints",
        "check_groups_empty",
        "plan_group_offsets",
        "drill_report",
    ]
    assert sorted(dag.task_ids) == sorted(order)
    for up, down in zip(order, order[1:]):
        assert dag.get_task(down).upstream_task_ids == {up}
    assert isinstance(dag.get_task("compute_latest_checkpoints"), LatestCheckpointsOperator)
    gate = dag.get_task("check_groups_empty")
    assert isinstance(gate, GroupsEmptySensor) and gate.soft_fail and gate.mode == "reschedule"
    assert all(dag.get_task(t).retries > 0 for t in order)
    assert "dry_run" not in dag.params and dag.params["allow_drill_writes_for_prefix"] is None
    assert dag.params["source_groups_must_be_empty"] is False
    for name in dag.params:
        p = dag.params.get_param(name)
        assert p.schema.get("title") and p.description, name
