"""deliver_pending against real receivers on 127.0.0.1: webhook, SMTP (aiosmtpd), Slack API."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from django.db import connection
from django.test import override_settings

from notifications import services
from notifications.models import Notification
from tasks import expectations
from tasks.db import db_now
from tasks.models import Workflow
from tasks.transitions.expectations import review_expectations, review_workflow_expectations
from tests.notifications.conftest import (
    SECRET,
    ChannelFactory,
    Receiver,
    due_run,
    finish,
    subscribed_task,
    webhook_channel,
)
from tests.notifications.transports.test_email import _free_port, _Mailbox

pytestmark = pytest.mark.django_db


def pending_for(channel: Any, events: list[str], *, status: str = "succeeded") -> Notification:
    run = due_run(subscribed_task(channel, events, name="nightly report"))
    finish(run, status)
    return Notification.objects.get(run=run)


def test_webhook_is_signed_and_marked_sent(receiver: Receiver, user) -> None:
    notification = pending_for(webhook_channel(receiver, user), ["succeeded"])

    assert services.deliver_pending(limit=10, now=db_now()) == 1

    [delivery] = receiver.deliveries
    headers, body = delivery["headers"], delivery["body"]
    assert delivery["verified"] is True
    assert delivery["standard"] is True, "standardwebhooks.Webhook(secret).verify passes"
    assert headers["X-Scheduler-Delivery"] == str(notification.id)
    assert headers["webhook-id"] == str(notification.id)
    assert headers["webhook-timestamp"] == headers["X-Scheduler-Timestamp"]
    assert headers["webhook-signature"].startswith("v1,")
    assert headers["X-Scheduler-Event"] == "succeeded"
    assert body["id"] == str(notification.id) and body["event"] == "succeeded"
    assert body["task"]["name"] == "nightly report"
    assert body["run"]["id"] == str(notification.run_id)
    assert body["run"]["status"] == "succeeded" and body["run"]["attempt"] == 1
    assert body["run"]["url"] == f"https://scheduler.example/api/v1/runs/{notification.run_id}"
    assert body["created_at"].endswith("Z")
    notification.refresh_from_db()
    assert (notification.status, notification.attempts) == ("sent", 1)
    assert notification.sent_at is not None
    assert services.deliver_pending(limit=10, now=db_now()) == 0


def test_receiver_failing_twice_gets_it_once_after_three_attempts(
    receiver: Receiver,
    user,
) -> None:
    receiver.script = [503, 500]
    notification = pending_for(webhook_channel(receiver, user), ["succeeded"])
    start = db_now()

    services.deliver_pending(limit=10, now=start)
    notification.refresh_from_db()
    first_retry = notification.next_attempt_at - start
    assert (notification.status, notification.attempts) == ("pending", 1)
    assert timedelta(0) < first_retry <= timedelta(seconds=10), "first retry within 10 s"
    assert "HTTP 503" in notification.last_error
    # Not due yet: nothing is claimed before next_attempt_at.
    assert services.deliver_pending(limit=10, now=start + timedelta(seconds=1)) == 0

    services.deliver_pending(limit=10, now=notification.next_attempt_at)
    notification.refresh_from_db()
    second_delay = notification.next_attempt_at - start - first_retry
    assert second_delay > first_retry, "the delay doubles"
    services.deliver_pending(limit=10, now=notification.next_attempt_at)

    notification.refresh_from_db()
    assert (notification.status, notification.attempts) == ("sent", 3)
    assert [d["status"] for d in receiver.deliveries] == [503, 500, 204]
    assert len(receiver.accepted) == 1
    ids = {d["headers"]["X-Scheduler-Delivery"] for d in receiver.deliveries}
    assert ids == {str(notification.id)}, "the delivery id is stable across retries"
    assert {d["headers"]["webhook-id"] for d in receiver.deliveries} == ids
    assert all(d["standard"] for d in receiver.deliveries)


def test_receiver_down_for_the_whole_window_ends_failed(
    receiver: Receiver,
    user,
    settings,
) -> None:
    settings.NOTIFICATIONS_RETRY_WINDOW_SECONDS = 120
    receiver.default = 503
    notification = pending_for(webhook_channel(receiver, user), ["succeeded"])
    now = db_now()
    for _ in range(50):
        if services.deliver_pending(limit=10, now=now) == 0:
            break
        notification.refresh_from_db()
        now = notification.next_attempt_at
    notification.refresh_from_db()

    assert notification.status == "failed"
    assert notification.last_error.startswith("HTTP 503")
    # The last try is made at the end of the window (next_attempt_at records when it settled).
    settled = notification.next_attempt_at - notification.retry_until
    assert timedelta(0) <= settled < timedelta(seconds=5)
    # 5 s doubling (with up to 25 % jitter off) fits 5 or 6 tries in 2 minutes, the last one
    # at the end of the window.
    assert 5 <= notification.attempts <= 7
    assert len(receiver.deliveries) == notification.attempts
    assert services.deliver_pending(limit=10, now=now + timedelta(hours=2)) == 0


def test_client_error_stops_at_once(receiver: Receiver, user) -> None:
    receiver.default = 410
    notification = pending_for(webhook_channel(receiver, user), ["succeeded"])

    services.deliver_pending(limit=10, now=db_now())

    notification.refresh_from_db()
    assert (notification.status, notification.attempts) == ("failed", 1)
    assert notification.last_error == "HTTP 410"
    assert services.deliver_pending(limit=10, now=db_now() + timedelta(hours=1)) == 0


def test_claimed_rows_are_not_claimed_again_during_the_lease(receiver: Receiver, user) -> None:
    pending_for(webhook_channel(receiver, user), ["succeeded"])
    now = db_now()
    assert len(services.claim(limit=10, now=now)) == 1
    assert services.claim(limit=10, now=now + timedelta(seconds=60)) == {}
    # A deliverer that died mid-send: the row comes back once the lease is over.
    assert list(services.claim(limit=10, now=now + timedelta(seconds=121)).values()) == [2]


@pytest.mark.concurrency
@pytest.mark.django_db(transaction=True)
def test_two_deliverers_at_once_send_each_notification_once(receiver: Receiver, user) -> None:
    channel = webhook_channel(receiver, user)
    for _ in range(30):
        pending_for(channel, ["succeeded"])
    now = db_now()
    barrier = threading.Barrier(2)

    def deliver() -> None:
        from django.db import connection

        barrier.wait()
        try:
            while services.deliver_pending(limit=4, now=now):
                pass
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    ids = [d["headers"]["X-Scheduler-Delivery"] for d in receiver.deliveries]
    assert len(ids) == len(set(ids)) == 30
    assert Notification.objects.filter(status="sent", attempts=1).count() == 30


@pytest.fixture
def mailbox() -> Iterator[_Mailbox]:
    handler = _Mailbox()
    port = _free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    with override_settings(
        EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
        EMAIL_HOST="127.0.0.1",
        EMAIL_PORT=port,
        EMAIL_USE_TLS=False,
        DEFAULT_FROM_EMAIL="scheduler@example.com",
    ):
        yield handler
    controller.stop()


def test_email_arrives_over_smtp(mailbox: _Mailbox, user, client) -> None:
    channel = ChannelFactory(owner=user, kind="email", config={"address": "ops@example.com"})
    notification = pending_for(channel, ["retries_exhausted"], status="failed")

    services.deliver_pending(limit=10, now=db_now())

    [(recipients, mime)] = mailbox.messages
    text = mime.get_payload(decode=True).decode()
    assert recipients == ["ops@example.com"]
    assert mime["Subject"] == "Task nightly report failed: retries exhausted"
    assert mime["X-Scheduler-Delivery"] == str(notification.id)
    assert "boom: the payload failed" in text
    # The links a person clicks open the admin's pages in their browser session (the JSON API
    # wants a token: a 401).
    links = [line for line in text.split() if line.startswith("https://scheduler.example/")]
    assert links == [
        f"https://scheduler.example/admin/tasks/run/{notification.run_id}/change/",
        f"https://scheduler.example/admin/tasks/task/{notification.task_id}/change/",
    ]
    client.force_login(user)
    for link in links:
        assert client.get(link.removeprefix("https://scheduler.example")).status_code == 200
    notification.refresh_from_db()
    assert notification.status == "sent"


def test_refused_recipient_is_a_permanent_failure(mailbox: _Mailbox, user) -> None:
    channel = ChannelFactory(owner=user, kind="email", config={"address": "nobody@example.com"})
    notification = pending_for(channel, ["succeeded"])
    services.deliver_pending(limit=10, now=db_now())
    notification.refresh_from_db()
    assert (notification.status, notification.attempts) == ("failed", 1)
    assert "550" in notification.last_error


class _FakeSlack(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]

    def do_POST(self) -> None:
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append(
            {"path": self.path, "payload": payload, "auth": self.headers.get("Authorization")}
        )
        data = json.dumps({"ok": True, "ts": "1.2"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def slack(settings) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    handler = type("FakeSlack", (_FakeSlack,), {"received": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    settings.SCHEDULER_SLACK_API_URL = base + "/api/"
    yield base, handler.received
    httpd.shutdown()
    httpd.server_close()


def test_slack_bot_token_posts_blocks_and_never_logs_the_token(
    slack: tuple[str, list[dict[str, Any]]],
    user,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, received = slack
    token = "xoxb-very-secret-token-123"
    channel = ChannelFactory(
        owner=user, kind="slack", config={"channel": "C-ops"}, secrets={"token": token}
    )
    notification = pending_for(channel, ["failed"], status="scheduled")

    with caplog.at_level(logging.DEBUG):
        services.deliver_pending(limit=10, now=db_now())

    [request] = received
    assert request["path"] == "/api/chat.postMessage"
    assert request["auth"] == f"Bearer {token}"
    payload = request["payload"]
    assert payload["channel"] == "C-ops"
    blocks = json.dumps(payload["blocks"])
    assert "nightly report" in blocks and "1 of 5" in blocks and "View run" in blocks
    assert str(notification.run_id) in blocks
    notification.refresh_from_db()
    assert notification.status == "sent"
    assert token not in caplog.text


def test_slack_incoming_webhook(slack: tuple[str, list[dict[str, Any]]], user) -> None:
    base, received = slack
    secret_path = "/services/T000/B000/XXXXSECRET"
    channel = ChannelFactory(
        owner=user,
        kind="slack",
        config={"webhook_host": "127.0.0.1"},
        secrets={"webhook_url": base + secret_path},
    )
    notification = pending_for(channel, ["succeeded"])
    services.deliver_pending(limit=10, now=db_now())
    [request] = received
    assert request["path"] == secret_path
    assert request["payload"]["blocks"][0]["type"] == "header"
    notification.refresh_from_db()
    assert notification.status == "sent"


def test_secret_that_cannot_be_decrypted_is_retried(
    receiver: Receiver,
    user,
    settings,
) -> None:
    notification = pending_for(webhook_channel(receiver, user), ["succeeded"])
    settings.SCHEDULER_ENCRYPTION_KEY = "Xl0yB7o1eQ0Hc7qg1lKfQm0rS1V6C1mQyQ3q5Yc9i2M="
    services.deliver_pending(limit=10, now=db_now())
    notification.refresh_from_db()
    assert (notification.status, notification.attempts) == ("pending", 1)
    assert "does not decrypt" in notification.last_error
    assert receiver.deliveries == []
    assert SECRET not in notification.last_error


def test_an_overdue_task_with_no_run_is_delivered_naming_the_task(receiver: Receiver, user) -> None:
    """The dead man's switch: `overdue` before the task has any run reaches a webhook with
    `run: null` and the task's links."""
    channel = webhook_channel(receiver, user)
    task = subscribed_task(
        channel, ["overdue"], name="nightly report", expect={"success_within": 5}
    )
    expectations.sync([task], now=db_now() - timedelta(seconds=6))
    assert review_expectations() == [(None, task.pk, 0, "overdue")]

    assert services.deliver_pending(limit=10, now=db_now()) == 1

    [delivery] = receiver.deliveries
    body = delivery["body"]
    assert (body["event"], body["run"], body["task"]["name"]) == ("overdue", None, "nightly report")
    assert body["expectation"]["happened"] == "no run at all for that long"
    assert Notification.objects.get(task=task).status == "sent"


def test_an_overdue_workflow_is_delivered_naming_the_workflow(
    receiver: Receiver, user, api
) -> None:
    """`workflow_overdue` names the workflow alone: the webhook gets its links and expectation,
    `workflow_run`, `task` and `run` null."""
    channel = webhook_channel(receiver, user)
    body = {
        "name": "nightly etl",
        "steps": [{"id": "a", "task": {"kind": "handler", "payload": {"name": "noop"}}}],
        "notify": [{"channel": str(channel.id), "events": ["workflow_overdue"]}],
        "expect": {"success_within": 5},
    }
    created = api.post("/api/v1/workflows", body, format="json").json()
    Workflow.objects.filter(pk=created["id"]).update(created_at=db_now() - timedelta(seconds=6))
    assert [health for _, health in review_workflow_expectations()] == ["overdue"]

    assert services.deliver_pending(limit=10, now=db_now()) == 1

    [delivery] = receiver.deliveries
    sent = delivery["body"]
    assert (sent["event"], sent["workflow_run"], sent["task"], sent["run"]) == (
        "workflow_overdue",
        None,
        None,
        None,
    )
    assert (sent["workflow"]["id"], sent["workflow"]["health"]) == (created["id"], "overdue")
    assert delivery["headers"]["X-Scheduler-Event"] == "workflow_overdue"
    assert Notification.objects.get(workflow_id=created["id"]).status == "sent"
    # Deleting the workflow deletes its notifications.
    assert api.delete(f"/api/v1/workflows/{created['id']}").status_code == 204
    assert not Notification.objects.exists()


def _plans(fragment: str) -> list[tuple[int, int]]:
    """(generic, custom) plans of this connection's prepared statements containing `fragment`."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE strpos(statement, %s) > 0",
            [fragment],
        )
        return cursor.fetchall()


@pytest.mark.not_through_pgbouncer(
    reason="with DATABASE_PREPARED_STATEMENTS=false nothing is prepared: no plan is kept"
)
def test_a_deliverers_wake_up_is_planned_once_per_connection(receiver: Receiver, user) -> None:
    # Every deliverer claims and asks when the next retry is due on every NOTIFY of the channel,
    # mostly finding nothing: each statement is prepared on the connection and its generic plan
    # kept, where a statement bound on the client was planned on every wake-up.
    pending_for(webhook_channel(receiver, user), ["succeeded"])
    now = db_now()
    for i in range(8):
        services.claim(limit=10, now=now + timedelta(seconds=i))
        services.seconds_until_next_due()

    for fragment in ("SET attempts = n.attempts + 1", "min(next_attempt_at) - clock_timestamp()"):
        [(generic, custom)] = _plans(fragment)
        assert generic >= 3 and custom <= 5, (fragment, generic, custom)
