"""The pre-flight audit's rules (audit.py), grouped by rule, and how MM2's settings are resolved."""

from __future__ import annotations

from mm2_failover.rules import audit
from mm2_failover.rules.audit import OK, WARNING, Facts, Mm2Settings

COMPACT = {"cleanup.policy": "compact", "retention.ms": "604800000"}


def run(rule, props=None, **facts):
    f = Facts(**{"archive_age_seconds": 30.0, "checkpoint_topic_config": COMPACT, **facts})
    return rule(Mm2Settings(props or {}, "primary", "backup"), f)


# -- resolving settings the way MM2 does


def test_properties_are_parsed_like_java_properties():
    text = (
        "# comment\n! also a comment\nclusters = primary, backup\nprimary.bootstrap.servers:host:9092\n"
        "primary->backup.topics  orders, \\\n    payments\n\nempty=\n"
    )
    assert audit.parse_properties(text) == {
        "clusters": "primary, backup",
        "primary.bootstrap.servers": "host:9092",
        "primary->backup.topics": "orders, payments",
        "empty": "",
    }


def test_flow_setting_beats_top_level_beats_default():
    s = Mm2Settings({"offset.lag.max": "5", "primary->backup.offset.lag.max": "0"}, "primary", "backup")
    assert s.flow("offset.lag.max") == ("0", "primary->backup.offset.lag.max")
    assert Mm2Settings({"offset.lag.max": "5"}, "primary", "backup").flow("offset.lag.max") == ("5", "offset.lag.max")
    assert Mm2Settings({}, "primary", "backup").flow("offset.lag.max") == ("100", "default")
    # another flow's setting does not apply to this one
    assert Mm2Settings({"dc3->backup.offset.lag.max": "0"}, "primary", "backup").flow("offset.lag.max")[0] == "100"


def test_target_alias_is_the_one_enabled_flow_from_the_source():
    assert (
        audit.target_alias({"primary->backup.enabled": "true", "backup->primary.enabled": "true"}, "primary")
        == "backup"
    )
    assert audit.target_alias({"primary->backup.enabled": "false"}, "primary") is None
    assert audit.target_alias({"primary->a.enabled": "true", "primary->b.enabled": "true"}, "primary") is None


# -- rule 1: isolation


def test_flow_settings_do_not_hide_the_flow_and_mm2_as_a_second_writer_is_found():
    """Issue 31 item 10: the compose/README mm2.properties plus one flow setting ending in '.enabled'
    (primary->backup.sync.group.offsets.enabled=true) broke the detection of the target alias with the default
    parameters, and then every flow setting was ignored: the second-writer check said OK while MM2 wrote the target's
    group offsets."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "compose" / "mm2.properties").read_text()
    props = audit.parse_properties(
        text + "\nprimary->backup.sync.group.offsets.enabled=true\nprimary->backup.emit.offset-syncs.enabled=true\n"
    )
    assert audit.target_alias(props, "primary") == "backup"
    [writer] = [
        f
        for f in audit.audit(props, "primary", audit.target_alias(props, "primary"), audit.Facts())
        if f.rule == "second_writer"
    ]
    assert writer.severity == audit.WARNING and "primary->backup.sync.group.offsets.enabled" in writer.message
    # without a clusters list, a flow's switch is the key with no dot between '->' and '.enabled'
    assert audit.target_alias({"a->b.enabled": "true", "a->b.sync.group.offsets.enabled": "true"}, "a") == "b"


def test_read_uncommitted_by_default_is_a_warning_naming_the_setting_to_change():
    f = run(audit.isolation)
    assert f.severity == WARNING and "830 phantom" in f.message
    assert "primary.consumer.isolation.level=read_committed" in f.message


def test_read_committed_on_the_source_cluster_or_the_flow_is_ok():
    assert run(audit.isolation, {"primary.consumer.isolation.level": "read_committed"}).severity == OK
    assert run(audit.isolation, {"primary->backup.source.consumer.isolation.level": "READ_COMMITTED"}).severity == OK
    assert run(audit.isolation, {"backup.consumer.isolation.level": "read_committed"}).severity == WARNING


# -- rule 2: sync history


def test_syncs_on_the_source_without_an_archive_are_a_warning():
    f = run(audit.sync_history, archive_age_seconds=None)
    assert f.severity == WARNING and "mm2_sync_archive" in f.message


def test_a_stale_archive_is_a_warning_a_fresh_one_ok():
    assert run(audit.sync_history, archive_age_seconds=3600.0).severity == WARNING
    assert run(audit.sync_history, archive_age_seconds=60.0).severity == OK


def test_syncs_on_the_target_are_ok_when_the_pipeline_reads_them_there():
    props = {"offset-syncs.topic.location": "target"}
    assert run(audit.sync_history, props, offset_syncs_location="target", archive_age_seconds=None).severity == OK
    f = run(audit.sync_history, props, offset_syncs_location="source")
    assert f.severity == WARNING and "offset_syncs_location=target" in f.message


def test_no_syncs_emitted_is_a_warning():
    f = run(audit.sync_history, {"primary->backup.emit.offset-syncs.enabled": "false"})
    assert f.severity == WARNING and "no offset syncs" in f.message


# -- rule 3: intervals vs the RPO


def test_intervals_within_the_rpo_are_ok_and_longer_ones_named():
    fast = {"emit.checkpoints.interval.seconds": "1", "backup.offset.flush.interval.ms": "1000"}
    assert run(audit.rpo, fast).severity == OK
    f = run(audit.rpo, {}, rpo_seconds=30)  # MM2's defaults: 60 s and 60 s
    assert f.severity == WARNING
    assert "emit.checkpoints.interval.seconds=60" in f.message and "backup.offset.flush.interval.ms=60000" in f.message
    assert "offset.lag.max=100" in f.message


# -- rule 4: a second writer


def test_mm2_writing_the_groups_itself_is_a_warning():
    f = run(audit.second_writer, {"sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "5"})
    assert f.severity == WARNING and "every 5 s" in f.message
    assert (
        run(
            audit.second_writer,
            {"sync.group.offsets.enabled": "true", "primary->backup.sync.group.offsets.enabled": "false"},
        ).severity
        == OK
    )


# -- rule 5: checkpoint retention


def test_a_deleting_checkpoints_topic_is_a_warning_with_its_retention():
    f = run(
        audit.checkpoint_retention,
        checkpoint_topic_config={"cleanup.policy": "compact,delete", "retention.ms": "86400000"},
    )
    assert f.severity == WARNING and "24.0 h" in f.message
    assert run(audit.checkpoint_retention).severity == OK
    assert run(audit.checkpoint_retention, checkpoint_topic_config=None).severity == WARNING
    assert (
        run(
            audit.checkpoint_retention, checkpoint_topic_config={"cleanup.policy": "delete", "retention.ms": "-1"}
        ).severity
        == OK
    )


# -- the whole audit


def test_every_rule_answers_once_and_without_the_config_that_gap_is_said():
    full = audit.audit({}, "primary", "backup", Facts(30.0, COMPACT))
    assert [f.rule for f in full] == ["isolation", "sync_history", "rpo", "second_writer", "checkpoint_retention"]
    partial = audit.audit(None, "primary", "backup", Facts(None, COMPACT, offset_syncs_location="target"))
    assert [f.rule for f in partial] == ["mm2_config", "sync_history", "checkpoint_retention"]
    assert partial[0].severity == WARNING and partial[1].severity == OK  # syncs taken to be where the pipeline reads
