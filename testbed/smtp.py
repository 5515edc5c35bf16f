"""A real SMTP server on loopback (aiosmtpd) for the failure notifications' tests, and the Airflow connection that
points at it."""

from __future__ import annotations

import email
import json
from email import policy


def smtp_server():
    """Started on a free loopback port: ``(controller, mails)``, where ``mails`` lists ``(recipients, message)`` of
    every message received, parsed. Stop it with ``controller.stop()``."""
    from aiosmtpd.controller import Controller

    from testbed.bed import free_port

    mails: list = []

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            mails.append((envelope.rcpt_tos, email.message_from_bytes(envelope.content, policy=policy.default)))
            return "250 OK"

    c = Controller(Handler(), hostname="127.0.0.1", port=free_port())
    c.start()
    return c, mails


def smtp_conn(port: int, from_email: str = "mm2-failover@localhost", timeout: int = 10) -> str:
    """``AIRFLOW_CONN_SMTP_DEFAULT`` for a plain SMTP server on loopback (no TLS, no login, no retry)."""
    return json.dumps(
        {
            "conn_type": "smtp",
            "host": "127.0.0.1",
            "port": port,
            "extra": {
                "disable_tls": True,
                "disable_ssl": True,
                "retry_limit": 0,
                "from_email": from_email,
                "timeout": timeout,
            },
        }
    )
