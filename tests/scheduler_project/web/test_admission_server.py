"""Admission control in a real gunicorn (the production config, one process with one thread):
requests that queue past the budget are answered 503 with Retry-After as soon as a thread takes
them up, /health and /metrics are still answered, the shed requests are counted, and a request
whose client has gone is not served."""

from __future__ import annotations

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
import requests
from django.utils import timezone

from tasks.models import Process, Task
from tests.factories import UserFactory
from tests.scheduler_project.web.test_metrics import value

pytestmark = pytest.mark.processes

CONFIG = ["-c", "scheduler_project/gunicorn_conf.py", "--threads", "1"]
HOLD_SECONDS = 1.5


def hold_the_thread(base: str) -> socket.socket:
    """A request whose headers stop half-way: the one thread reads them, blocked, until
    `release`. Returns its socket."""
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(b"GET /health/live HTTP/1.1\r\n")
    time.sleep(0.3)  # taken up by the thread before anything else is queued
    return sock


def release(sock: socket.socket) -> None:
    sock.sendall(b"Host: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    sock.close()


def register_roles() -> None:
    """Process rows of every role, seen for the next hour: /health then answers 200."""
    now = timezone.now()
    for role in ("scheduler", "worker", "reviewer"):
        Process.objects.create(
            name=f"test-{role}",
            role=role,
            host="test",
            pid=1,
            concurrency=1,
            sandbox="rlimit" if role == "worker" else "",
            started_at=now,
            last_seen_at=now + timedelta(hours=1),
        )


def bearer(base: str, username: str) -> str:
    """An access token from the server itself (its SECRET_KEY signs it)."""
    sent = {"username": username, "password": "password-123"}
    response = requests.post(f"{base}/api/v1/auth/token", json=sent, timeout=10)
    assert response.status_code == 200, response.content
    return f"Bearer {response.json()['access']}"


def timed_get(url: str, headers: dict[str, str] | None = None) -> tuple[requests.Response, float]:
    started = time.monotonic()
    response = requests.get(url, headers=headers, timeout=10)
    return response, time.monotonic() - started


def shed_total(base: str) -> float:
    text = requests.get(f"{base}/metrics", timeout=10).text
    return value(text, "scheduler_api_shed_requests_total", reason="queue_wait") or 0.0


def test_requests_queued_past_the_budget_are_shed_and_probes_are_not(gunicorn, tmp_path):
    register_roles()
    base = gunicorn(
        workers=1,
        args=CONFIG,
        SCHEDULER_QUEUE_BUDGET_SECONDS="0.5",
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "prometheus"),
    )
    token = bearer(base, UserFactory().username)
    assert requests.get(f"{base}/health", timeout=10).status_code == 200
    assert shed_total(base) == 0.0  # exported before anything was shed

    held = hold_the_thread(base)
    with ThreadPoolExecutor(max_workers=12) as pool:
        reads = [
            pool.submit(timed_get, f"{base}/api/v1/tasks", {"Authorization": token})
            for _ in range(10)
        ]
        health = pool.submit(timed_get, f"{base}/health")
        live = pool.submit(timed_get, f"{base}/health/live")
        time.sleep(HOLD_SECONDS)
        release(held)
        answers = [future.result() for future in reads]

    for response, seconds in answers:
        assert response.status_code == 503, response.content
        assert response.json()["code"] == "overloaded"
        assert int(response.headers["Retry-After"]) >= 1
        assert seconds < HOLD_SECONDS + 1.0  # answered once the thread was free, not served
    assert health.result()[0].status_code == 200
    assert live.result()[0].status_code == 200
    assert shed_total(base) == 10.0
    # Once the queue is short again, requests are served.
    served = requests.get(f"{base}/api/v1/tasks", headers={"Authorization": token}, timeout=10)
    assert served.status_code == 200, served.content


def test_a_request_whose_client_left_is_not_served(gunicorn):
    owner = UserFactory()
    # A budget no request reaches here: only the client's leaving can keep it from being served.
    base = gunicorn(workers=1, args=CONFIG, SCHEDULER_QUEUE_BUDGET_SECONDS="60")
    token = bearer(base, owner.username)
    body = json.dumps({"name": "abandoned", "kind": "handler", "payload": {"name": "noop"}})
    host, port = base.removeprefix("http://").split(":")

    held = hold_the_thread(base)
    create = socket.create_connection((host, int(port)), timeout=10)
    create.sendall(
        (
            "POST /api/v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Authorization: {token}\r\nContent-Length: {len(body)}\r\n\r\n{body}"
        ).encode()
    )
    time.sleep(0.2)
    create.close()  # the client gives up while the request is queued
    release(held)

    text = requests.get(f"{base}/metrics", timeout=10).text
    assert value(text, "scheduler_api_shed_requests_total", reason="client_gone") == 1.0
    assert not Task.objects.filter(owner=owner).exists()
    # The same create from a client that waits is served.
    sent = {"name": "kept", "kind": "handler", "payload": {"name": "noop"}}
    response = requests.post(
        f"{base}/api/v1/tasks", json=sent, headers={"Authorization": token}, timeout=10
    )
    assert response.status_code == 201, response.content
    assert Task.objects.filter(owner=owner, name="kept").exists()


def test_a_request_admitted_under_the_budget_but_past_its_deadline_is_answered_503(gunicorn):
    owner = UserFactory()
    # Admitted (it waits under the 60 s budget) but past the 0.5 s deadline when its view would
    # start its first statement.
    base = gunicorn(
        workers=1,
        args=CONFIG,
        SCHEDULER_QUEUE_BUDGET_SECONDS="60",
        SCHEDULER_REQUEST_DEADLINE_SECONDS="0.5",
    )
    token = bearer(base, owner.username)
    sent = {"name": "late", "kind": "handler", "payload": {"name": "noop"}}

    held = hold_the_thread(base)
    with ThreadPoolExecutor(max_workers=2) as pool:
        read = pool.submit(timed_get, f"{base}/api/v1/tasks", {"Authorization": token})
        create = pool.submit(
            requests.post,
            f"{base}/api/v1/tasks",
            json=sent,
            headers={"Authorization": token},
            timeout=10,
        )
        time.sleep(1.0)
        release(held)
        answers = [read.result()[0], create.result()]

    for response in answers:
        assert response.status_code == 503, response.content
        assert response.json()["code"] == "overloaded"
        assert int(response.headers["Retry-After"]) >= 1
    assert not Task.objects.filter(owner=owner).exists()
    text = requests.get(f"{base}/metrics", timeout=10).text
    assert value(text, "scheduler_api_shed_requests_total", reason="deadline") == 2.0
    assert value(text, "scheduler_api_shed_requests_total", reason="queue_wait") == 0.0
    # In time, the same create is made.
    response = requests.post(
        f"{base}/api/v1/tasks", json=sent, headers={"Authorization": token}, timeout=10
    )
    assert response.status_code == 201, response.content


def test_a_request_that_waited_in_the_listen_backlog_has_waited(gunicorn):
    # One connection at a time: the second waits in the kernel's backlog, not in the process.
    base = gunicorn(
        workers=1,
        args=CONFIG,
        SCHEDULER_QUEUE_BUDGET_SECONDS="0.5",
        GUNICORN_WORKER_CONNECTIONS="1",
    )
    token = bearer(base, UserFactory().username)
    held = hold_the_thread(base)
    with ThreadPoolExecutor(max_workers=1) as pool:
        read = pool.submit(timed_get, f"{base}/api/v1/tasks", {"Authorization": token})
        time.sleep(1.0)
        release(held)
        response = read.result()[0]
    assert response.status_code == 503, response.content
    assert response.json()["code"] == "overloaded"
