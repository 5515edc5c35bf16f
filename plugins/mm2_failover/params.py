"""The trigger form of the failover DAGs: every run parameter with a title, a description, a type and
validation (a bad value is refused before any task runs). Defaults are the safe choice, and come from
:class:`mm2_failover.config.RunParams` (their one definition)."""

from __future__ import annotations

from airflow.sdk import Param

from mm2_failover.config import RunParams

_D = RunParams()
_C = RunParams.CHOICES


def failover_params() -> dict[str, Param]:
    return {
        "source_alias": Param(
            _D.source_alias, type="string", minLength=1, pattern=r"^[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*$",
            title="Source cluster alias(es)",
            description="MM2's alias of the lost/primary cluster: the checkpoints are read from "
                        "<alias>.checkpoints.internal on the target, and replica topics are named <alias>.<topic>. "
                        "Several aliases, comma-separated, fail over groups replicated from several sources in one "
                        "run (one pass over all their checkpoint topics)."),
        "groups_regex": Param(
            _D.groups_regex, type="string", format="regex", minLength=1, title="Groups to fail over (regex)",
            description="Consumer groups to move, as a (Python) regular expression matched against the whole group "
                        "id. Narrow it (e.g. 'orders-.*') to fail over some applications only."),
        "groups_exclude_regex": Param(
            _D.groups_exclude_regex, type="string", format="regex", title="Groups to leave alone (regex)",
            description="Groups matching this (whole id) are never moved, even if groups_regex matches. Empty: none."),
        "dry_run": Param(
            _D.dry_run, type="boolean", title="Dry run",
            description="Build and export the plan (JSON + CSV for kafka-consumer-groups) and stop: nothing is written."),
        "replication_policy": Param(
            _D.replication_policy, type="string", enum=list(_C["replication_policy"]), title="MM2 replication policy",
            description="'default': replica topics are <alias><separator><topic>; 'identity': they keep the source name."),
        "replication_policy_separator": Param(
            _D.replication_policy_separator, type="string", minLength=1, title="Replication policy separator",
            description="MM2's replication.policy.separator (default '.', several characters allowed). Only used "
                        "with the default policy."),
        "internal_topic_separator_enabled": Param(
            _D.internal_topic_separator_enabled, type="boolean", title="Separator in MM2's own topic names",
            description="MM2's replication.policy.internal.topic.separator.enabled (default true): with false, MM2 "
                        "names its checkpoints topic <alias>.checkpoints.internal whatever the separator."),
        "alias_policies": Param(
            {}, type="object", title="Per-alias replication policy",
            description='Only when several source aliases use different policies: {"dc2": {"policy": "identity"}, '
                        '"dc3": {"separator": "_", "internal_topic_separator_enabled": false}}. Aliases not listed '
                        "use the settings above."),
        "source_connections": Param(
            {}, type="object", title="Source connection of each alias",
            description='The Kafka connection of each source alias\'s cluster: {"dc3": "kafka_source_dc3"}. The first '
                        "alias uses kafka_source unless listed; every other alias must be listed (its producers and "
                        'live groups are checked there), or given "" to fail it over without checking its source '
                        "(as in disaster mode, said in the report)."),
        "source_reachable": Param(
            _D.source_reachable, type="string", enum=list(_C["source_reachable"]),
            title="Is the source cluster reachable?",
            description="Decided once, at the start of the run. detect: probe each source (3 tries, ~20 s at most) "
                        "and use DISASTER MODE for one that never answers; yes: fail if one does not answer; no: the "
                        "sources are lost - skip every source-side check (target-side evidence only, with an estimate "
                        "of the data-loss window in the report). A wrong password or bad client setting is an error, "
                        "never 'unreachable'."),
        "topics_regex": Param(
            _D.topics_regex, type="string", format="regex", title="Topics to check for drain (regex)",
            description="Source topics whose producers must have stopped and whose replication must have caught up. "
                        "Empty: the topics the selected groups consume (their commits on the source); in disaster "
                        "mode, every replica topic of the alias."),
        "drain_quiet_seconds": Param(
            _D.drain_quiet_seconds, type="integer", minimum=1, maximum=600, title="Drain quiet window (s)",
            description="Source end offsets must not move for this long for producers to count as stopped."),
        "drain_timeout_seconds": Param(
            _D.drain_timeout_seconds, type="integer", minimum=10, maximum=86400, title="Drain timeout (s)",
            description="How long verify_producers_drained waits before failing with the table of what is not drained."),
        "groups_empty_timeout_seconds": Param(
            _D.groups_empty_timeout_seconds, type="integer", minimum=10, maximum=86400, title="Empty-group timeout (s)",
            description="How long check_groups_empty waits for live consumers on the target to stop."),
        "max_quarantined_records": Param(
            _D.max_quarantined_records, type="integer", minimum=0, title="Max unusable checkpoint records",
            description="Fail compute_latest_checkpoints when more checkpoint records than this cannot be decoded. "
                        "They are always listed in the run's quarantine output."),
        "checkpoint_policy": Param(
            _D.checkpoint_policy, type="string", enum=list(_C["checkpoint_policy"]), title="Which checkpoint wins",
            description="latest: the last checkpoint per group/partition (MM2's meaning; safe). max: when a "
                        "checkpoint went backwards within the read range (an MM2 restart), keep the highest one. "
                        "Regressions are always reported."),
        "allow_rewind": Param(
            _D.allow_rewind, type="boolean", title="Allow rewinding target commits",
            description="When a group's commit on the target is already ahead of its checkpoint, move it back "
                        "anyway (more re-reads). Default: keep the commit that is ahead."),
        "on_existing_target_offsets": Param(
            _D.on_existing_target_offsets, type="string", enum=list(_C["on_existing_target_offsets"]),
            title="Groups that already have commits on the target",
            description="fail: refuse the run and name them; skip: leave those groups alone; overwrite: replace "
                        "their commits (a commit ahead is still kept unless allow_rewind)."),
        "accept_groups_without_checkpoints": Param(
            _D.accept_groups_without_checkpoints, type="boolean", title="Accept groups without checkpoints",
            description="A selected group that commits on the source but has no checkpoint at all refuses the run "
                        "(its consumers would start on the target without a commit). True: move the other groups and "
                        "list those in the report."),
        "translation": Param(
            _D.translation, type="string", enum=list(_C["translation"]), title="Translation",
            description="exact: resume each group at the exact record where MM2's offset syncs prove it (archived on "
                        "the target side, checked against the records themselves), MM2's checkpoint elsewhere; "
                        "checkpoint: MM2's checkpoints as they are (conservative: re-reads)."),
        "mm2_target_alias": Param(
            _D.mm2_target_alias, type="string", title="MM2's alias of the target cluster",
            description="Names MM2's offset-sync topic (mm2-offset-syncs.<alias>.internal). Empty: found on the "
                        "cluster, when there is only one."),
        "home_alias": Param(
            _D.home_alias, type="string", pattern=r"^([A-Za-z0-9._-]+)?$", title="Failing back: the target's alias",
            description="Only to fail back (e.g. source_alias=backup, home_alias=primary, the connections swapped): "
                        "MM2's alias of the target cluster. Groups that consumed <home_alias>.<topic> on the source "
                        "(the history MM2 copied before the failover) return to <topic> on the target, at offsets "
                        "read back from the archived offset syncs of the home_alias flow (MM2 writes no checkpoint for "
                        "them); other topics move by the checkpoints of the source_alias flow. Empty: a failover."),
        "offset_syncs_location": Param(
            _D.offset_syncs_location, type="string", enum=list(_C["offset_syncs_location"]),
            title="Where MM2 keeps offset syncs",
            description="MM2's offset-syncs.topic.location (source by default: lost with the source; the archive "
                        "keeps a copy on the target side)."),
        "mm2_config": Param(
            _D.mm2_config, type="string", title="MM2's configuration file",
            description="Path of the mm2.properties MM2 runs with, as seen by the Airflow workers: the pre-flight "
                        "audit warns about settings that cost records or re-reads (see the report). Empty: only what "
                        "the clusters show is audited."),
        "rpo_seconds": Param(
            _D.rpo_seconds, type="integer", minimum=1, title="Recovery point objective (s)",
            description="The audit warns when MM2's checkpoint or progress intervals are longer than this."),
        "source_groups_must_be_empty": Param(
            _D.source_groups_must_be_empty, type="boolean", title="Source groups must be stopped too",
            description="When the source is reachable, also wait until the groups have no live members on the "
                        "source (stop the consumers there first). Turn off only if you accept double consumption."),
        "apply_concurrency": Param(
            _D.apply_concurrency, type="integer", minimum=1, maximum=256, title="Requests in flight",
            description="How many groups are read or committed at the same time (one request per group)."),
        "lock_wait_seconds": Param(
            _D.lock_wait_seconds, type="integer", minimum=0, maximum=86400, title="Writer lock wait (s)",
            description="One writer per target cluster (failover, rollback, drill writes, the CLI): how long to wait "
                        "for another writer before failing (naming it)."),
    }


def rollback_params() -> dict[str, Param]:
    return {
        "failover_run_id": Param(
            "", type="string", title="Failover run to undo",
            description="The run id of the mm2_failover run whose backup to restore (see its report). "
                        "Or give backup_path."),
        "backup_path": Param(
            "", type="string", title="Backup file",
            description="Path of a backup.json written by apply_group_offsets. Overrides failover_run_id."),
        "force": Param(
            False, type="boolean", title="Force",
            description="Roll back even partitions whose commits moved since the failover (consumers committed on "
                        "the target): they are rewound to the backup. Default: refuse and list them."),
        "groups_empty_timeout_seconds": failover_params()["groups_empty_timeout_seconds"],
        "apply_concurrency": failover_params()["apply_concurrency"],
        "lock_wait_seconds": failover_params()["lock_wait_seconds"],
    }


def run_params_template(params: dict) -> dict[str, str]:
    """The ``run_params`` argument of the pipeline's operators in a DAG with these params: ``{{ params.x }}`` for
    each run parameter the DAG has."""
    return {k: v for k, v in RunParams.templates().items() if k in params}


def archive_params() -> dict[str, Param]:
    """What names the offset-sync topics to archive (the same values as the failover's)."""
    f = failover_params()
    return {k: f[k] for k in ("source_alias", "source_connections", "replication_policy",
                              "replication_policy_separator", "internal_topic_separator_enabled", "alias_policies",
                              "mm2_target_alias", "offset_syncs_location")}
