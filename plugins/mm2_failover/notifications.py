"""The Airflow notifier every task of the DAGs here reports its final failure through (``on_failure_callback``,
set by :func:`mm2_failover.dag_defaults.apply_task_defaults`). What it says and to whom: :mod:`mm2_failover.rules.notify`.
"""

from __future__ import annotations

import importlib
import logging
import os
from email.message import EmailMessage

from airflow.sdk import BaseHook, BaseNotifier

from mm2_failover.adapters.config import run_dir

log = logging.getLogger(__name__)


def base_url() -> str:
    """Airflow's public address, for the links (``[api] base_url``); "" when unset."""
    try:
        from airflow.configuration import conf  # lazy: in the try (unreadable config: its fallback)

        return conf.get("api", "base_url", fallback="") or ""
    except Exception:  # noqa: BLE001 - a link without its host is still a link
        return ""


class RunFailureNotifier(BaseNotifier):
    """Rule 1-4 of :mod:`mm2_failover.rules.notify`: builds the message from the failed task's context and hands it to
    every configured channel (Airflow's ``SmtpNotifier``; any ``module:factory``), none of which can change the
    task's outcome."""

    template_fields = ()

    def notify(self, context) -> None:
        from mm2_failover.rules import notify as rules  # lazy: not at DAG parse
        from mm2_failover.stages.archive import ARCHIVE_DAG, record_failure

        ti = context["ti"]
        exc = context.get("exception")
        failure = rules.Failure(
            ti.dag_id,
            ti.run_id,
            ti.task_id,
            int(getattr(ti, "try_number", 0) or 0),
            str(exc) if exc is not None else "",
            run_dir(ti.dag_id, ti.run_id).name,
            base_url(),
        )
        if ti.dag_id == ARCHIVE_DAG:  # readiness counts the archive's failed runs since its last success
            try:
                record_failure(ti.run_id, ti.task_id, failure.reason)
            except Exception as e:  # noqa: BLE001 - rule 4: telling never changes the task's outcome
                log.error("the archive's failure could not be recorded (%s: %s)", type(e).__name__, e)
        deliver(rules.message(failure), context)


def deliver(msg, context) -> int:
    """Hand ``msg`` to every configured channel (rules 3-4 of :mod:`mm2_failover.rules.notify`); returns how many took
    it. Never raises."""
    from mm2_failover.rules import notify as rules  # lazy: not at DAG parse

    bad: list[str] = []
    ch = rules.channels(dict(os.environ), _config(), _connection_extra(), bad)
    for why in bad:
        log.error("a notifier is NOT configured right (%s): the others are told of %s", why, msg.subject)
    if ch.none:
        log.warning(
            "no notifier configured (%s, %s): nobody was told that %s",
            rules.EMAIL_VAR,
            rules.NOTIFIERS_VAR,
            msg.subject,
        )
        return 0
    senders = []
    if ch.emails:
        senders.append((f"e-mail to {', '.join(ch.emails)} via {ch.smtp_conn_id}", lambda: _email(ch, msg, context)))
    for spec in ch.factories:
        senders.append((spec, lambda spec=spec: _custom(spec, msg, context)))
    told = 0
    for name, send in senders:
        try:
            send()
            log.info("notified (%s): %s", name, msg.subject)
            told += 1
        except Exception as e:  # noqa: BLE001 - rule 4: a notifier never changes the task's outcome
            log.error("notifier %s failed (%s: %s); the next one runs", name, type(e).__name__, e)
    return told


def _config() -> dict:
    """Rule 8 of :mod:`mm2_failover.rules.notify`: the ``[mm2_failover]`` section of Airflow's configuration."""
    from mm2_failover.rules import notify as rules  # lazy: not at DAG parse

    try:
        from airflow.configuration import conf  # lazy: in the try (unreadable config: its fallback)

        return {k: conf.get("mm2_failover", k, fallback="") for k in rules.CONFIG_KEYS.values()}
    except Exception as e:  # noqa: BLE001 - rule 4: a configuration that cannot be read leaves the other channels
        log.warning("[mm2_failover] configuration not read (%s: %s)", type(e).__name__, e)
        return {}


def _connection_extra() -> dict:
    """Rule 8: the ``mm2_failover_notify`` connection's extra ({} when there is none), read at every message."""
    from mm2_failover.rules import notify as rules  # lazy: not at DAG parse

    try:
        extra = BaseHook.get_connection(rules.NOTIFY_CONN_ID).extra_dejson
    except Exception:  # noqa: BLE001 - no such connection (Airflow raises its own not-found error): none
        return {}
    return extra if isinstance(extra, dict) else {}


def _email(ch, msg, context) -> None:
    """A mail with a plain-text and an HTML part (multipart/alternative) through Airflow's SMTP hook and the
    ``smtp_conn_id`` connection (its TLS, login, sender and retries)."""
    from airflow.providers.smtp.hooks.smtp import SmtpHook  # lazy: not at DAG parse (airflow.providers.smtp.hooks.smtp)

    with SmtpHook(smtp_conn_id=ch.smtp_conn_id) as hook:
        client = getattr(hook, "_smtp_client", None)
        if client is None:  # a provider that keeps its client elsewhere: its own HTML-only mail
            hook.send_email_smtp(to=list(ch.emails), subject=msg.subject, html_content=msg.html)
            return
        if not hook.from_email:  # as the hook's own send: no sender made up
            raise ValueError(f"the SMTP connection {ch.smtp_conn_id} has no from_email (its extra): set the sender")
        m = EmailMessage()
        m["Subject"], m["From"], m["To"] = msg.subject, hook.from_email, ", ".join(ch.emails)
        m.set_content(msg.text)
        m.add_alternative(msg.html, subtype="html")
        for attempt in range(hook.smtp_retry_limit + 1):
            try:
                client.send_message(m)
                return
            except Exception:
                if attempt == hook.smtp_retry_limit:
                    raise


def tell(msg) -> int:
    """Rule 7: a message that is not about a failure (approval requested, failover verified, rollback done), to
    the same channels; never raises, never changes the task's outcome."""
    try:
        return deliver(msg, {})
    except Exception as e:  # noqa: BLE001 - rule 4
        log.error("not notified (%s: %s): %s", type(e).__name__, e, msg.subject)
        return 0


def _custom(spec: str, msg, context) -> None:
    """``module:factory`` -> the factory's notifier (or callable), called with the task's context plus the message
    under ``mm2_failover_message``."""
    mod, _, name = spec.partition(":")
    target = getattr(importlib.import_module(mod), name)()
    target({**dict(context), "mm2_failover_message": msg})


def deadline_missed(context, interval_seconds: float = 0) -> int:
    """Rule 6 of :mod:`mm2_failover.rules.notify`: the callback of every DAG's ``DeadlineAlert``
    (:func:`mm2_failover.dag_defaults.run_deadline`), run by the executor with the context Airflow gives a deadline
    callback (``dag_run`` as the REST API shows it, and ``deadline``); returns how many channels took the message."""
    from mm2_failover.rules import notify as rules  # lazy: not at DAG parse

    run = dict((context or {}).get("dag_run") or {})
    dl = dict((context or {}).get("deadline") or {})
    dag_id, run_id, state = (
        str(run.get("dag_id", "?")),
        str(run.get("dag_run_id") or run.get("run_id") or "?"),
        str(run.get("state", "?")),
    )
    msg = rules.deadline_message(
        dag_id,
        run_id,
        state,
        str(run.get("queued_at", "?")),
        str(dl.get("deadline_time", "?")),
        float(interval_seconds),
        run_dir(dag_id, run_id).name,
        base_url(),
    )
    if msg is None:
        log.info("deadline of %s run %s passed after the run ended (%s): nothing to tell", dag_id, run_id, state)
        return 0
    return deliver(msg, context)
