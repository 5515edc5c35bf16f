"""The pre-flight audit of MM2's configuration (the rules: :mod:`mm2_failover.rules.audit`)."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path

from mm2_failover.adapters.config import archive_root
from mm2_failover.adapters.syncs import SyncArchive
from mm2_failover.rules import audit
from mm2_failover.rules.selection import GroupSelection, compile_pattern
from mm2_failover.rules.values import age_seconds
from mm2_failover.stages.context import RunContext
from mm2_failover.stages.errors import ConfigurationError

log = logging.getLogger(__name__)


def check_inputs(params) -> None:
    """What a run's parameters name that can be checked without a cluster, checked before any cluster work: the
    group and topic patterns compile (:class:`~mm2_failover.rules.selection.GroupSelection`), MM2's configuration file is
    there to read. ConfigurationError naming the parameter and what to do."""
    if not params.source_aliases:
        raise ConfigurationError(
            f"source_alias {params.source_alias!r} names no alias: give MM2's alias of the source "
            "cluster (e.g. primary), or several comma-separated. Nothing was done."
        )
    try:
        GroupSelection.of(params)
        if params.topics_regex:
            compile_pattern(params.topics_regex, "topics_regex")
    except ValueError as e:
        raise ConfigurationError(f"{e}. Nothing was done.") from None
    if params.mm2_config and not Path(params.mm2_config).is_file():
        raise ConfigurationError(
            f"mm2_config: no file {params.mm2_config}: give the path of the mm2.properties MM2 "
            "runs with, or leave mm2_config empty. Nothing was done."
        )


def preflight_audit(ctx: RunContext) -> audit.Audit:
    """The pre-flight audit (rules in :mod:`mm2_failover.rules.audit`): MM2's configuration (``mm2_config``) and what the
    clusters show, per source alias, into ``audit.json``; warnings are logged and carried into the report. A
    configuration file that cannot be read is a configuration error; findings never fail the run."""
    props: dict[str, str] | None = None
    path = ctx.params.mm2_config
    if path:
        try:
            props = audit.parse_properties(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigurationError(
                f"mm2_config: cannot read MM2's configuration file {path} ({e}); give the path "
                "of the mm2.properties MM2 runs with, or leave mm2_config empty"
            ) from None
    target_topics = ctx.target.topics()
    out = []
    for alias in ctx.aliases:
        target_alias = ctx.params.mm2_target_alias or audit.target_alias(props or {}, alias) or "target"
        m = SyncArchive(archive_root(), alias).manifest()
        age = age_seconds(m.get("updated_at"), int(time.time() * 1000)) if m else None
        cp_topic = ctx.policies[alias].checkpoints_topic
        cp_cfg = ctx.target.topic_config(cp_topic) if cp_topic in target_topics else None
        facts = audit.Facts(age, cp_cfg, ctx.params.offset_syncs_location, ctx.params.rpo_seconds)
        findings = audit.audit(props, alias, target_alias, facts)
        for f in findings:
            (log.warning if f.severity == audit.WARNING else log.info)("audit %s %s: %s", alias, f.rule, f.message)
        out += [replace(f, alias=alias) for f in findings]
    result = audit.Audit(path, out)
    ctx.folder.save_audit(result)
    return result
