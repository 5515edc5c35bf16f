"""Who hears about a run that failed or was refused, and what they read. Pure: the message and the choice of
notifiers; :mod:`mm2_failover.notifications` sends it from Airflow.

The rules:

1. **When.** A task's final failure (Airflow's ``on_failure_callback``: not a try that will be retried) in any DAG
   here: a refusal (a safety rule, nothing written), a failed check, a try past its ``execution_timeout``, a task
   process killed and given up on. One message per failed task; the tasks it left ``upstream_failed`` say nothing.
2. **What.** The subject names the DAG, the run and the task, and the reason's first line; the body adds the whole
   reason (the error's message, never a traceback; at most :data:`MAX_REASON` characters), the try it failed on,
   and two links: the run's report page (``/mm2/runs/<dag>/<run folder>``) and Airflow's own page of the run.
3. **Who.** ``MM2_FAILOVER_NOTIFY_EMAIL`` (comma-separated addresses): an e-mail through Airflow's SMTP notifier
   and its ``smtp_default`` connection (``MM2_FAILOVER_NOTIFY_SMTP_CONN`` for another). ``MM2_FAILOVER_NOTIFIERS``
   (comma-separated ``module:factory``): any other notifier - the factory is called with no arguments and returns an
   Airflow notifier or any callable taking the task's context (Slack, a pager, a webhook). Both may be set.
4. **Never in the way.** A notifier that fails is logged and the next one runs; the task's outcome is Airflow's,
   whatever a notifier does. With no notifier configured the failure is said once, as a warning in the task's log.
5. **Readiness degrading.** What the readiness interval found worse than the one before (rules 5 of
   :mod:`mm2_failover.rules.readiness`) goes to the same channels, one message per interval with each change on a line of
   its own, a link to the Readiness page and to the interval's run; the task itself succeeds (it measured).
6. **A run past its deadline.** A run that has not ended a DAG's deadline after it was queued (Airflow's
   ``DeadlineAlert``; the table is :data:`mm2_failover.dag_defaults.RUN_DEADLINES`) is told once, to the same channels,
   while it is still going: stuck, waiting for an approval nobody gave, or slower than it should be. The subject
   names the DAG, the run and how long it has gone; the body its state and both links. A run that already ended when
   its deadline passed says nothing here (Airflow keeps a failed run's deadline; its failure was told by rule 1).
7. **What on-call needs besides failures.** "Approval requested" when a failover's plan waits for a decision (the
   request's subject and summary, the link to the plan's page and to Airflow's Required Actions); "failover
   verified" when its verify task passed (groups moved, partitions at an exact position, at MM2's checkpoint or at
   a floor, records re-read, lost to retention); "rollback done" when a rollback's verify passed. Same channels;
   never in the way (rule 4).
8. **Who, changeable without a redeploy.** Rule 3's variables, plus the ``[mm2_failover]`` section of Airflow's
   configuration (``notify_email``, ``notify_smtp_conn_id``, ``notifiers``) and the Airflow connection
   ``mm2_failover_notify`` (its extra: ``{"email": "a@x, b@x", "notifiers": "mod:factory", "smtp_conn_id": ..}``),
   read at every message - edited in the UI, it takes effect at the next one. Addresses and notifiers from all
   three are told (each once); the SMTP connection is the first one given (variables, configuration, connection).
   A mail has a plain-text and an HTML part.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from urllib.parse import quote

from mm2_failover.rules.approval import lost_text, reread_text
from mm2_failover.rules.words import duration as duration_text

MAX_REASON = 4000
EMAIL_VAR = "MM2_FAILOVER_NOTIFY_EMAIL"
SMTP_CONN_VAR = "MM2_FAILOVER_NOTIFY_SMTP_CONN"
NOTIFIERS_VAR = "MM2_FAILOVER_NOTIFIERS"
DEFAULT_SMTP_CONN = "smtp_default"


@dataclass(frozen=True)
class Failure:
    """What rule 2 needs to know about one failed task."""

    dag_id: str
    run_id: str
    task_id: str
    try_number: int
    reason: str  # the error's message ("" when Airflow gave none: a killed process)
    run_folder: str  # the run's folder name under $MM2_FAILOVER_ARTIFACTS/<dag>/ (ui.runs.safe_name of the run id)
    base_url: str = ""  # Airflow's public address ([api] base_url); "" leaves the links relative


@dataclass(frozen=True)
class Message:
    subject: str
    text: str
    html: str


def reason_of(reason: str) -> str:
    """Rule 2: the whole reason, bounded; an empty one says what that usually means."""
    r = (reason or "").strip()
    if not r:
        return (
            "no error message: the task's process ended without one (killed, out of memory, or past its "
            "execution_timeout) - see the task's log"
        )
    return r if len(r) <= MAX_REASON else r[:MAX_REASON] + f" ... ({len(r) - MAX_REASON} more characters in the log)"


#: the DAGs whose runs have a report page (report.json or drill.json); readiness has its own page, the archive and
#: the rollback keep none: a message about their runs links to the run in Airflow only
REPORT_DAGS = frozenset({"mm2_failover", "mm2_failover_drill"})
READINESS_DAG = "mm2_failover_readiness"


def report_link(base_url: str, dag_id: str, run_folder: str) -> str:
    """A run's page in the report plugin (relative when Airflow's public address is unknown)."""
    return f"{base_url.rstrip('/')}/mm2/runs/{quote(dag_id, safe='')}/{quote(run_folder, safe='')}"


def links(f: Failure) -> dict[str, str]:
    """The pages a failure message links to: the run's report where its DAG has one (:data:`REPORT_DAGS`), the
    Readiness page for a readiness run, and the run in Airflow."""
    base = f.base_url.rstrip("/")
    out = {}
    if f.dag_id in REPORT_DAGS:
        out["report"] = report_link(base, f.dag_id, f.run_folder)
    elif f.dag_id == READINESS_DAG:
        out["readiness"] = f"{base}/mm2/readiness"
    out["airflow"] = f"{base}/dags/{quote(f.dag_id, safe='')}/runs/{quote(f.run_id, safe='')}"
    return out


LINK_TEXT = {
    "report": ("Report", "The run's report"),
    "readiness": ("Readiness", "The Readiness page"),
    "airflow": ("Airflow", "the run in Airflow"),
}


def links_text(ln: dict[str, str]) -> str:
    return "".join(f"{LINK_TEXT[k][0]}: {u}\n" for k, u in ln.items())


def links_html(ln: dict[str, str]) -> str:
    return "<p>" + " - ".join(f'<a href="{escape(u)}">{LINK_TEXT[k][1]}</a>' for k, u in ln.items()) + "</p>"


def message(f: Failure) -> Message:
    """Rule 2."""
    reason = reason_of(f.reason)
    first = reason.splitlines()[0]
    first = first if len(first) <= 160 else first[:157] + "..."
    subject = f"[mm2-failover] {f.dag_id} run {f.run_id}: {f.task_id} FAILED - {first}"
    ln = links(f)
    text = (
        f"DAG {f.dag_id}, run {f.run_id}: task {f.task_id} failed on try {f.try_number} and will not be retried."
        f"\n\nReason:\n{reason}\n\n" + links_text(ln)
    )
    html = (
        f"<p>DAG <b>{escape(f.dag_id)}</b>, run <b>{escape(f.run_id)}</b>: task <b>{escape(f.task_id)}</b> "
        f"failed on try {f.try_number} and will not be retried.</p><p>Reason:</p><pre>{escape(reason)}</pre>"
        + links_html(ln)
    )
    return Message(subject, text, html)


def readiness_message(dag_id: str, run_id: str, changes: list[str], base_url: str = "") -> Message:
    """Rule 5."""
    base = base_url.rstrip("/")
    page = f"{base}/mm2/readiness"
    run = f"{base}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"
    first = changes[0] if len(changes[0]) <= 120 else changes[0][:117] + "..."
    more = f" (+{len(changes) - 1} more)" if len(changes) > 1 else ""
    subject = f"[mm2-failover] readiness degraded: {first}{more}"
    body = "\n".join(f"- {reason_of(c)}" for c in changes)
    text = (
        f"The readiness check {dag_id} run {run_id} found what a failover would do now worse than at the check "
        f"before:\n\n{body}\n\nReadiness: {page}\nAirflow: {run}\n"
    )
    html = (
        f"<p>The readiness check <b>{escape(dag_id)}</b> run <b>{escape(run_id)}</b> found what a failover would "
        "do now worse than at the check before:</p><ul>"
        + "".join(f"<li>{escape(reason_of(c))}</li>" for c in changes)
        + f'</ul><p><a href="{escape(page)}">The Readiness page</a> - <a href="{escape(run)}">the run in '
        "Airflow</a></p>"
    )
    return Message(subject, text, html)


ENDED = frozenset({"success", "failed"})


def deadline_message(
    dag_id: str,
    run_id: str,
    state: str,
    queued_at: str,
    deadline_time: str,
    interval_seconds: float,
    run_folder: str,
    base_url: str = "",
) -> Message | None:
    """Rule 6; None for a run that had already ended."""
    if (state or "").lower() in ENDED:
        return None
    took = duration_text(interval_seconds)
    ln = links(Failure(dag_id, run_id, "", 0, "", run_folder, base_url))
    subject = f"[mm2-failover] {dag_id} run {run_id}: NOT FINISHED {took} after it was queued (state {state})"
    what = (
        f"DAG {dag_id}, run {run_id} was queued at {queued_at} and has not ended {took} later (its deadline, "
        f"{deadline_time}); its state is {state}. It may be stuck, waiting for an approval, or slower than it "
        "should be: look at its running task and its log."
    )
    text, html = f"{what}\n\n" + links_text(ln), f"<p>{escape(what)}</p>" + links_html(ln)
    return Message(subject, text, html)


def _links_of(dag_id: str, run_id: str, run_folder: str, base_url: str) -> dict[str, str]:
    return links(Failure(dag_id, run_id, "", 0, "", run_folder, base_url))


def approval_message(dag_id: str, run_id: str, run_folder: str, subject: str, body: str, base_url: str = "") -> Message:
    """Rule 7: the approval request as it was asked (its subject and Markdown summary), with where to answer."""
    ln = _links_of(dag_id, run_id, run_folder, base_url)
    where = (
        "Answer in the run's Required Actions in Airflow (or through the REST API: PATCH .../taskInstances/"
        "approve_plan/-1/hitlDetails); the plan waits, nothing is written until it is approved."
    )
    text = f"{body}\n\n{where}\n\n" + links_text(ln)
    html = f'<pre style="white-space:pre-wrap">{escape(body)}</pre><p>{escape(where)}</p>' + links_html(ln)
    return Message(f"[mm2-failover] {dag_id} run {run_id}: APPROVAL REQUESTED - {subject}", text, html)


def verified_summary(totals: dict) -> str:
    """Rule 7: a verified failover in one line - groups moved, where their partitions resume, what is re-read and
    lost, each figure as what it is (:func:`mm2_failover.rules.approval.reread_text`)."""
    committed = totals.get("committed") or 0
    exact = totals.get("partitions_exact") or 0
    return (
        f"{totals.get('groups_moved', 0)} group(s) moved, {committed} partition(s) committed: {exact} at an exact "
        f"position, {max(0, committed - exact)} at MM2's checkpoint or a proven floor; re-read "
        f"{reread_text(totals)}; lost to retention {lost_text(totals)}"
    )


def verified_message(dag_id: str, run_id: str, run_folder: str, totals: dict, base_url: str = "") -> Message:
    """Rule 7: a failover whose verify passed."""
    line = verified_summary(totals)
    ln = _links_of(dag_id, run_id, run_folder, base_url)
    what = f"DAG {dag_id}, run {run_id}: the failover is verified - every planned offset is committed on the target."
    return Message(
        f"[mm2-failover] {dag_id} run {run_id}: FAILOVER VERIFIED - {line}",
        f"{what}\n\n{line}\n\n" + links_text(ln),
        f"<p>{escape(what)}</p><p>{escape(line)}</p>" + links_html(ln),
    )


def rollback_message(
    dag_id: str, run_id: str, run_folder: str, backup: str, groups: int, base_url: str = ""
) -> Message:
    """Rule 7: a rollback whose verify passed."""
    ln = _links_of(dag_id, run_id, run_folder, base_url)
    what = (
        f"DAG {dag_id}, run {run_id}: the rollback is done - {groups} group(s) hold exactly the commits saved in "
        f"{backup} again."
    )
    return Message(
        f"[mm2-failover] {dag_id} run {run_id}: ROLLBACK DONE - {groups} group(s) restored",
        f"{what}\n\n" + links_text(ln),
        f"<p>{escape(what)}</p>" + links_html(ln),
    )


@dataclass(frozen=True)
class Channels:
    """Rule 3, read from the environment: who is told."""

    emails: tuple[str, ...]
    smtp_conn_id: str
    factories: tuple[str, ...]  # "module:factory"

    @property
    def none(self) -> bool:
        return not self.emails and not self.factories


#: rule 8: where else the channels are set - the ``[mm2_failover]`` configuration's keys, and the connection
CONFIG_KEYS = {"email": "notify_email", "smtp_conn_id": "notify_smtp_conn_id", "notifiers": "notifiers"}
NOTIFY_CONN_ID = "mm2_failover_notify"


def _items(v) -> list[str]:
    if isinstance(v, (list, tuple)):
        v = ",".join(str(x) for x in v)
    return [a.strip() for a in str(v or "").split(",") if a.strip()]


def channels(
    env: dict[str, str], config: dict | None = None, conn_extra: dict | None = None, bad: list[str] | None = None
) -> Channels:
    """Rules 3 and 8: the variables, the ``[mm2_failover]`` configuration (``config``: its keys as in
    :data:`CONFIG_KEYS`) and the ``mm2_failover_notify`` connection's extra, merged - every address and notifier
    once, in that order; the first SMTP connection given. A malformed factory spec is a ValueError naming where it
    was set and the entry - or, given ``bad``, said there and left out (the other channels still told)."""
    sources = [
        (EMAIL_VAR, NOTIFIERS_VAR, env.get(EMAIL_VAR), env.get(NOTIFIERS_VAR), env.get(SMTP_CONN_VAR)),
        (
            "[mm2_failover] notify_email",
            "[mm2_failover] notifiers",
            *((config or {}).get(CONFIG_KEYS[k]) for k in ("email", "notifiers", "smtp_conn_id")),
        ),
        (
            f"connection {NOTIFY_CONN_ID}",
            f"connection {NOTIFY_CONN_ID}",
            *((conn_extra or {}).get(k) for k in ("email", "notifiers", "smtp_conn_id")),
        ),
    ]
    emails: dict[str, None] = {}
    factories: dict[str, None] = {}
    smtp = ""
    for _where_e, where_n, e, n, c in sources:
        emails.update(dict.fromkeys(_items(e)))
        for spec in _items(n):
            mod, _, name = spec.partition(":")
            if not mod or not name:
                why = f"{where_n}: {spec!r} is not module:factory (e.g. mypkg.alerts:pager)"
                if bad is None:
                    raise ValueError(why)
                bad.append(why)  # rule 4: one bad entry never silences the others
                continue
            factories[spec] = None
        smtp = smtp or str(c or "").strip()
    return Channels(tuple(emails), smtp or DEFAULT_SMTP_CONN, tuple(factories))
