"""``approve_plan``: Airflow's own human-in-the-loop ``ApprovalOperator`` (apache-airflow-providers-standard) asking
about exactly the plan ``build_plan`` wrote - its summary, its hash and a link to its page - and keeping the answer in
the run folder, where ``apply_group_offsets`` checks it before its first write. The rules: :mod:`mm2_failover.rules.approval`;
the I/O: :mod:`mm2_failover.stages.approve_plan`.

Answered in the UI (the run's "Required Actions") or through the REST API
(``PATCH /api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/approve_plan/-1/hitlDetails`` with
``{"chosen_options": ["Approve"]}`` or ``["Reject"]``). On Airflow 3.3 the task waits in the ``awaiting_input``
state, holding no worker slot and needing no triggerer; the scheduler enforces the deadline.

* Approve: the downstream tasks run; apply writes exactly the approved plan (its hash checked).
* Reject: the downstream tasks are skipped; nothing is written; the report's outcome says ``rejected`` and by whom.
* No answer within ``approval_timeout_seconds``: this task fails (and notifies), nothing is written; the report
  says ``approval_timed_out``.
* ``approver_not_triggerer=true`` and the user who triggered the run approves: that approval is refused - this
  task fails saying so (and notifies), nothing is written, the report says ``rejected`` and why (four eyes).
* The request goes to the notification channels too ("approval requested": :mod:`mm2_failover.rules.notify` rule 7).
* The request says how long ago the run was triggered and by whom, and the live diff's counts at that moment (the
  partitions someone committed on the target since the plan read it).
* ``require_approval=false``: nothing is asked; the opt-out is recorded and reported - unless the run is in
  disaster mode that nobody confirmed (``source_reachable=detect`` got no answer): that always asks. A dry run skips
  the writing tasks: nothing to approve.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from mm2_failover.adapters.config import four_eyes
from mm2_failover.notifications import base_url, tell


class PlanApprovalOperator(ApprovalOperator):
    """
    :param run_params: the run's parameters (templated; the DAGs pass ``{{ params.<name> }}`` for each):
        ``require_approval``, ``approval_timeout_seconds`` and ``dry_run`` decide what is asked
    """

    ui_color = "#fde2e4"
    template_fields = (*ApprovalOperator.template_fields, "run_params")

    def __init__(self, *, run_params: dict | None = None, **kwargs):
        kwargs.setdefault("subject", "Apply this failover plan?")
        kwargs.setdefault("retries", 0)  # a decision is asked once; a failure here (a timeout) is final
        super().__init__(**kwargs)
        self.run_params = run_params or {}

    def _ctx(self, context):
        from mm2_failover.stages.context import RunContext  # lazy: not at DAG parse

        # the asker itself: its run asks before it writes by definition
        return RunContext.from_airflow(context, params=self.run_params, asks_before_writing=True)

    def execute(self, context):
        from mm2_failover.rules import approval as rules  # lazy: not at DAG parse
        from mm2_failover.stages import approve_plan as stage

        ctx = self._ctx(context)
        p = ctx.params
        if p.dry_run:
            raise AirflowSkipException(
                f"dry run: nothing will be written, so nothing to approve; the plan and its "
                f"report are in {ctx.folder.dir}"
            )
        if not rules.needed(p.require_approval, p.dry_run, ctx.unconfirmed_disaster_aliases()):
            return stage.not_required(ctx).as_dict()
        since, who = trigger_of(context)
        self.subject, self.body, asked = stage.ask(ctx, base_url(), since, who)
        self.response_timeout = timedelta(seconds=p.approval_timeout_seconds)
        self.log.info(
            "asking for approval of plan %s (for %d s):\n%s\n%s",
            asked.plan_hash,
            asked.timeout_seconds,
            self.subject,
            self.body,
        )
        from mm2_failover.rules.notify import approval_message  # lazy: not at DAG parse

        tell(approval_message(ctx.dag_id, ctx.run_id, ctx.folder.dir.name, self.subject, self.body, base_url()))
        return super().execute(context)

    def execute_complete(self, context, event: dict[str, Any]) -> Any:
        from mm2_failover.adapters.runfolder import now_iso  # lazy: not at DAG parse
        from mm2_failover.rules import approval as rules
        from mm2_failover.stages import approve_plan as stage

        ctx = self._ctx(context)
        asked = ctx.folder.load_approval()
        if asked is None:
            raise AirflowFailException(f"no approval request in {ctx.folder.dir}: clear approve_plan to ask again")
        kw = dict(
            plan_hash=asked.plan_hash,
            asked_at=asked.asked_at,
            decided_at=now_iso(),
            timeout_seconds=asked.timeout_seconds,
        )
        if "error" in event:
            if event.get("error_type") == "timeout":
                d = rules.decide(None, timed_out=True, decided_by=None, **kw)
                stage.record_decision(ctx, d)
                raise AirflowFailException(
                    f"{d.describe()}. Trigger a new run to plan again (or clear build_plan "
                    "and approve_plan in this run)."
                )
            return super().execute_complete(context=context, event=event)  # Airflow's own error
        who = event.get("responded_by_user") or {}
        responder = (who.get("id"), who.get("name")) if isinstance(who, dict) else (str(who),)
        d = rules.decide(
            event.get("chosen_options"),
            timed_out=False,
            decided_by=who.get("name") or who.get("id") if isinstance(who, dict) else str(who),
            **kw,
        )
        d = rules.self_approved(d, trigger_of(context)[1], responder, four_eyes(ctx.params))
        stage.record_decision(ctx, d)  # first: on Reject, Airflow's skip of the writing tasks ends this call
        if d.note:  # rule 6: the approval did not count - nothing is written, on-call is told why
            raise AirflowFailException(d.describe())
        super().execute_complete(context=context, event=event)
        return d.as_dict()


def trigger_of(context) -> tuple[float | None, str | None]:
    """How long ago the run started (its start, else when it was due) and who triggered it, as Airflow keeps them
    (None: not known - a scheduled run has no triggering user)."""
    dr = context.get("dag_run")
    started = getattr(dr, "start_date", None) or getattr(dr, "run_after", None)
    if isinstance(started, datetime) and started.tzinfo is None:
        started = started.replace(tzinfo=timezone.utc)
    since = (datetime.now(timezone.utc) - started).total_seconds() if isinstance(started, datetime) else None
    return since, getattr(dr, "triggering_user_name", None) or None
