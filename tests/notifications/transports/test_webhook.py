from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import standardwebhooks

from notifications.transports.base import Message, TransportError, TransportSettings, get_transport
from notifications.transports.webhook import (
    WebhookTransport,
    encode_body,
    generate_secret,
    secret_key,
    sign,
    sign_standard,
    verify_signature,
)

SECRET = "s3cret-κey"
SETTINGS = TransportSettings(outbound_allow=("127.0.0.1",), timeout_seconds=5)


def make_message() -> Message:
    created_at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    task = {"id": "t-1", "name": "nightly report ✓", "kind": "handler"}
    run = {"id": "r-1", "status": "failed", "attempt": 2, "max_attempts": 5}
    return Message(
        delivery_id="n-1",
        event="failed",
        created_at=created_at,
        subject="Task nightly report failed",
        text="Run r-1 of nightly report failed (attempt 2 of 5).",
        body={
            "id": "n-1",
            "event": "failed",
            "task": task,
            "run": run,
            "created_at": "2026-01-02T03:04:05Z",
        },
        task=task,
        run=run,
        run_url="https://scheduler.example/runs/r-1",
    )


class _Receiver(BaseHTTPRequestHandler):
    deliveries: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        signature = self.headers.get("X-Scheduler-Signature")
        self.deliveries.append(
            {
                "path": self.path,
                "headers": dict(self.headers),
                "body": body,
                "verified": signature is not None
                and verify_signature(
                    SECRET, self.headers["X-Scheduler-Timestamp"], body, signature
                ),
            }
        )
        if self.path == "/slow":
            time.sleep(2)
        status = (
            int(self.path.removeprefix("/status/")) if self.path.startswith("/status/") else 204
        )
        self.send_response(status)
        self.send_header("Content-Length", "4" if status != 204 else "0")
        self.end_headers()
        if status != 204:
            self.wfile.write(b"nope")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    handler = type("Receiver", (_Receiver,), {"deliveries": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", handler.deliveries
    httpd.shutdown()
    httpd.server_close()


def test_signed_delivery_is_verified_by_the_receiver(
    receiver: tuple[str, list[dict[str, Any]]],
) -> None:
    url, deliveries = receiver
    message = make_message()
    WebhookTransport().send({"url": url + "/hook", "secret": SECRET}, message, settings=SETTINGS)

    [delivery] = deliveries
    headers = delivery["headers"]
    assert delivery["verified"] is True
    assert delivery["body"] == encode_body(message.body)
    assert json.loads(delivery["body"]) == message.body
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Scheduler-Event"] == "failed"
    assert headers["X-Scheduler-Delivery"] == "n-1"
    assert abs(int(headers["X-Scheduler-Timestamp"]) - time.time()) < 60
    assert headers["User-Agent"] == SETTINGS.user_agent


@pytest.mark.parametrize("secret", [generate_secret(), "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"])
def test_standard_webhooks_library_verifies_a_delivery(
    receiver: tuple[str, list[dict[str, Any]]], secret: str
) -> None:
    url, deliveries = receiver
    message = make_message()
    WebhookTransport().send({"url": url + "/hook", "secret": secret}, message, settings=SETTINGS)

    [delivery] = deliveries
    headers = delivery["headers"]
    assert standardwebhooks.Webhook(secret).verify(delivery["body"], headers) == message.body
    assert headers["webhook-id"] == "n-1"
    assert headers["webhook-timestamp"] == headers["X-Scheduler-Timestamp"]
    assert headers["webhook-signature"].startswith("v1,")
    tampered = delivery["body"].replace(b"failed", b"succeeded")
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook(secret).verify(tampered, headers)
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook(generate_secret()).verify(delivery["body"], headers)


def test_an_older_plain_secret_verifies_as_raw_key_bytes(
    receiver: tuple[str, list[dict[str, Any]]],
) -> None:
    url, deliveries = receiver
    WebhookTransport().send({"url": url, "secret": SECRET}, make_message(), settings=SETTINGS)

    [delivery] = deliveries
    assert delivery["verified"] is True
    standardwebhooks.Webhook(SECRET.encode()).verify(delivery["body"], delivery["headers"])


def test_generated_secrets_are_whsec_32_random_bytes() -> None:
    first, second = generate_secret(), generate_secret()
    assert first.startswith("whsec_") and first != second
    assert len(secret_key(first)) == 32
    with pytest.raises(ValueError, match="base64"):
        secret_key("whsec_not*base64")
    assert sign_standard(first, "m", "1", b"{}") == standardwebhooks.Webhook(first).sign(
        "m", datetime.fromtimestamp(1, UTC), "{}"
    )


def test_delivery_without_secret_is_unsigned(receiver: tuple[str, list[dict[str, Any]]]) -> None:
    url, deliveries = receiver
    get_transport("webhook").send({"url": url}, make_message(), settings=SETTINGS)
    assert "X-Scheduler-Signature" not in deliveries[0]["headers"]
    assert "webhook-signature" not in deliveries[0]["headers"]
    assert deliveries[0]["headers"]["webhook-id"] == "n-1"


def test_body_is_compact_sorted_utf8() -> None:
    assert encode_body({"b": 1, "a": "✓"}) == '{"a":"✓","b":1}'.encode()


def test_verify_signature_rejects_tampering_and_stale_timestamps() -> None:
    body, timestamp = b'{"a":1}', "1700000000"
    signature = sign(SECRET, timestamp, body)
    assert signature.startswith("sha256=") and len(signature) == 7 + 64
    assert verify_signature(SECRET, timestamp, body, signature, now=1700000100.0)
    assert verify_signature(
        SECRET, timestamp, body, signature, now=datetime.fromtimestamp(1700000000, UTC)
    )
    assert not verify_signature(SECRET, timestamp, b'{"a":2}', signature, now=1700000000.0)
    assert not verify_signature("other", timestamp, body, signature, now=1700000000.0)
    assert not verify_signature(SECRET, timestamp, body, signature, now=1700000301.0)
    assert not verify_signature(SECRET, "soon", body, signature, now=1700000000.0)


@pytest.mark.parametrize(
    ("status", "permanent"),
    [(500, False), (503, False), (429, False), (408, False), (400, True), (404, True), (410, True)],
)
def test_error_statuses_map_to_transient_or_permanent(
    receiver: tuple[str, list[dict[str, Any]]], status: int, permanent: bool
) -> None:
    url, _ = receiver
    with pytest.raises(TransportError, match=f"HTTP {status}") as info:
        WebhookTransport().send(
            {"url": f"{url}/status/{status}"}, make_message(), settings=SETTINGS
        )
    assert info.value.permanent is permanent


def test_connection_refused_is_transient() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(TransportError, match="refused") as info:
        WebhookTransport().send(
            {"url": f"http://127.0.0.1:{port}/"}, make_message(), settings=SETTINGS
        )
    assert info.value.permanent is False


def test_timeout_is_transient(receiver: tuple[str, list[dict[str, Any]]]) -> None:
    url, _ = receiver
    settings = TransportSettings(outbound_allow=("127.0.0.1",), timeout_seconds=0.3)
    with pytest.raises(TransportError, match="timed out") as info:
        WebhookTransport().send({"url": url + "/slow"}, make_message(), settings=settings)
    assert info.value.permanent is False


def test_blocked_url_is_permanent(receiver: tuple[str, list[dict[str, Any]]]) -> None:
    url, deliveries = receiver
    with pytest.raises(TransportError, match="loopback") as info:
        WebhookTransport().send({"url": url}, make_message(), settings=TransportSettings())
    assert info.value.permanent is True
    assert deliveries == []


def test_unknown_channel_kind_is_a_lookup_error() -> None:
    with pytest.raises(LookupError, match="pager"):
        get_transport("pager")
