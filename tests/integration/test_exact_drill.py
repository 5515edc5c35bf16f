"""The exact-failover drill on its own real bed (issue 16's targets, issue 31's patterns): eight production patterns
(burst, slow, mixed, transactions with aborts, a compacted topic, a producer's retry twins, groups left behind the
source's log start, and transactions through a second MM2 flow with exactly-once support), MM2 SIGKILLed and
restarted while all of them produce, two groups per topic plus a group MM2 never checkpoints, every (group,
partition) scored against the truth from the payloads under ``translation=checkpoint`` and ``translation=exact``
(see testbed/exact_drill.py; docs/architecture.md's table comes from bench/exact_drill.py, the same drill at a larger scale and
with MM2's defaults too).

MM2 here follows the pre-flight audit's advice (its source consumer reads ``read_committed``): the audit's isolation
rule says OK on its configuration file, and no aborted record reaches the replica."""

from __future__ import annotations

import pytest

from testbed import exact_drill
from testbed.exact_drill import NON_TRANSACTIONAL

pytestmark = [pytest.mark.bed]


@pytest.fixture(scope="module")
def drill(run_root):
    from testbed.bed import Bed

    bed = Bed(run_dir=run_root / "drill-bed", mm2=exact_drill.ADVISED_MM2)
    bed.source.extra.update(exact_drill.SOURCE_BROKER)
    with pytest.MonkeyPatch.context() as mp, bed:
        mp.setenv("MM2_FAILOVER_ARCHIVE", str(run_root / "drill-archive"))
        result = exact_drill.run_drill(bed, run_root / "drill-runs", per_partition=80, eos_alias="eos")
        props = (bed.run_dir / "mm2" / "mm2.properties").read_text()
    print(exact_drill.render(result.summary()))
    return result, props


def brief(points) -> str:
    """Points as one line each (pytest cuts a long repr): what was asked, what the plan did and what it cost."""
    return "\n".join(
        f"{p.pattern} {p.translation} {p.group}[{p.partition}] at {p.position}: checkpoint "
        f"{'yes' if p.had_checkpoint else 'no'}, {p.rule or '-'} -> {p.planned}, lost {p.lost}, "
        f"re-read {p.re_read}"
        for p in points
    )


def why_unanswered(points, result) -> str:
    """The points, and what the translation had for each exact one left unanswered (a string: pytest cuts the repr
    of anything else to a line)."""
    import json

    return brief(points) + "\n" + json.dumps(result.facts.get("exact_unanswered"), default=str)


def rows(result, translation: str) -> dict[str, dict]:
    return {r["pattern"]: r for r in result.summary() if r["translation"] == translation}


def test_mm2_was_killed_mid_run_and_the_checkpoints_alone_re_read(drill):
    result, _ = drill
    assert result.facts["mm2_pid_after"] != result.facts["mm2_pid_before_kill"]
    assert len(result.points) == 2 * 8 * (2 * 3) + 2 * 2 * 3  # 2 rules x (8 topics x 2 groups + 2 ghosts) x 3
    assert sum(r["re_read"] for r in rows(result, "checkpoint").values()) > 0


def test_no_record_is_lost_under_either_rule(drill):
    result, _ = drill
    lost = [p for p in result.points if p.lost]
    assert not lost, brief(lost)


def test_exact_translation_re_reads_nothing_on_non_transactional_points(drill):
    result, _ = drill
    re_read = [p for p in result.points if p.translation == "exact" and p.pattern in NON_TRANSACTIONAL and p.re_read]
    assert not re_read, brief(re_read)


def test_on_transactional_and_compacted_points_exact_re_reads_less_than_the_checkpoints(drill):
    result, _ = drill
    exact, cp = rows(result, "exact"), rows(result, "checkpoint")
    for pat in ("transactions", "compacted"):
        assert exact[pat]["re_read"] <= cp[pat]["re_read"], (pat, exact[pat], cp[pat])
        if cp[pat]["re_read"]:
            assert exact[pat]["re_read"] < cp[pat]["re_read"], (pat, exact[pat], cp[pat])


def test_every_point_mm2_left_without_a_checkpoint_is_answered_by_translation(drill):
    result, _ = drill
    exact = [p for p in result.points if p.translation == "exact"]
    unanswered = [p for p in exact if not p.answered]
    assert not unanswered, why_unanswered(unanswered, result)
    assert sum(not p.had_checkpoint for p in exact) >= 6  # the two never-checkpointed groups at least
    assert all(not p.answered for p in result.points if p.translation == "checkpoint" and not p.had_checkpoint)


def test_with_the_audits_advice_followed_no_aborted_record_reaches_a_consumer(drill):
    from mm2_failover.rules import audit

    result, props = drill
    [finding] = [
        f
        for f in audit.audit(audit.parse_properties(props), "primary", "backup", audit.Facts())
        if f.rule == "isolation"
    ]
    assert finding.severity == audit.OK, finding
    assert result.facts["aborted_records"] > 0
    assert sum(p.phantom for p in result.points) == 0


@pytest.mark.parametrize("pattern", ["twins", "retention", "exactly_once"])
def test_issue_31s_patterns_lose_nothing_and_really_happened(drill, pattern):
    """A producer's retry twins (the lookup takes the first copy unless the later one is anchored), groups behind the
    source's log start (target-side proofs only, else MM2's checkpoint), MM2 with exactly-once support (commit
    markers and aborted copies on the replica: a bracket must be contiguous): 0 lost, every point answered."""
    result, _ = drill
    facts = result.facts
    assert {
        "twins": facts["twins_written"],
        "retention": facts["offsets_gone_by_retention"],
        "exactly_once": facts["replica_markers"].get("exactly_once", 0),
    }[pattern] > 0, facts
    points = [p for p in result.points if p.pattern == pattern]
    unanswered = [p for p in points if not p.answered and (p.had_checkpoint or p.translation == "exact")]
    assert points and not unanswered, why_unanswered(unanswered or points, result)
    assert sum(p.lost for p in points) == 0, [p for p in points if p.lost]
