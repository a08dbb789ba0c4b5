"""Fixtures of the outbox and delivery tests: a real HTTP receiver, channels, finished runs."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import factory
import pytest
import standardwebhooks

from notifications.models import Channel
from notifications.transports.webhook import verify_signature
from tasks.models import Run, Task
from tasks.transitions import claim
from tests.factories import RunFactory, TaskFactory, UserFactory

# A Standard Webhooks secret ("whsec_" + base64); X-Scheduler-Signature signs with it too.
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def standard_verified(body: bytes, headers: dict[str, str]) -> bool:
    """The Standard Webhooks check, by the spec's own Python library."""
    try:
        standardwebhooks.Webhook(SECRET).verify(body, headers)
    except standardwebhooks.webhooks.WebhookVerificationError:
        return False
    return True


class Receiver:
    """A webhook receiver on 127.0.0.1 that verifies signatures and answers as scripted."""

    def __init__(self) -> None:
        self.deliveries: list[dict[str, Any]] = []
        self.script: list[int] = []  # statuses answered in turn; then `default`
        self.default = 204
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                signature = self.headers.get("X-Scheduler-Signature", "")
                timestamp = self.headers.get("X-Scheduler-Timestamp", "")
                with receiver.lock:
                    status = receiver.script.pop(0) if receiver.script else receiver.default
                    receiver.deliveries.append(
                        {
                            "arrived": time.time(),
                            "path": self.path,
                            "headers": dict(self.headers),
                            "body": json.loads(body),
                            "status": status,
                            "verified": bool(signature)
                            and verify_signature(SECRET, timestamp, body, signature),
                            "standard": standard_verified(body, dict(self.headers)),
                        }
                    )
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"

    @property
    def accepted(self) -> list[dict[str, Any]]:
        """Deliveries answered with a 2xx: what the receiver actually took."""
        with self.lock:
            return [d for d in self.deliveries if 200 <= d["status"] < 300]


@contextmanager
def serving() -> Iterator[Receiver]:
    """A Receiver answering on its own thread until the block ends."""
    recv = Receiver()
    thread = threading.Thread(target=recv.httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield recv
    finally:
        recv.httpd.shutdown()
        recv.httpd.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with serving() as recv:
        yield recv


@pytest.fixture(autouse=True)
def _outbound_to_loopback(settings) -> None:
    settings.SCHEDULER_OUTBOUND_ALLOW = ["127.0.0.1"]
    settings.SCHEDULER_PUBLIC_URL = "https://scheduler.example"


class ChannelFactory(factory.django.DjangoModelFactory):
    """A channel; pass `secrets={...}` to store encrypted secrets."""

    class Meta:
        model = Channel
        skip_postgeneration_save = True

    owner = factory.SubFactory(UserFactory)
    kind = Channel.Kind.WEBHOOK
    config = factory.LazyFunction(lambda: {"url": "http://127.0.0.1:9/hook"})

    @factory.post_generation
    def secrets(self, create: bool, extracted: dict | None, **kwargs: Any) -> None:
        if extracted:
            self.set_secrets(extracted)
            self.save(update_fields=["secret_config"])


def webhook_channel(receiver: Receiver, owner: Any, **fields: Any) -> Channel:
    return ChannelFactory(
        owner=owner, config={"url": receiver.url}, secrets={"secret": SECRET}, **fields
    )


def subscribed_task(channel: Channel, events: list[str], **fields: Any) -> Task:
    notify = [{"channel": str(channel.id), "events": events}]
    return TaskFactory(owner=channel.owner, notify=notify, **fields)


def due_run(task: Task, **fields: Any) -> Run:
    fields.setdefault("scheduled_at", datetime.now(UTC) - timedelta(seconds=1))
    return RunFactory(task=task, **fields)


def finish(run: Run, status: str, *, attempt_outcome: str | None = None) -> list[tuple]:
    """Claim `run` like a worker and record `status` through tasks.claim.record_outcomes."""
    [claimed] = claim.claim_runs(worker="w-test", limit=1, prefetch_seconds=0, owner_cap=0)
    assert claimed.id == run.id
    outcome = claim.Outcome(
        run_id=run.id,
        attempt=claimed.attempt,
        status=status,
        attempt_outcome=attempt_outcome or ("succeeded" if status == "succeeded" else "failed"),
        started_at=claimed.claimed_at,
        error="" if status == "succeeded" else "boom: the payload failed",
    )
    return claim.record_outcomes(worker="w-test", outcomes=[outcome])
