"""Who hears about a failed run, and what they read (mm2_failover/rules/notify.py, by rule), and the notifier that sends it
(mm2_failover/notifications.py) - over a real SMTP server on loopback (aiosmtpd)."""

from __future__ import annotations

import sys
import time
import types

import pytest

from mm2_failover.rules import notify as rules
from mm2_failover.rules.notify import Failure

F = Failure(
    "mm2_failover",
    "manual__2026-11-26T01:02:03+00:00",
    "apply_group_offsets",
    3,
    "refused, nothing written: plan rule 4: orders-app[2] moved since the snapshot\nsecond line",
    "manual__2026-11-26T01_02_03+00_00",
    "https://airflow.example",
)


# ------------------------------------------------------------------------------------------ 2. what they read


def test_the_subject_names_the_dag_the_run_the_task_and_the_reason_s_first_line():
    m = rules.message(F)
    assert m.subject == (
        "[mm2-failover] mm2_failover run manual__2026-11-26T01:02:03+00:00: apply_group_offsets "
        "FAILED - refused, nothing written: plan rule 4: orders-app[2] moved since the snapshot"
    )
    assert "second line" not in m.subject


def test_the_body_has_the_whole_reason_the_try_and_both_links_quoted():
    m = rules.message(F)
    assert "second line" in m.text and "try 3" in m.text
    assert "https://airflow.example/mm2/runs/mm2_failover/manual__2026-11-26T01_02_03%2B00_00" in m.text
    assert "https://airflow.example/dags/mm2_failover/runs/manual__2026-11-26T01%3A02%3A03%2B00%3A00" in m.text
    assert (
        "<pre>refused, nothing written: plan rule 4: orders-app[2] moved since the snapshot\nsecond line</pre>"
        in m.html
    )


def test_a_long_reason_is_bounded_and_an_empty_one_says_what_it_usually_means():
    long = rules.message(Failure(**{**F.__dict__, "reason": "x" * 5000}))
    assert "x" * rules.MAX_REASON + " ... (1000 more characters in the log)" in long.text
    assert len(long.subject) < 300
    empty = rules.message(Failure(**{**F.__dict__, "reason": ""}))
    assert "killed" in empty.subject and "execution_timeout" in empty.text


def test_the_html_body_escapes_what_the_reason_carries():
    m = rules.message(Failure(**{**F.__dict__, "reason": "<script>alert(1)</script>"}))
    assert "<script>" not in m.html and "&lt;script&gt;" in m.html


# ------------------------------------------------------------------------------------------ 3. who is told


def test_channels_come_from_the_environment():
    assert rules.channels({}).none
    ch = rules.channels({rules.EMAIL_VAR: " oncall@example.com, dr@example.com ,", rules.NOTIFIERS_VAR: "a.b:c"})
    assert ch.emails == ("oncall@example.com", "dr@example.com") and ch.smtp_conn_id == "smtp_default"
    assert ch.factories == ("a.b:c",) and not ch.none
    assert rules.channels({rules.EMAIL_VAR: "x@y", rules.SMTP_CONN_VAR: "smtp_ops"}).smtp_conn_id == "smtp_ops"
    with pytest.raises(ValueError, match="MM2_FAILOVER_NOTIFIERS: 'pager' is not module:factory"):
        rules.channels({rules.NOTIFIERS_VAR: "pager"})


# ------------------------------------------------------------------------------------------ the notifier


def logged(caplog, capfd) -> str:
    """What the notifier logged: through pytest's handler, or on the console once Airflow's logging took over."""
    out, err = capfd.readouterr()
    return caplog.text + out + err


def context(exc: Exception | None = None) -> dict:
    ti = types.SimpleNamespace(dag_id=F.dag_id, run_id=F.run_id, task_id=F.task_id, try_number=3)
    return {"ti": ti, "exception": exc}


SENT: list = []


def recording():
    return lambda ctx: SENT.append(ctx["mm2_failover_message"].subject)


def broken():
    def fail(ctx):
        raise RuntimeError("the pager is down")

    return fail


@pytest.fixture
def smtp(monkeypatch):
    """A real SMTP server on loopback (aiosmtpd), Airflow's smtp_default connection pointing at it."""
    from testbed.smtp import smtp_conn, smtp_server

    c, got = smtp_server()
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", smtp_conn(c.port))
    try:
        yield got
    finally:
        c.stop()


def test_the_notifier_mails_the_message_and_runs_every_channel_even_after_one_fails(smtp, monkeypatch, caplog, capfd):
    from mm2_failover.notifications import RunFailureNotifier

    SENT.clear()
    monkeypatch.setenv(rules.EMAIL_VAR, "oncall@example.com")
    monkeypatch.setenv(rules.NOTIFIERS_VAR, f"{__name__}:broken,{__name__}:recording")
    monkeypatch.setitem(sys.modules, __name__, sys.modules[__name__])
    RunFailureNotifier().notify(context(RuntimeError("refused, nothing written: the plan moved")))
    deadline = time.monotonic() + 10
    while not smtp and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(smtp) == 1, logged(caplog, capfd)
    rcpt, msg = smtp[0]
    assert rcpt == ["oncall@example.com"] and msg["From"] == "mm2-failover@localhost"
    assert msg["Subject"].startswith(
        "[mm2-failover] mm2_failover run manual__2026-11-26T01:02:03+00:00: "
        "apply_group_offsets FAILED - refused, nothing written: the plan moved"
    )
    body = msg.get_body(("html",)).get_content()
    assert "/mm2/runs/mm2_failover/manual__2026-11-26T01_02_03%2B00_00" in body
    assert SENT and SENT[0] == msg["Subject"]  # the broken channel before it did not stop it (rule 4)
    assert "the pager is down" in logged(caplog, capfd)


def test_nobody_configured_is_said_in_the_task_log_and_never_fails_the_callback(monkeypatch, caplog, capfd):
    from mm2_failover.notifications import RunFailureNotifier

    monkeypatch.delenv(rules.EMAIL_VAR, raising=False)
    monkeypatch.delenv(rules.NOTIFIERS_VAR, raising=False)
    RunFailureNotifier().notify(context(None))
    text = logged(caplog, capfd)
    assert "no notifier configured" in text and "nobody was told" in text


def test_an_smtp_server_that_is_down_is_logged_not_raised(monkeypatch, caplog, capfd):
    from mm2_failover.notifications import RunFailureNotifier
    from testbed.bed import free_port
    from testbed.smtp import smtp_conn

    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", smtp_conn(free_port(), "x@localhost", timeout=3))
    monkeypatch.setenv(rules.EMAIL_VAR, "oncall@example.com")
    monkeypatch.delenv(rules.NOTIFIERS_VAR, raising=False)
    RunFailureNotifier().notify(context(RuntimeError("boom")))
    assert "notifier e-mail to oncall@example.com via smtp_default failed" in logged(caplog, capfd)


def test_readiness_degrading_is_one_message_with_every_change_and_the_pages_link(smtp, monkeypatch, caplog, capfd):
    """Rule 5, through the same channels as a failure (a real SMTP server on loopback)."""
    from mm2_failover.notifications import deliver

    monkeypatch.setenv(rules.EMAIL_VAR, "oncall@example.com")
    monkeypatch.delenv(rules.NOTIFIERS_VAR, raising=False)
    changes = ["2 group(s) no longer provable exactly: a (checkpoint), b <floor>", "alias primary: archive stale"]
    msg = rules.readiness_message("mm2_failover_readiness", "scheduled__x", changes, "http://af:8080/")
    assert msg.subject == (
        "[mm2-failover] readiness degraded: 2 group(s) no longer provable exactly: a (checkpoint), b <floor> (+1 more)"
    )
    assert "http://af:8080/mm2/readiness" in msg.text and "- alias primary: archive stale" in msg.text
    assert "b &lt;floor&gt;" in msg.html
    assert deliver(msg, context(None)) == 1
    deadline = time.monotonic() + 10
    while not smtp and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(smtp) == 1 and smtp[0][1]["Subject"] == msg.subject, logged(caplog, capfd)


# ------------------------------------------------------------------------------------------ 6. a run past its deadline


def deadline_context(state: str) -> dict:
    """What Airflow 3.3 hands a deadline callback (airflow.models.deadline.Deadline.handle_miss)."""
    return {
        "dag_run": {
            "dag_id": "mm2_failover",
            "dag_run_id": "manual__2026-11-26T01:02:03+00:00",
            "state": state,
            "queued_at": "2026-11-26T01:02:03Z",
        },
        "deadline": {"id": "d1", "deadline_time": "2026-11-26T01:32:03Z"},
    }


def test_a_run_past_its_deadline_names_the_run_how_long_and_its_state_with_both_links():
    msg = rules.deadline_message(
        "mm2_failover",
        F.run_id,
        "running",
        "2026-11-26T01:02:03Z",
        "2026-11-26T01:32:03Z",
        1800,
        F.run_folder,
        "https://airflow.example/",
    )
    assert msg.subject == (
        f"[mm2-failover] mm2_failover run {F.run_id}: NOT FINISHED 30 min after it was queued (state running)"
    )
    assert "queued at 2026-11-26T01:02:03Z" in msg.text and "deadline, 2026-11-26T01:32:03Z" in msg.text
    assert "https://airflow.example/mm2/runs/mm2_failover/manual__2026-11-26T01_02_03%2B00_00" in msg.text
    assert "https://airflow.example/dags/mm2_failover/runs/manual__2026-11-26T01%3A02%3A03%2B00%3A00" in msg.text
    assert rules.duration_text(95) == "1 min 35 s" and rules.duration_text(30) == "30 s"


@pytest.mark.parametrize("state", ["success", "failed", "SUCCESS"])
def test_a_run_that_had_already_ended_when_its_deadline_passed_says_nothing(state):
    """Airflow keeps a failed run's deadline and calls it later: the failure was already told (rule 1)."""
    assert rules.deadline_message("mm2_failover", F.run_id, state, "q", "d", 60, F.run_folder) is None


def test_the_deadline_callback_mails_a_running_run_and_not_an_ended_one(smtp, monkeypatch, caplog, capfd):
    """Rule 6 through the callback Airflow's executor runs, with the context Airflow gives it, over real SMTP."""
    from mm2_failover.notifications import deadline_missed

    monkeypatch.setenv(rules.EMAIL_VAR, "oncall@example.com")
    monkeypatch.delenv(rules.NOTIFIERS_VAR, raising=False)
    assert deadline_missed(context=deadline_context("failed"), interval_seconds=1800) == 0
    assert deadline_missed(context=deadline_context("running"), interval_seconds=1800) == 1
    deadline = time.monotonic() + 10
    while not smtp and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(smtp) == 1, logged(caplog, capfd)
    assert smtp[0][1]["Subject"].startswith(
        "[mm2-failover] mm2_failover run manual__2026-11-26T01:02:03+00:00: NOT FINISHED 30 min"
    )


def test_the_archive_dags_final_failure_is_recorded_for_readiness(tmp_path, monkeypatch):
    """Issue 49 item 3: the failure notifier of mm2_sync_archive's tasks records the failed run (readiness counts the
    runs failed since the archive last succeeded); another DAG's failure is not recorded there."""
    import types

    from mm2_failover import notifications
    from mm2_failover.stages import archive

    monkeypatch.setenv("MM2_FAILOVER_ARCHIVE", str(tmp_path))
    monkeypatch.setattr(notifications, "deliver", lambda msg, context: 0)
    for dag in ("mm2_sync_archive", "mm2_failover"):
        ti = types.SimpleNamespace(dag_id=dag, run_id="scheduled__1", task_id="refresh_latest_state", try_number=3)
        notifications.RunFailureNotifier().notify({"ti": ti, "exception": TypeError("'>' not supported")})
    (rec,) = archive.failures()
    assert (rec["run_id"], rec["task_id"]) == ("scheduled__1", "refresh_latest_state") and "not supported" in rec[
        "reason"
    ]


# ------------------------------------------------------------------------------------------ 7-8. beyond failures


def test_channels_merge_the_variables_the_configuration_and_the_connection_each_address_once():
    ch = rules.channels(
        {rules.EMAIL_VAR: "oncall@example.com"},
        {"notify_email": "dr@example.com, oncall@example.com", "notify_smtp_conn_id": "", "notifiers": "a.b:c"},
        {"email": ["lead@example.com", "dr@example.com"], "notifiers": "a.b:c, d.e:f", "smtp_conn_id": "smtp_ops"},
    )
    assert ch.emails == ("oncall@example.com", "dr@example.com", "lead@example.com")
    assert ch.factories == ("a.b:c", "d.e:f") and ch.smtp_conn_id == "smtp_ops"
    assert rules.channels({}, {}, {"email": "x@y"}).emails == ("x@y",)
    assert rules.channels({rules.SMTP_CONN_VAR: "first"}, {"notify_smtp_conn_id": "second"}).smtp_conn_id == "first"
    with pytest.raises(ValueError, match="connection mm2_failover_notify: 'pager' is not module:factory"):
        rules.channels({}, None, {"notifiers": "pager"})


def test_the_approval_verified_and_rollback_messages_say_what_on_call_needs():
    m = rules.approval_message(
        "mm2_failover",
        "manual__1",
        "manual__1",
        "Move 2 group(s), 6 commit(s)?",
        "**Run** `manual__1` - source reachable, drained.\n<b>",
        "https://af",
    )
    assert m.subject == "[mm2-failover] mm2_failover run manual__1: APPROVAL REQUESTED - Move 2 group(s), 6 commit(s)?"
    assert "Required Actions" in m.text and "https://af/mm2/runs/mm2_failover/manual__1" in m.text
    assert "&lt;b&gt;</pre>" in m.html  # the summary escaped
    totals = {
        "groups_moved": 2,
        "committed": 6,
        "partitions_exact": 5,
        "records_reread_estimate": 3,
        "records_reread_exact": True,
        "records_lost_to_retention": 0,
    }
    assert rules.verified_summary(totals) == (
        "2 group(s) moved, 6 partition(s) committed: 5 at an exact position, 1 "
        "at MM2's checkpoint or a proven floor; re-read 3; lost to retention 0"
    )
    v = rules.verified_message("mm2_failover", "manual__1", "manual__1", totals)
    assert v.subject.startswith("[mm2-failover] mm2_failover run manual__1: FAILOVER VERIFIED - 2 group(s) moved")
    assert "/mm2/runs/mm2_failover/manual__1" in v.text and "every planned offset is committed" in v.html
    unknown = rules.verified_summary({**totals, "records_reread_estimate": None, "partitions_reread_unknown": 1})
    assert "re-read unknown on 1 partition(s)" in unknown  # never a partial sum said as the whole
    r = rules.rollback_message("mm2_failover_rollback", "manual__2", "manual__2", "/a/backup.json", 3)
    assert r.subject == "[mm2-failover] mm2_failover_rollback run manual__2: ROLLBACK DONE - 3 group(s) restored"
    assert "/a/backup.json" in r.text and "/mm2/runs" not in r.text  # the rollback DAG keeps no report page


def test_a_message_reaches_the_connections_addresses_as_text_and_html_over_real_smtp(smtp, monkeypatch):
    """Rule 8 through the real notifier: the mm2_failover_notify connection (Airflow's own connection lookup, here
    from its environment variable) adds its addresses to the variable's; the mail has a text and an HTML part."""
    import json

    from mm2_failover.notifications import tell

    monkeypatch.setenv(rules.EMAIL_VAR, "oncall@example.com")
    monkeypatch.setenv(
        "AIRFLOW_CONN_MM2_FAILOVER_NOTIFY",
        json.dumps({"conn_type": "generic", "extra": {"email": "dr@example.com, oncall@example.com"}}),
    )
    assert tell(rules.rollback_message("mm2_failover_rollback", "manual__2", "manual__2", "/a/backup.json", 3)) == 1
    deadline = time.monotonic() + 10
    while not smtp and time.monotonic() < deadline:
        time.sleep(0.05)
    [(rcpt, msg)] = smtp
    assert rcpt == ["oncall@example.com", "dr@example.com"]
    assert msg.get_content_type() == "multipart/alternative"
    assert "the rollback is done - 3 group(s)" in msg.get_body(("plain",)).get_content()
    assert "<p>DAG mm2_failover_rollback" in msg.get_body(("html",)).get_content()


def test_a_review_one_bad_notifier_entry_never_silences_the_others():
    bad: list[str] = []
    ch = rules.channels({rules.EMAIL_VAR: "oncall@example.com"}, None, {"notifiers": "slackalerts, a.b:c"}, bad)
    assert ch.emails == ("oncall@example.com",) and ch.factories == ("a.b:c",)
    assert bad == ["connection mm2_failover_notify: 'slackalerts' is not module:factory (e.g. mypkg.alerts:pager)"]
