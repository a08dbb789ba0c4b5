"""Secrets canary: every secret gets a unique canary value, the whole flow runs,
and no canary shows up in an API response, a log record, the OpenAPI schema, a notification body,
the database in clear text, or the environment of an executable payload.

The flow: get a token, create one channel of every kind (signing secret, Slack webhook URL,
Slack bot token, email over SMTP with a password), an executable task that prints its whole
environment and notifies every channel, run it with the real worker (in-process, sandboxed),
deliver the notifications to local receivers, then read everything back through the API.
"""

from __future__ import annotations

import email
import json
import logging
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from rest_framework.test import APIClient
from rest_framework_simplejwt.backends import TokenBackend
from rest_framework_simplejwt.tokens import Token

from notifications import services as notification_services
from notifications.models import Notification
from tasks.models import Run
from tasks.worker.worker import Worker
from tests.notifications.transports.test_email import _free_port

pytestmark = pytest.mark.django_db

SIGNING_KEY = "CANARY-jwt-signing-key-0c1d2e3f4a5b6c7d8e9f"
WEBHOOK_SECRET = "CANARY-webhook-secret-7a9c"
SLACK_TOKEN = "xoxb-CANARY-slack-token-4e2b"
SLACK_HOOK_PATH = "/services/T0CANARY/B0CANARY/CANARYhookpath31"
SMTP_PASSWORD = "CANARY-smtp-password-8d1f"
METRICS_TOKEN = "CANARY-metrics-token-6b3a"
SECRET_KEY = "CANARY-django-secret-key-2f7e9a1b3c5d7e9f1a3b5c7d9e1f3a5b7c9d"
ENVIRONMENT = {  # what the worker process itself holds; the payload must see none of it
    "SECRET_KEY": SECRET_KEY,
    "JWT_SIGNING_KEY": SIGNING_KEY,
    "EMAIL_HOST_PASSWORD": SMTP_PASSWORD,
    "SCHEDULER_METRICS_TOKEN": METRICS_TOKEN,
    "SCHEDULER_ENCRYPTION_KEY": "CANARY-encryption-env",
}
SCRIPT = b"#!/bin/sh\nenv\necho done\n"


class Receivers:
    """Webhook and Slack (API and incoming webhook) on one local HTTP server, plus SMTP."""

    def __init__(self) -> None:
        self.http: list[dict[str, Any]] = []
        self.mail: list[bytes] = []
        self.logins: list[bytes] = []
        receivers = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receivers.http.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body.decode()}
                )
                reply = b'{"ok": true, "ts": "1.2"}' if self.path.startswith("/api/") else b"ok"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

        class Mailbox:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
                receivers.mail.append(envelope.content)
                return "250 OK"

        def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, data: Any):
            receivers.logins.append(getattr(data, "password", b""))
            return AuthResult(success=True)

        self.smtp_port = _free_port()
        self.smtp = Controller(
            Mailbox(),
            hostname="127.0.0.1",
            port=self.smtp_port,
            authenticator=authenticator,
            auth_require_tls=False,
        )
        self.smtp.start()

    def close(self) -> None:
        self.smtp.stop()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def receivers() -> Iterator[Receivers]:
    servers = Receivers()
    yield servers
    servers.close()


@pytest.fixture
def canaries(settings, monkeypatch, tmp_path, receivers) -> list[str]:
    """Seed a canary into every secret; return every value that must never be seen."""
    monkeypatch.setattr(Token, "_token_backend", TokenBackend("HS256", SIGNING_KEY))
    settings.SIMPLE_JWT = {**settings.SIMPLE_JWT, "SIGNING_KEY": SIGNING_KEY}
    settings.SECRET_KEY = SECRET_KEY
    settings.SCHEDULER_METRICS_TOKEN = METRICS_TOKEN
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", receivers.smtp_port
    settings.EMAIL_HOST_USER, settings.EMAIL_HOST_PASSWORD = "scheduler", SMTP_PASSWORD
    settings.EMAIL_USE_TLS = False
    settings.SCHEDULER_SLACK_API_URL = f"{receivers.base}/api/"
    settings.SCHEDULER_OUTBOUND_ALLOW = ["127.0.0.1"]
    settings.SCHEDULER_SANDBOX_ALLOW_RLIMIT_ONLY = True
    settings.NOTIFICATIONS_DELIVERY_CONCURRENCY = 1
    settings.MEDIA_ROOT = tmp_path / "media"
    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    return [
        SIGNING_KEY,
        WEBHOOK_SECRET,
        SLACK_TOKEN,
        SLACK_HOOK_PATH.rsplit("/", 1)[-1],
        SMTP_PASSWORD,
        METRICS_TOKEN,
        SECRET_KEY,
        settings.SCHEDULER_ENCRYPTION_KEY,
        *ENVIRONMENT.values(),
    ]


class Recorder:
    """Every API response of the flow, kept for the final check."""

    def __init__(self, client: APIClient) -> None:
        self.client = client
        self.texts: list[str] = []

    def __call__(self, method: str, path: str, data: Any = None, **kwargs: Any) -> Any:
        response = getattr(self.client, method)(path, data, **kwargs)
        self.texts.append(
            f"{method.upper()} {path} {response.status_code}\n"
            + (response.content.decode(errors="replace") if hasattr(response, "content") else "")
        )
        return response


def create_channels(call: Recorder, receivers: Receivers) -> list[str]:
    bodies = [
        {"kind": "webhook", "url": f"{receivers.base}/hook", "secret": WEBHOOK_SECRET},
        {"kind": "slack", "webhook_url": receivers.base + SLACK_HOOK_PATH},
        {"kind": "slack", "token": SLACK_TOKEN, "channel": "C0OPS"},
        {"kind": "email", "address": "ops@example.com"},
    ]
    ids = []
    for body in bodies:
        response = call("post", "/api/v1/channels", body, format="json")
        assert response.status_code == 201, response.content
        ids.append(response.json()["id"])
    # Refusals must not echo the secret they were sent with either.
    bad = [
        {"kind": "webhook", "url": "ftp://example.com/", "secret": WEBHOOK_SECRET},
        {"kind": "slack", "webhook_url": "http://10.0.0.1" + SLACK_HOOK_PATH},
        {"kind": "slack", "token": SLACK_TOKEN},
        {"kind": "email", "address": "ops@example.com", "token": SLACK_TOKEN},
    ]
    for body in bad:
        assert call("post", "/api/v1/channels", body, format="json").status_code == 400
    call("patch", f"/api/v1/channels/{ids[0]}", {"secret": WEBHOOK_SECRET}, format="json")
    return ids


def run_worker(run_id: Any) -> Run:
    worker = Worker(concurrency=1)
    try:
        deadline = time.monotonic() + 60
        while Run.objects.filter(pk=run_id, status__in=["scheduled", "running"]).exists():
            assert time.monotonic() < deadline, "the worker did not finish the run"
            worker.run_once()
            time.sleep(0.02)
    finally:
        worker.pool.shutdown(wait=True)
    return Run.objects.get(pk=run_id)


def test_no_secret_leaks_anywhere(anon, user, canaries, receivers, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    call = Recorder(anon)
    login = {"username": user.username, "password": "password-123"}
    tokens = call("post", "/api/v1/auth/token", login, format="json").json()
    anon.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens['access']}")
    call("post", "/api/v1/auth/token/refresh", {"refresh": tokens["refresh"]}, format="json")
    channels = create_channels(call, receivers)

    notify = [{"channel": c, "events": ["succeeded", "failed"]} for c in channels]
    form = {
        "kind": "executable",
        "name": "print env",
        "payload": json.dumps({"args": []}),
        "max_attempts": 1,
        "schedule": json.dumps({"type": "once", "delay": 3600}),
        "file": SimpleUploadedFile("env.sh", SCRIPT),
    }
    created = call("post", "/task", form, format="multipart")
    assert created.status_code == 201, created.content
    task_id = created.json()["id"]
    # `notify` travels as JSON; a once schedule with no time moves the run to now.
    changed = call(
        "patch",
        f"/api/v1/tasks/{task_id}",
        {"notify": notify, "schedule": {"type": "once"}},
        format="json",
    )
    assert changed.status_code == 200, changed.content

    run = run_worker(Run.objects.get(task_id=task_id).id)
    assert "SCHEDULER_RUN_ID=" in run.output and "done" in run.output, run.output
    delivered = notification_services.deliver_pending(limit=20, now=datetime.now(UTC))
    assert delivered == 4
    assert Notification.objects.filter(status="sent").count() == 4, list(
        Notification.objects.values_list("last_error", flat=True)
    )

    for path in [
        "/api/v1/channels",
        *(f"/api/v1/channels/{c}" for c in channels),
        "/api/v1/tasks",
        f"/api/v1/tasks/{task_id}",
        f"/api/v1/tasks/{task_id}/runs",
        f"/api/v1/runs/{run.id}",
        f"/task?id={task_id}",
        "/tasks",
        "/api/v1/notifications",
        "/health",
        "/health/live",
        "/api/schema/",
        "/api/schema/?format=json",
        "/api/docs/",
    ]:
        assert call("get", path).status_code in (200, 503), path
    call("get", "/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}")
    call("get", "/metrics")

    # The secrets did their jobs: the receivers got a signature, the token, the password.
    hook = next(r for r in receivers.http if r["path"] == "/hook")
    assert hook["headers"]["X-Scheduler-Signature"].startswith("sha256=")
    api_call = next(r for r in receivers.http if r["path"].startswith("/api/"))
    assert api_call["headers"]["Authorization"] == f"Bearer {SLACK_TOKEN}"
    assert any(r["path"] == SLACK_HOOK_PATH for r in receivers.http)
    assert receivers.logins == [SMTP_PASSWORD.encode()]

    places = {
        "api responses": "\n".join(call.texts),
        "notification bodies": "\n".join(r["body"] for r in receivers.http)
        + "\n".join(_mail_text(m) for m in receivers.mail),
        "log records": "\n".join(_log_text(r) for r in caplog.records),
        "run output and errors": run.output + run.error,
        "database (clear text)": _database_text(),
    }
    for where, text in places.items():
        for canary in canaries:
            assert canary not in text, f"{canary!r} leaked into {where}"
    assert len(caplog.records) > 10  # the flow did log; none of it held a secret


def _mail_text(raw: bytes) -> str:
    message = email.message_from_bytes(raw)
    parts = [str(message.get("Subject", ""))]
    for part in message.walk():
        if not part.is_multipart():
            parts.append(part.get_payload(decode=True).decode(errors="replace"))
    return "\n".join(parts)


def _log_text(record: logging.LogRecord) -> str:
    extras = {k: v for k, v in vars(record).items() if k not in ("msg", "args", "exc_info")}
    return f"{record.getMessage()} {record.exc_text or ''} {extras}"


def _database_text() -> str:
    """Every text column of the tables the flow wrote, as PostgreSQL returns them."""
    tables = [
        "notifications_channel",
        "notifications_notification",
        "tasks_task",
        "tasks_run",
        "tasks_attempt",
    ]
    with connection.cursor() as cursor:
        rows = []
        for table in tables:
            cursor.execute(f"SELECT t::text FROM {table} t")  # fixed table names
            rows += [row[0] for row in cursor.fetchall()]
    return "\n".join(rows)
