"""The soak's scoring (bench/soak.py ``score``, pure): what counts as an expected failure, told once, recovered from,
and a false alert."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import soak  # noqa: E402

T0 = 1_800_000_000.0


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat()


def run(run_id: str, state: str, start: float, end: float) -> dict:
    return {"dag_run_id": run_id, "state": state, "start_date": iso(start), "end_date": iso(end)}


PHASES = [
    soak.Phase("quiet", T0, T0 + 100),
    soak.Phase("store_unreachable", T0 + 100, T0 + 160),
    soak.Phase("quiet", T0 + 160, T0 + 400),
]


def scored(runs, mails):
    return soak.score(soak.Result(6.0, 20), PHASES, {"mm2_sync_archive": runs}, mails, interval=20, grace=30)


def test_a_failure_in_a_fault_told_once_and_recovered_is_expected():
    runs = [
        run("r1", "success", T0 + 10, T0 + 30),
        run("r2", "failed", T0 + 120, T0 + 140),
        run("r3", "success", T0 + 200, T0 + 220),
    ]
    r = scored(runs, [(T0 + 141, "[mm2-failover] mm2_sync_archive run r2: archive_offset_syncs FAILED - store")])
    assert r.ok and r.runs["mm2_sync_archive"] == {"success": 2, "failed": 1}
    assert [f["fault"] for f in r.failed_runs] == ["store_unreachable"]


def test_a_failure_outside_every_fault_is_unexpected_and_one_never_mailed_is_not_told():
    runs = [run("r1", "failed", T0 + 300, T0 + 320), run("r3", "success", T0 + 330, T0 + 340)]
    r = scored(runs, [])
    assert not r.ok
    assert [u["run_id"] for u in r.unexpected_failures] == ["r1"] and [n["told"] for n in r.not_told_once] == [0]


def test_a_fault_with_no_success_after_it_is_not_recovered_from():
    r = scored([run("r1", "success", T0 + 10, T0 + 30)], [])
    assert [n["fault"] for n in r.not_recovered] == ["store_unreachable"] and not r.ok


def test_an_alert_outside_the_faults_is_false_and_one_inside_is_not():
    runs = [run("r1", "success", T0 + 200, T0 + 220)]
    r = scored(
        runs,
        [
            (T0 + 150, "[mm2-failover] readiness degraded: archive failing"),
            (T0 + 390, "[mm2-failover] readiness degraded: lag"),
            (T0 + 395, "[mm2-failover] mm2_sync_archive run r1: NOT FINISHED 40 s after it was queued"),
        ],
    )
    assert [a["subject"].rsplit(": ", 1)[1] for a in r.false_alerts] == ["lag", "NOT FINISHED 40 s after it was queued"]
    assert len(r.alerts) == 3


# ---------------------------------------------------------------- the truth at the end: readiness against a failover


def recs(values, start=0):
    return [(start + i, v.encode()) for i, v in enumerate(values)]


SOURCE = recs([f"r{i}" for i in range(10)])  # the group read r0..r5: its position is 6
COPIES = recs([f"r{i}" for i in range(8)] + [f"r{i}" for i in range(5, 10)])  # MM2 restarted: r5..r7 copied twice


def verdict(said, committed):
    return soak.said_vs_truth(said, committed, {0: 6}, {0: COPIES}, {0: soak.truth_of(SOURCE)})


def test_readiness_is_right_when_the_failover_commits_what_it_said_and_re_reads_what_it_said():
    # the later copy of r6 (replica 9) is the true limit: exact, re-read 0
    v = verdict([{"partition": 0, "kind": "exact", "planned": 9, "reread": 0, "not_replicated": 0}], {0: 9})
    assert v["wrong"] == [] and (v["partitions"][0]["lost"], v["partitions"][0]["re_read"]) == (0, 0)


def test_exact_said_at_the_first_copy_re_reads_and_is_wrong():
    # resuming at the first copy of r6 (replica 6) re-reads r5 (replica 8): readiness called it exact, re-read 0
    v = verdict([{"partition": 0, "kind": "exact", "planned": 6, "reread": 0, "not_replicated": 0}], {0: 6})
    assert v["partitions"][0]["re_read"] == 1
    assert [w["why"] for w in v["wrong"]] == ["called exact with re-read 0, re-read 1"]


def test_a_committed_offset_other_than_said_or_a_lost_record_is_wrong():
    v = verdict([{"partition": 0, "kind": "exact", "planned": 9, "reread": 0, "not_replicated": 0}], {0: 11})
    why = v["wrong"][0]["why"]
    assert "readiness said offset 9, the failover committed 11" in why and "2 record(s) lost" in why  # r6, r7


def test_a_row_not_exact_may_say_unknown_and_an_estimate_it_gives_is_held_to_ten_percent():
    v = verdict([{"partition": 0, "kind": "checkpoint", "planned": 4, "reread": None, "not_replicated": 0}], {0: 4})
    assert v["wrong"] == [] and v["partitions"][0]["re_read"] == 3  # r4, and r5 twice (copied twice)
    v = verdict([{"partition": 0, "kind": "checkpoint", "planned": 4, "reread": 2, "not_replicated": 0}], {0: 4})
    assert v["wrong"] == []  # one record off a count of 3: within one record
    v = verdict([{"partition": 0, "kind": "floor", "planned": 4, "reread": 0, "not_replicated": 0}], {0: 4})
    assert [w["why"] for w in v["wrong"]] == ["estimated re-read 0, re-read 3"]
