"""Outbound requests: the SSRF guard with the allow-list off.

Refused with a 400 naming the field when a channel or an `http` task is saved, and again when
the request is sent: a host that passed at save time but resolves to the loopback later (DNS
rebinding) gives a failed attempt with a clear error, and a redirect to another host is never
followed (tests/scheduler_project/test_outbound_http.py covers the guard function by function).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from rest_framework.test import APIClient

from notifications import services as notification_services
from notifications.models import Channel, Notification
from tasks.models import Attempt, Run, Task
from tasks.worker.worker import Worker
from tests.notifications.conftest import due_run, finish, subscribed_task

pytestmark = pytest.mark.django_db

LOOPBACK = [
    "http://127.0.0.1/",
    "http://127.1/",
    "http://0x7f000001/",
    "http://2130706433/",
    "http://0177.0.0.1/",
    "http://127.0.0.2:8080/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://localhost/",
    "http://0.0.0.0/",
]
PRIVATE = [
    "http://10.0.0.1/",
    "http://192.168.1.1/",
    "http://172.16.0.1/",
    "http://[fd00::1]/",
    "http://100.64.0.1/",
]
LINK_LOCAL = ["http://169.254.1.1/", "http://[fe80::1]/"]
METADATA = ["http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/"]
REFUSED = LOOPBACK + PRIVATE + LINK_LOCAL + METADATA


@pytest.fixture(autouse=True)
def _allow_list_off(settings, tmp_path) -> None:
    settings.SCHEDULER_OUTBOUND_ALLOW = []
    settings.MEDIA_ROOT = tmp_path / "media"


def field_errors(response: Any, *path: str) -> str:
    assert response.status_code == 400, response.content
    errors: Any = response.json()
    for key in path:
        errors = errors[key]
    return str(errors)


@pytest.mark.parametrize("url", REFUSED)
def test_http_task_refused_when_saved(api: APIClient, url: str) -> None:
    body = {"kind": "http", "payload": {"method": "GET", "url": url}}

    message = field_errors(api.post("/api/v1/tasks", body, format="json"), "payload", "url")

    assert "SCHEDULER_OUTBOUND_ALLOW" in message
    assert not Task.objects.exists()


@pytest.mark.parametrize("url", REFUSED)
def test_channel_refused_when_saved(api: APIClient, url: str) -> None:
    webhook = api.post("/api/v1/channels", {"kind": "webhook", "url": url}, format="json")
    slack = api.post("/api/v1/channels", {"kind": "slack", "webhook_url": url}, format="json")

    # Spellings Django's URL validator already rejects never reach the guard; 400 either way.
    field_errors(webhook, "url")
    field_errors(slack, "webhook_url")
    assert not Channel.objects.exists()


def test_changing_a_saved_url_is_checked_too(api: APIClient, settings) -> None:
    settings.SCHEDULER_OUTBOUND_ALLOW = ["127.0.0.1"]
    task = api.post(
        "/api/v1/tasks", {"kind": "http", "payload": {"url": "http://127.0.0.1/"}}, format="json"
    ).json()
    channel = api.post(
        "/api/v1/channels", {"kind": "webhook", "url": "http://127.0.0.1/h"}, format="json"
    ).json()
    settings.SCHEDULER_OUTBOUND_ALLOW = []
    metadata = "http://169.254.169.254/"

    task_change = api.patch(
        f"/api/v1/tasks/{task['id']}", {"payload": {"url": metadata}}, format="json"
    )
    channel_change = api.patch(
        f"/api/v1/channels/{channel['id']}", {"url": metadata}, format="json"
    )

    assert "metadata" in field_errors(task_change, "payload", "url")
    assert "metadata" in field_errors(channel_change, "url")


# --- at send time -------------------------------------------------------------------------------
class Recorder:
    """An HTTP server on `host` that records requests; `/redirect?to=URL` answers 307 to URL."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.seen: list[str] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                recorder.seen.append(f"{self.command} {self.path}")
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                if self.path.startswith("/redirect?to="):
                    self.send_response(307)
                    self.send_header("Location", self.path.split("=", 1)[1])
                else:
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.close()


@pytest.fixture
def second_host() -> Iterator[Recorder]:
    """Another host: a server on 127.0.0.2, which the allow-list (127.0.0.1) does not cover."""
    server = Recorder("127.0.0.2")
    yield server
    server.close()


@pytest.fixture
def rebinding_dns(monkeypatch) -> None:
    """`rebind.example` resolves to a public address once, then to the loopback."""
    real = socket.getaddrinfo
    answers = ["93.184.215.14"]

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> list:
        if host != "rebind.example":
            return real(host, port, *args, **kwargs)
        address = answers.pop() if answers else "127.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def run_worker_until_finished(run_id: Any) -> Run:
    worker = Worker(concurrency=1)
    try:
        deadline = time.monotonic() + 30
        while Run.objects.filter(pk=run_id, status__in=["scheduled", "running"]).exists():
            assert time.monotonic() < deadline, "the worker did not finish the run"
            worker.run_once()
            time.sleep(0.02)
    finally:
        worker.pool.shutdown(wait=True)
    return Run.objects.get(pk=run_id)


def create_http_task(api: APIClient, url: str) -> Run:
    body = {
        "kind": "http",
        "payload": {"method": "POST", "url": url, "body": {"a": 1}},
        "max_attempts": 1,
    }
    response = api.post("/api/v1/tasks", body, format="json")
    assert response.status_code == 201, response.content
    return Run.objects.get(task_id=response.json()["id"])


def test_http_task_rebound_to_the_loopback_fails_when_sent(api, recorder, rebinding_dns) -> None:
    run = create_http_task(api, f"http://rebind.example:{recorder.port}/job")  # passes: public

    run = run_worker_until_finished(run.id)

    assert run.status == "failed"
    error = Attempt.objects.get(run=run).error
    assert "rebind.example resolves to 127.0.0.1, which is loopback" in error
    assert recorder.seen == []


def test_webhook_rebound_to_the_loopback_fails_when_delivered(
    api, user, recorder, rebinding_dns
) -> None:
    created = api.post(
        "/api/v1/channels",
        {"kind": "webhook", "url": f"http://rebind.example:{recorder.port}/hook"},
        format="json",
    )
    assert created.status_code == 201, created.content
    channel = Channel.objects.get(pk=created.json()["id"])
    finish(due_run(subscribed_task(channel, ["succeeded"])), "succeeded")

    notification_services.deliver_pending(limit=10, now=datetime.now(UTC))

    notification = Notification.objects.get()
    assert notification.status != "sent"
    assert "loopback" in notification.last_error
    assert recorder.seen == []


@pytest.mark.parametrize("target", ["127.0.0.2", "localhost"])
def test_http_task_redirect_to_another_host_is_not_followed(
    api, settings, recorder, second_host, target
) -> None:
    settings.SCHEDULER_OUTBOUND_ALLOW = ["127.0.0.1"]
    elsewhere = f"http://{target}:{second_host.port}/stolen"
    if target == "localhost":  # the second server must answer on that name's address
        elsewhere = f"http://localhost:{recorder.port}/stolen"
    run = create_http_task(api, f"http://127.0.0.1:{recorder.port}/redirect?to={elsewhere}")

    run = run_worker_until_finished(run.id)

    assert run.status == "failed"
    assert "HTTP 307" in Attempt.objects.get(run=run).error
    assert second_host.seen == []
    assert recorder.seen == [f"POST /redirect?to={elsewhere}"]  # never /stolen


def test_webhook_redirect_to_another_host_is_not_followed(
    api, settings, user, recorder, second_host
) -> None:
    settings.SCHEDULER_OUTBOUND_ALLOW = ["127.0.0.1"]
    elsewhere = f"http://127.0.0.2:{second_host.port}/stolen"
    url = f"http://127.0.0.1:{recorder.port}/redirect?to={elsewhere}"
    created = api.post("/api/v1/channels", {"kind": "webhook", "url": url}, format="json")
    channel = Channel.objects.get(pk=created.json()["id"])
    finish(due_run(subscribed_task(channel, ["succeeded"])), "succeeded")

    notification_services.deliver_pending(limit=10, now=datetime.now(UTC))

    assert Notification.objects.get().status != "sent"
    assert second_host.seen == []
    assert len(recorder.seen) == 1
