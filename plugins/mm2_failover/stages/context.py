"""One home for a run: :class:`RunContext` resolves the parameters, the run folder and the clusters once, and
decides source reachability once (see :mod:`mm2_failover.rules.reachability`), for the Airflow tasks
(:meth:`RunContext.from_airflow`) and the CLI (:meth:`RunContext.from_cli`) alike. The stages
(:mod:`mm2_failover.stages`) take a RunContext and nothing else of Airflow's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from mm2_failover.adapters.config import SOURCE_CONN_ID, TARGET_CONN_ID, run_dir
from mm2_failover.adapters.kafka.cluster import Cluster
from mm2_failover.adapters.runfolder import RunFolder, now_iso
from mm2_failover.adapters.store import as_path
from mm2_failover.rules import reachability
from mm2_failover.rules.run_params import RunParams
from mm2_failover.rules.selection import GroupSelection

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 5.0
REACHABILITY = "source_reachability"

#: builds the Cluster of a connection (Airflow connection id, or the CLI's config label); timeout in seconds
ClusterFactory = Callable[[str, str, float], Cluster]


@dataclass
class RunContext:
    params: RunParams
    folder: RunFolder
    dag_id: str
    run_id: str
    connect: ClusterFactory  # (connection, role, timeout) -> Cluster
    target_conn: str = TARGET_CONN_ID
    source_conn: str = SOURCE_CONN_ID
    timeout: float = 15.0
    #: the run asks a human before it writes (the failover DAG's approve_plan): an unanswered source under
    #: ``detect`` is then planned for in disaster mode, unconfirmed, and the approval asks (reachability rule 3a)
    asks_before_writing: bool = False
    _sources: dict = field(default_factory=dict, repr=False)

    # -- construction ---------------------------------------------------------------------------------
    @classmethod
    def from_airflow(
        cls,
        context,
        *,
        target_conn_id: str = TARGET_CONN_ID,
        source_conn_id: str = SOURCE_CONN_ID,
        params: dict | None = None,
        asks_before_writing: bool = False,
    ) -> "RunContext":
        """``params``: the run parameters (templated operator arguments); default: the DAG run's params.
        ``asks_before_writing``: the DAG says so for each of its tasks (the failover DAG's factory does)."""
        from mm2_failover.hooks.kafka_cluster import KafkaClusterHook  # lazy: imports airflow (the CLI runs without it)

        dag_id, run_id = context["dag"].dag_id, context["run_id"]
        p = RunParams.from_mapping(dict(params if params is not None else context["params"]))

        def connect(conn_id: str, role: str, timeout: float) -> Cluster:
            return KafkaClusterHook(conn_id, role, timeout).cluster()

        return cls(
            p,
            RunFolder(run_dir(dag_id, run_id)),
            dag_id,
            run_id,
            connect,
            target_conn_id,
            source_conn_id,
            asks_before_writing=asks_before_writing,
        )

    @classmethod
    def from_cli(cls, params: RunParams, folder: Path, confs: dict[str, dict], timeout: float) -> "RunContext":
        """``confs``: connection label -> librdkafka settings ("target", "source" and one per --alias-source-config)."""

        def connect(label: str, role: str, t: float) -> Cluster:
            if label not in confs:
                raise ValueError(f"no settings for the {role} cluster ({label})")
            return Cluster(confs[label], role, t)

        # a folder in an object store too (MM2_FAILOVER_ARTIFACTS=s3://...): a plain Path refuses a UPath
        return cls(params, RunFolder(folder), "cli", as_path(folder).name, connect, "target", "source", timeout)

    def bind(self) -> "RunContext":
        """Bind the run folder to this run's parameters (the first caller records them; a later one with other values
        that change the result is refused: :meth:`~mm2_failover.adapters.runfolder.RunFolder.bind_params`)."""
        self.folder.bind_params(self.dag_id, self.params.result_params(), list(self.params.RESULT_PARAMS))
        return self

    # -- what the run is about ------------------------------------------------------------------------
    @cached_property
    def selection(self) -> GroupSelection:
        return GroupSelection.of(self.params)

    @cached_property
    def policies(self) -> dict:
        return {p.source_alias: p for p in self.params.policies()}

    @property
    def aliases(self) -> list[str]:
        return self.params.source_aliases

    @cached_property
    def target(self) -> Cluster:
        return self.connect(self.target_conn, "target", self.timeout)

    def source_conn_of(self, alias: str) -> str | None:
        return self.params.source_connection(alias, self.source_conn)

    # -- source reachability: decided once -----------------------------------------------------------
    def reachability(self) -> dict[str, str]:
        """alias -> ``reachable`` | ``disaster``. Decided by the first caller of the run (probing each source
        with a bounded number of tries) and recorded in the run folder; every later call reads that record."""
        rec = self.folder.decision(REACHABILITY)
        if rec:
            return {a: v["decision"] for a, v in rec["aliases"].items()}
        mode = reachability.check_mode(self.params.source_reachable)
        out, detail = {}, {}
        for alias in self.aliases:
            conn = self.source_conn_of(alias)
            if conn is None:
                out[alias] = reachability.DISASTER
                detail[alias] = {
                    "decision": out[alias],
                    "why": "no source connection given for this alias: not checked",
                    "connection": None,
                }
                log.warning(
                    "WARNING: source alias %s has no source connection: it is treated as LOST (disaster mode) "
                    "and nothing is checked on its cluster",
                    alias,
                )
                continue
            what = f"source cluster of alias {alias} (connection {conn})"
            probe_cluster = self.connect(conn, f"source {alias}", PROBE_TIMEOUT_S) if mode != "no" else None
            decision, outcomes, err = reachability.probe(
                probe_cluster.probe if probe_cluster else (lambda: None),
                mode=mode,
                what=what,
                asks=self.asks_before_writing,
            )
            out[alias] = decision
            sure = reachability.confirmed(mode, decision)
            detail[alias] = {
                "decision": decision,
                "outcomes": outcomes,
                "last_error": err,
                "connection": conn,
                "confirmed": sure,
                "why": {"no": "source_reachable=no: declared lost by the operator"}.get(mode, "")
                or (
                    ""
                    if sure
                    else f"source_reachable=detect and it did not answer on any of "
                    f"{len(outcomes)} tries - NOT confirmed lost: the approval asks"
                ),
            }
            if decision == reachability.DISASTER:
                log.warning(
                    "WARNING: DISASTER MODE for alias %s: %s. Source-side checks are skipped for it; only "
                    "target-side evidence is used, and the report carries the data-loss window.",
                    alias,
                    detail[alias]["why"] or f"its source did not answer on any of {len(outcomes)} tries ({err})",
                )
        self.folder.save_decision(REACHABILITY, {"mode": mode, "decided_at": now_iso(), "aliases": detail})
        return out

    def disaster_aliases(self) -> list[str]:
        return [a for a, d in self.reachability().items() if d == reachability.DISASTER]

    def unconfirmed_disaster_aliases(self) -> list[str]:
        """Aliases in disaster mode only because their source did not answer under ``detect``: nobody has said they
        are lost yet (reachability rule 3a; the approval asks). Read from the run's record (decided by its first
        task); none recorded yet: none."""
        rec = self.folder.decision(REACHABILITY) or {}
        return sorted(
            a
            for a, v in (rec.get("aliases") or {}).items()
            if v.get("decision") == reachability.DISASTER and v.get("confirmed") is False
        )

    def source(self, alias: str) -> Cluster | None:
        """The source cluster of ``alias``, or None when the run decided it is lost (disaster mode)."""
        if self.reachability()[alias] != reachability.REACHABLE:
            return None
        if alias not in self._sources:
            self._sources[alias] = self.connect(self.source_conn_of(alias), f"source {alias}", self.timeout)
        return self._sources[alias]

    def sources(self) -> dict[str, Cluster]:
        """The reachable source clusters, by alias."""
        return {a: c for a in self.aliases if (c := self.source(a)) is not None}
