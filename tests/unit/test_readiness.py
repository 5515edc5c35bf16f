"""mm2_failover.rules.readiness, rule by rule (the module docstring numbers them), and the stage's history file."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mm2_failover.rules import readiness as r

NOW = 1_800_000_000_000  # epoch ms


def row(group="g", topic="primary.t", partition=0, planned=10, rule="checkpoint", action="commit", reason=""):
    return {
        "group": group,
        "topic": topic,
        "partition": partition,
        "planned_offset": planned,
        "rule": rule,
        "action": action,
        "reason": reason,
    }


def drain(partition=0, source_end=100, replicated=99, replica_end=100, state="drained", alias="primary"):
    return {
        "alias": alias,
        "topic": "t",
        "partition": partition,
        "replica_topic": "primary.t",
        "source_end": source_end,
        "replicated": replicated,
        "replica_end": replica_end,
        "state": state,
    }


def assess(rows, drains=(), oldest=None, cps=None, archive=None, findings=(), rpo=60, reread=()):
    return r.assess(
        run_id="run",
        now_ms=NOW,
        rpo_seconds=rpo,
        plan_rows=rows,
        reread=list(reread),
        drain_rows=list(drains),
        oldest_unreplicated_ms=oldest or {},
        checkpoint_ms=cps or {},
        archive_updated=archive if archive is not None else {"primary": None},
        findings=list(findings),
    )


# ------------------------------------------------------------------------------------------ 1. the answer


def test_rule1_kinds_name_the_proof_and_a_skip_answers_none():
    assert r.kind_of(row(rule="exact_sync")) == r.EXACT
    assert r.kind_of(row(rule="drained_tail")) == r.EXACT
    assert r.kind_of(row(rule="sync_floor")) == r.FLOOR
    assert r.kind_of(row(rule="checkpoint", action="clamp")) == r.CHECKPOINT
    assert r.kind_of(row(planned=None, action="skip", reason="no_checkpoint")) == r.NONE
    a = assess([row(rule="exact_sync"), row(partition=1, planned=None, action="skip", reason="no_checkpoint")])
    parts = {p["partition"]: p for p in a.partitions}
    assert (parts[0]["kind"], parts[0]["rule"]) == ("exact", "exact_sync")
    assert (parts[1]["kind"], parts[1]["rule"], parts[1]["reason"]) == ("none", None, "no_checkpoint")


def test_rule1_a_group_is_exact_only_when_every_partition_it_moves_is():
    exact = [row(group="a", rule="exact_sync"), row(group="a", partition=1, rule="record_lookup")]
    mixed = [row(group="b", rule="exact_sync"), row(group="b", partition=1, rule="checkpoint")]
    floor = [row(group="c", rule="exact_sync"), row(group="c", partition=1, rule="sync_floor")]
    skipped = [row(group="d", planned=None, action="skip", reason="no_checkpoint")]
    exact_and_skip = [row(group="e", rule="exact_sync"), row(group="e", partition=1, planned=None, action="skip")]
    a = assess(exact + mixed + floor + skipped + exact_and_skip)
    assert {g["group"]: g["answer"] for g in a.groups} == {
        "a": "exact",
        "b": "checkpoint",
        "c": "floor",
        "d": "none",
        "e": "exact",
    }
    assert a.summary["groups_not_exact"] == 3 and a.summary["groups_exact"] == 2
    assert a.groups[0]["rules"] == {"exact_sync": 1, "record_lookup": 1}


# ------------------------------------------------------------------------------------------ 2. re-read


def test_rule2_reread_is_the_plans_estimate_and_unknown_is_counted_not_guessed():
    rows = [row(), row(partition=1), row(partition=2, planned=None, action="skip")]
    a = assess(
        rows,
        reread=[
            {"group": "g", "topic": "primary.t", "partition": 0, "reread": 7},
            {"group": "g", "topic": "primary.t", "partition": 1, "reread": None},
        ],
    )
    g = a.groups[0]
    assert (g["reread"], g["reread_unknown"]) == (7, 1)  # the skipped partition re-reads nothing: not unknown
    assert (a.summary["reread_records"], a.summary["partitions_reread_unknown"]) == (7, 1)  # the total says it


# ------------------------------------------------------------------------------------------ 3. not yet replicated


def test_rule3_not_replicated_from_mm2s_progress_else_the_replica_end_and_zero_when_drained():
    assert r.not_replicated(drain(source_end=100, replicated=89, state="replication behind")) == 10
    assert r.not_replicated(drain(source_end=100, replicated=None, replica_end=95, state="replication behind")) == 5
    assert r.not_replicated(drain(source_end=100, replicated=90, state="drained")) == 0  # markers only after it
    assert r.not_replicated(drain(source_end=None, state="replica still changing")) is None  # the source is lost
    assert r.not_replicated(drain(source_end=100, replicated=None, replica_end=None, state="not replicated")) is None


def test_rule3_exposure_in_seconds_is_the_age_of_the_oldest_record_not_replicated():
    assert r.exposure_seconds(0, None, NOW) == 0.0
    assert r.exposure_seconds(5, NOW - 90_000, NOW) == 90.0
    assert r.exposure_seconds(5, None, NOW) is None  # behind, but its age could not be read
    assert r.exposure_seconds(None, NOW - 1, NOW) is None


def test_rule3_a_group_gets_the_worst_of_its_partitions_and_the_summary_counts_each_partition_once():
    rows = [row(group="a"), row(group="a", partition=1), row(group="b"), row(group="b", partition=1)]
    drains = [drain(0, source_end=100, replicated=79, state="replication behind"), drain(1)]
    a = assess(rows, drains, oldest={("primary.t", 0): NOW - 120_000}, rpo=60)
    assert [(g["not_replicated"], g["exposure_seconds"]) for g in a.groups] == [(20, 120.0), (20, 120.0)]
    assert a.summary["not_replicated_records"] == 20  # one source partition, two groups
    assert a.summary["worst_exposure_seconds"] == 120.0 and a.summary["groups_over_rpo"] == 2


def test_rule3_a_partition_without_an_observation_is_unknown_not_zero():
    a = assess([row()], drains=[])
    assert a.groups[0]["exposure_unknown"] == 1 and a.groups[0]["exposure_seconds"] is None
    assert a.summary["groups_exposure_unknown"] == 1 and a.summary["worst_exposure_seconds"] is None


def test_rule3_the_exposure_is_the_oldest_records_age_when_the_lag_was_observed_not_when_assessed():
    """Found by the long soak: an interval whose drain observation was made during a busy phase was assessed 2.5
    minutes later (its tasks retried through an object-store outage): 20 records behind, their oldest 151.6 s old
    "now" - while they were 2 s old when observed, and copied a second later. The age is taken at the observation."""
    a = r.assess(
        run_id="run",
        now_ms=NOW,
        rpo_seconds=60,
        plan_rows=[row()],
        reread=[],
        drain_rows=[drain(state="replication behind", replicated=79)],
        oldest_unreplicated_ms={("primary.t", 0): NOW - 152_000},
        checkpoint_ms={},
        archive_updated={"primary": None},
        findings=[],
        drain_observed_ms=NOW - 150_000,
    )
    assert a.groups[0]["exposure_seconds"] == 2.0 and a.summary["groups_over_rpo"] == 0


# ------------------------------------------------------------------------------------------ 4. ages


def test_rule4_ages_of_the_archive_and_of_each_groups_newest_checkpoint():
    iso = datetime.fromtimestamp((NOW - 30_000) / 1000, timezone.utc).isoformat()
    a = assess(
        [row(), row(partition=1)],
        cps={("g", "primary.t", 0): NOW - 10_000, ("g", "primary.t", 1): NOW - 50_000},
        archive={"primary": iso, "east": None},
    )
    assert a.groups[0]["checkpoint_age_seconds"] == 50.0  # the oldest of the group's newest checkpoints
    none = {"failed_runs_since": 0, "last_failure": None}
    assert a.archive == {
        "east": {"updated_at": None, "age_seconds": None, **none},
        "primary": {"updated_at": iso, "age_seconds": 30.0, **none},
    }
    assert a.summary["archive_age_seconds"] == 30.0
    assert r.to_ms(datetime(2027, 1, 15, 8)) == r.to_ms("2027-01-15T08:00:00+00:00") == r.to_ms("2027-01-15T08:00:00Z")
    assert r.age_seconds(NOW + 5_000, NOW) == 0.0  # a clock ahead: never negative


# ------------------------------------------------------------------------------------------ 5. degrading


def test_rule5_the_first_interval_tells_what_is_wrong_already():
    now = assess(
        [row(rule="checkpoint")],
        [drain(state="replication behind", replicated=49)],
        oldest={("primary.t", 0): NOW - 600_000},
        findings=[{"key": "audit:primary:x", "text": "x is off"}],
    )
    what = [d.what for d in r.degradations(None, now, interval_seconds=300, archive_stale_intervals=3)]
    # nothing was exact before: nothing fell back; the archive that never ran waits one interval (the test below)
    assert what == ["over_rpo", "new_finding"]


def test_rule5_the_archives_absence_waits_for_the_archive_unpaused_with_it():
    """Issue 49 item 2, found by the soak: both DAGs unpaused together (as README.md says), readiness's first run
    ended before the archive's first one and mailed "nothing archives them" - a minute later the archive had run. An
    archive that never succeeded nor failed (and its audit finding) is told once that has lasted
    archive_stale_intervals intervals, as a stale archive is, and then not again."""

    def interval():  # each interval's own findings, as each is read from its own readiness.json
        return assess(
            [row(rule="exact_sync")],
            [drain()],
            archive={"primary": None},
            findings=[
                {"key": "audit:primary:sync_history", "text": "audit primary sync_history: nothing archives them"}
            ],
        )

    first, second, third, fourth = interval(), interval(), interval(), interval()
    assert r.degradations(None, first, interval_seconds=60, archive_stale_intervals=3) == []
    assert r.degradations(first, second, interval_seconds=60, archive_stale_intervals=3) == []
    told = r.degradations(second, third, interval_seconds=60, archive_stale_intervals=3)
    assert [d.what for d in told] == ["new_finding", "archive_stale"], told
    assert r.degradations(third, fourth, interval_seconds=60, archive_stale_intervals=3) == []
    fresh = datetime.fromtimestamp((NOW - 10_000) / 1000, timezone.utc).isoformat()
    ran = assess([row(rule="exact_sync")], [drain()], archive={"primary": fresh})  # the archive ran in time
    assert r.degradations(second, ran, interval_seconds=60, archive_stale_intervals=3) == []
    # told at once where the readiness check is set to count one interval
    assert [d.what for d in r.degradations(None, interval(), interval_seconds=60, archive_stale_intervals=1)] == [
        "new_finding",
        "archive_stale",
    ]


def test_rule5_a_group_not_exact_while_its_records_are_still_being_copied_has_not_fallen_back():
    """Issue 49 item 2, found by the long soak: at its first busy interval readiness mailed "soak-app no longer
    provable exactly (checkpoint)" - the group's newest records were not on the replica yet, so nothing could prove
    where it would resume; a failover waits for the drain first. A group not exact while records of it are not
    replicated is not told (its exposure is, by rpo_seconds); once caught up and still not exact, it is."""
    fresh = datetime.fromtimestamp((NOW - 10_000) / 1000, timezone.utc).isoformat()

    def interval(rule, replicated):
        return assess(
            [row(rule=rule)],
            [drain(replicated=replicated, state="drained" if replicated == 99 else "replication behind")],
            archive={"primary": fresh},
            oldest={("primary.t", 0): NOW - 1_000},
        )

    exact, busy, busy_again, caught_up = (
        interval("exact_sync", 99),
        interval("checkpoint", 60),
        interval("checkpoint", 70),
        interval("checkpoint", 99),
    )
    assert busy.groups[0]["not_replicated"] > 0
    assert r.degradations(exact, busy, interval_seconds=60, archive_stale_intervals=3) == []
    assert r.degradations(busy, busy_again, interval_seconds=60, archive_stale_intervals=3) == []
    told = r.degradations(busy_again, caught_up, interval_seconds=60, archive_stale_intervals=3)
    assert [d.what for d in told] == ["fell_back"], told
    # exact again while busy: nothing carried over
    assert r.degradations(busy, interval("exact_sync", 60), interval_seconds=60, archive_stale_intervals=3) == []


def test_rule5_each_change_is_told_once():
    fresh = datetime.fromtimestamp((NOW - 10_000) / 1000, timezone.utc).isoformat()
    good = assess([row(rule="exact_sync")], [drain()], archive={"primary": fresh})
    bad = assess(
        [row(rule="checkpoint")],
        [drain(state="replication behind", replicated=49)],
        oldest={("primary.t", 0): NOW - 600_000},
        findings=[{"key": "audit:primary:x", "text": "x 1"}],
    )
    worse = r.degradations(good, bad, interval_seconds=300, archive_stale_intervals=3)
    # not "fell back" while its records are not replicated (the test above): its exposure is what is told
    assert [d.what for d in worse] == ["over_rpo", "new_finding", "archive_stale"]
    assert "600 s old" in worse[0].text
    # the same state again (the finding's numbers changed: the same key): nothing new to tell
    again = assess(
        [row(rule="checkpoint")],
        [drain(state="replication behind", replicated=49)],
        oldest={("primary.t", 0): NOW - 900_000},
        findings=[{"key": "audit:primary:x", "text": "x 2"}],
    )
    assert r.degradations(bad, again, interval_seconds=300, archive_stale_intervals=3) == []
    # back to good, then bad again: told again
    assert r.degradations(again, good, interval_seconds=300, archive_stale_intervals=3) == []
    assert len(r.degradations(good, bad, interval_seconds=300, archive_stale_intervals=3)) == 3


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from("abc"),
            st.integers(0, 3),
            st.sampled_from(["exact_sync", "checkpoint", "sync_floor", "record_lookup", None]),
        ),
        max_size=20,
    ),
    st.lists(
        st.tuples(
            st.integers(0, 3),
            st.integers(0, 200),
            st.one_of(st.none(), st.integers(-1, 250)),
            st.sampled_from(["drained", "replication behind", "producers still writing"]),
        ),
        max_size=6,
    ),
)
def test_the_summary_agrees_with_the_rows_whatever_they_are(spec, drains):
    rows = {}
    for g, p, rule in spec:
        rows[(g, p)] = row(
            g,
            partition=p,
            rule=rule or "checkpoint",
            planned=None if rule is None else 5,
            action="skip" if rule is None else "commit",
        )
    ds = {p: drain(p, source_end=se, replicated=rep, state=state) for p, se, rep, state in drains}
    a = assess(list(rows.values()), list(ds.values()), oldest={("primary.t", p): NOW - 1000 * p for p in ds})
    s = a.summary
    assert s["groups"] == len(a.groups) == len({g for g, _ in rows})
    assert s["partitions"] == len(rows) == sum(g["partitions"] for g in a.groups)
    assert sum(s[f"groups_{k}"] for k in r.KINDS) == s["groups"]
    assert sum(s[f"partitions_{k}"] for k in r.KINDS) == s["partitions"]
    for g in a.groups:
        assert sum(g[k] for k in r.KINDS) == g["partitions"]
        assert g["not_replicated"] >= 0 and (g["exposure_seconds"] is None or g["exposure_seconds"] >= 0)
        assert (g["answer"] == r.EXACT) == (g["partitions"] > g[r.NONE] and g[r.CHECKPOINT] == g[r.FLOOR] == 0)
    assert json.loads(json.dumps(a.as_dict())) == r.Readiness.from_dict(a.as_dict()).as_dict()


# ------------------------------------------------------------------------------------------ the history file


def test_history_survives_a_torn_line_and_keeps_appending(tmp_path):
    from mm2_failover.stages import assess_readiness as stage

    old = {**r.history_line(assess([row()], [drain()])), "computed_at": "2020-01-01T00:00:00+00:00"}
    stage.append_history(old, tmp_path)
    with open(tmp_path / stage.HISTORY, "ab") as f:
        f.write(b'{"computed_at": "20')  # a crash mid-append
    new = {**old, "computed_at": datetime.now(timezone.utc).isoformat(), "run_id": "new"}
    stage.append_history(new, tmp_path)
    assert stage.history(tmp_path) == [old, new]
    assert stage.history(tmp_path, since_s=86400) == [new]  # the last day only


def test_history_skips_a_line_that_is_not_an_interval_and_the_readiness_page_still_answers(tmp_path):
    """A review found /readiness answering 500 for one history line whose time is not ISO (or that is not an
    object): such a line is skipped, as a torn one is."""
    from mm2_failover.stages import assess_readiness as stage

    new = {**r.history_line(assess([row()], [drain()])), "computed_at": datetime.now(timezone.utc).isoformat()}
    with open(tmp_path / stage.HISTORY, "w") as f:
        f.write('{"computed_at": "2026-11-29 01:00:00 UTC"}\n42\n["a"]\n')
    stage.append_history(new, tmp_path)
    assert stage.history(tmp_path, since_s=86400) == [new]
    assert stage.history(tmp_path) == [new]


def test_a_retried_interval_compares_with_the_one_before_it_not_with_itself(tmp_path):
    from mm2_failover.adapters.runfolder import RunFolder
    from mm2_failover.stages import assess_readiness as stage

    a = assess([row(rule="exact_sync")], [drain()])
    RunFolder(tmp_path / "a").save_readiness(a)
    assert stage.previous("b", tmp_path) == (None, None)  # nothing kept yet
    (tmp_path / stage.LATEST).write_text(json.dumps({"folder": "a", "previous_folder": None}))
    want = {**a.as_dict(), "partitions": []}  # compared by group: its rows per partition are not read
    got, name = stage.previous("b", tmp_path)  # interval b's first try: compares with a
    assert name == "a" and got.as_dict() == want
    (tmp_path / stage.LATEST).write_text(json.dumps({"folder": "b", "previous_folder": "a"}))
    got, name = stage.previous("b", tmp_path)  # b's retry, after its first try wrote latest.json: still a
    assert name == "a" and got.as_dict() == want
    (tmp_path / stage.LATEST).write_text("{not json")
    assert stage.previous("c", tmp_path) == (None, None)  # unreadable: not compared, said in the log


def test_the_rows_per_partition_round_trip_through_parquet_and_the_json_stays_small(tmp_path):
    from mm2_failover.adapters.runfolder import READINESS, RunFolder

    rows = [
        row(
            f"g{i:05d}",
            partition=p,
            rule=("exact_sync", "checkpoint", "sync_floor")[i % 3],
            planned=None if i % 7 == 0 else i,
            action="skip" if i % 7 == 0 else "commit",
        )
        for i in range(300)
        for p in range(10)
    ]
    a = assess(
        rows,
        [drain(p, state="replication behind", replicated=89) for p in range(5)],
        oldest={("primary.t", 0): NOW - 5000},
        reread=[{"group": "g00001", "topic": "primary.t", "partition": 0, "reread": 3}],
    )
    f = RunFolder(tmp_path)
    f.save_readiness(a)
    assert f.load_readiness().as_dict() == a.as_dict()
    assert f.load_readiness(partitions=False).as_dict() == {**a.as_dict(), "partitions": []}
    assert (tmp_path / READINESS).stat().st_size < 2000  # the summary only: small whatever the group count


EXACT = (
    "exact_sync",
    "gap_free_bracket",
    "drained_tail",
    "record_lookup",
    "at_end",
    "home_exact_sync",
    "home_gap_free_bracket",
    "home_drained_tail",
)


@pytest.mark.parametrize(
    "rule", [*EXACT, "superseded_sync", "sync_floor", "home_sync_floor", "checkpoint", "a_rule_added_later"]
)
def test_the_report_the_approval_and_readiness_classify_every_rule_alike(rule):
    """Issue 50 item 5: readiness called every rule but checkpoint and the floors exact - superseded_sync (an MM2
    restart's first copy) included - while the report did not, so its "fell back" alert never fired for that slip.
    One allow-list (translate.EXACT_RULES): the report's per-row "exact", its partitions_exact count (which the
    approval request and its totals read) and readiness's kind agree on every rule, a rule added later included."""
    from mm2_failover.rules import report as rp
    from mm2_failover.rules import translate as tr

    row = {
        "group": "g",
        "topic": "primary.orders",
        "partition": 0,
        "upstream_offset": 40,
        "downstream_offset": 30,
        "planned_offset": 38,
        "exact_offset": None if rule == "checkpoint" else 40,
        "position_at_least": 35,
        "rule": rule,
        "action": "commit",
    }
    (est,) = rp.estimate_reread([row], {("g", "primary.orders", 0): 40})  # the source up: its commit known
    exact = tr.is_exact(rule)
    assert bool(est.get("exact")) == exact, est
    assert (r.kind_of(row) == r.EXACT) == exact
    if rule != "checkpoint":
        assert r.kind_of(row) == (r.EXACT if exact else r.FLOOR)
    assert exact == (rule in EXACT)  # failing back's exact rules too (the review: they were demoted)


def test_a_setting_never_given_is_shown_not_told_as_a_degradation():
    """Issue 49 item 4: the first readiness alert's only item was "MM2's configuration was not given" - a setting,
    not a degradation. It is a finding of the setup (on the page), never a Degradation; a real new finding still is."""
    setup = {"key": "setup:mm2_config", "text": "setup: MM2's configuration was not given", "setup": True}
    real = {"key": "audit:primary:isolation", "text": "audit primary isolation: read_uncommitted"}
    now = r.Readiness("2026-11-27T00:00:00+00:00", "run", 60, {}, [], [], [setup], {})
    assert r.degradations(None, now, interval_seconds=300, archive_stale_intervals=3) == []
    now.findings.append(real)
    assert [d.what for d in r.degradations(None, now, interval_seconds=300, archive_stale_intervals=3)] == [
        "new_finding"
    ]


def test_the_archive_failing_after_its_archive_task_succeeded_is_a_failed_run_told_once():
    """Issue 49 item 3: "mm2_sync_archive last succeeded 18:15:02, age 10.3 s" while that run had failed (its state
    refresh, after the archive task): readiness read the archive task, not the run. The DAG's failures (recorded by its
    failure notifier) since the last success are counted, told once, and cleared by a success after them."""
    now_ms = r.to_ms("2026-11-27T18:15:20+00:00")
    fail = {
        "run_id": "scheduled__18:15",
        "task_id": "refresh_latest_state",
        "at": "2026-11-27T18:15:10+00:00",
        "reason": "TypeError",
    }
    old = {**fail, "run_id": "scheduled__17:00", "at": "2026-11-27T17:00:10+00:00"}
    h = r.archive_health("2026-11-27T18:15:02+00:00", [old, fail], now_ms)
    assert (h["failed_runs_since"], h["age_seconds"]) == (1, 18.0) and "refresh_latest_state: TypeError" in h[
        "last_failure"
    ]

    def interval(failures):
        return r.assess(
            run_id="x",
            now_ms=now_ms,
            rpo_seconds=60,
            plan_rows=[],
            reread=[],
            drain_rows=[],
            oldest_unreplicated_ms={},
            checkpoint_ms={},
            archive_updated={"primary": "2026-11-27T18:15:02+00:00"},
            findings=[],
            archive_failures=failures,
        )

    first, second = interval([fail]), interval([fail])
    told = r.degradations(None, first, interval_seconds=300, archive_stale_intervals=3)
    assert [d.what for d in told] == ["archive_failing"] and "1 run(s)" in told[0].text
    assert r.degradations(first, second, interval_seconds=300, archive_stale_intervals=3) == []  # once
    assert r.archive_health("2026-11-27T18:20:02+00:00", [fail], now_ms)["failed_runs_since"] == 0  # a success after


def test_rule5_source_commits_the_archive_could_not_read_are_told_once_while_its_offset_syncs_succeed():
    """Issue 50 item 7's other side (plan rule 1a): the archive reads every group's source commits beside the offset
    syncs; a source it cannot read keeps the previous reading and the archive run still succeeds. Readiness shows
    the reading's time and age per alias, and tells once when it is older than archive_stale_intervals intervals
    while the archive itself is fresh (a stale archive is told as such); an alias with no source reading kept
    (no source connection) is not told."""
    fresh = datetime.fromtimestamp((NOW - 10_000) / 1000, timezone.utc).isoformat()
    old = datetime.fromtimestamp((NOW - 3_600_000) / 1000, timezone.utc).isoformat()

    def interval(read_at, archive=fresh):
        return r.assess(
            run_id="run",
            now_ms=NOW,
            rpo_seconds=60,
            plan_rows=[row(rule="exact_sync")],
            reread=[],
            drain_rows=[drain()],
            oldest_unreplicated_ms={},
            checkpoint_ms={},
            archive_updated={"primary": archive},
            findings=[],
            positions_read={"primary": read_at},
        )

    ok, stale, stale_again = interval(fresh), interval(old), interval(old)
    assert ok.archive["primary"]["positions_read_at"] == fresh
    assert ok.archive["primary"]["positions_age_seconds"] == 10
    assert stale.archive["primary"]["positions_age_seconds"] == 3600
    assert r.degradations(ok, ok, interval_seconds=300, archive_stale_intervals=3) == []
    told = r.degradations(ok, stale, interval_seconds=300, archive_stale_intervals=3)
    assert [d.what for d in told] == ["positions_stale"], told
    assert "primary" in told[0].text and "3600 s" in told[0].text and "MM2's checkpoints" in told[0].text
    assert r.degradations(stale, stale_again, interval_seconds=300, archive_stale_intervals=3) == []
    never = interval(None)
    assert [d.what for d in r.degradations(ok, never, interval_seconds=300, archive_stale_intervals=3)] == [
        "positions_stale"
    ]
    # the archive stale too: told as a stale archive only
    both = interval(old, archive=old)
    assert [d.what for d in r.degradations(ok, both, interval_seconds=300, archive_stale_intervals=3)] == [
        "archive_stale"
    ]
    # no source reading kept for the alias (no source connection): nothing shown, nothing told
    plain = assess([row(rule="exact_sync")], [drain()], archive={"primary": fresh})
    assert "positions_read_at" not in plain.archive["primary"]
    assert r.degradations(ok, plain, interval_seconds=300, archive_stale_intervals=3) == []
