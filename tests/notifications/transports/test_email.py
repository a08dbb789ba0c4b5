from __future__ import annotations

import email
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from email.message import Message as MimeMessage
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from django.test import override_settings

from notifications.transports.base import Message, TransportError, TransportSettings, get_transport
from notifications.transports.email import EmailTransport

SETTINGS = TransportSettings(default_from_email="scheduler@example.com", timeout_seconds=5)


def make_message(subject: str = "Task nightly report failed") -> Message:
    task = {"id": "t-1", "name": "nightly report"}
    run = {"id": "r-1", "status": "failed", "attempt": 2}
    return Message(
        delivery_id="n-1",
        event="failed",
        created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        subject=subject,
        text="Run r-1 of nightly report failed.\nhttps://scheduler.example/runs/r-1",
        body={},
        task=task,
        run=run,
        run_url="https://scheduler.example/runs/r-1",
    )


class _Mailbox:
    """aiosmtpd handler: refuses nobody@ for good (550) and later@ for now (450)."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], MimeMessage]] = []

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        if address.startswith("nobody@"):
            return "550 5.1.1 no such user"
        if address.startswith("later@"):
            return "450 4.2.0 greylisted, try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append((list(envelope.rcpt_tos), email.message_from_bytes(envelope.content)))
        return "250 Message accepted"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _smtp_settings(port: int) -> override_settings:
    return override_settings(
        EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
        EMAIL_HOST="127.0.0.1",
        EMAIL_PORT=port,
        EMAIL_HOST_USER="",
        EMAIL_HOST_PASSWORD="",
        EMAIL_USE_TLS=False,
        EMAIL_USE_SSL=False,
        EMAIL_TIMEOUT=5,
    )


@pytest.fixture
def mailbox() -> Iterator[_Mailbox]:
    handler = _Mailbox()
    port = _free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    with _smtp_settings(port):
        yield handler
    controller.stop()


def test_email_is_delivered_over_smtp(mailbox: _Mailbox) -> None:
    get_transport("email").send({"address": "ops@example.com"}, make_message(), settings=SETTINGS)

    [(recipients, mime)] = mailbox.messages
    assert recipients == ["ops@example.com"]
    assert mime["Subject"] == "Task nightly report failed"
    assert mime["From"] == "scheduler@example.com"
    assert mime["X-Scheduler-Delivery"] == "n-1"
    assert mime["X-Scheduler-Event"] == "failed"
    assert "https://scheduler.example/runs/r-1" in mime.get_payload(decode=True).decode()


def test_newlines_in_subject_cannot_inject_headers(mailbox: _Mailbox) -> None:
    message = make_message(subject="Task failed\nBcc: victim@example.com")
    EmailTransport().send({"address": "ops@example.com"}, message, settings=SETTINGS)
    [(recipients, mime)] = mailbox.messages
    assert recipients == ["ops@example.com"]
    assert mime["Bcc"] is None


@pytest.mark.parametrize(
    "address", ["not-an-address", "a@b@example.com", "x@example.com\nBcc: y@z"]
)
def test_invalid_address_is_permanent(mailbox: _Mailbox, address: str) -> None:
    with pytest.raises(TransportError, match="invalid email address") as info:
        EmailTransport().send({"address": address}, make_message(), settings=SETTINGS)
    assert info.value.permanent is True
    assert mailbox.messages == []


def test_refused_recipient_is_permanent(mailbox: _Mailbox) -> None:
    with pytest.raises(TransportError, match="550") as info:
        EmailTransport().send({"address": "nobody@example.com"}, make_message(), settings=SETTINGS)
    assert info.value.permanent is True


def test_temporarily_refused_recipient_is_transient(mailbox: _Mailbox) -> None:
    with pytest.raises(TransportError, match="450") as info:
        EmailTransport().send({"address": "later@example.com"}, make_message(), settings=SETTINGS)
    assert info.value.permanent is False


def test_unreachable_smtp_server_is_transient() -> None:
    with _smtp_settings(_free_port()), pytest.raises(TransportError) as info:
        EmailTransport().send({"address": "ops@example.com"}, make_message(), settings=SETTINGS)
    assert info.value.permanent is False
