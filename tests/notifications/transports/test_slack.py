from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from notifications.transports.base import Message, TransportError, TransportSettings, get_transport
from notifications.transports.slack import SlackTransport

RUN_URL = "https://scheduler.example/runs/r-1"
# chat.postMessage answers by channel; incoming webhooks by path (Slack's documented replies).
API_REPLIES: dict[str, tuple[int, object]] = {
    "C-missing": (200, {"ok": False, "error": "channel_not_found"}),
    "C-outside": (200, {"ok": False, "error": "not_in_channel"}),
    "C-limited": (429, {"ok": False, "error": "ratelimited"}),
    "C-down": (503, "upstream unavailable"),
}
HOOK_REPLIES: dict[str, tuple[int, str]] = {
    "/hooks/ok": (200, "ok"),
    "/hooks/invalid": (400, "invalid_payload"),
    "/hooks/gone": (404, "no_service"),
    "/hooks/busy": (429, "rate_limited"),
    "/hooks/down": (500, "internal error"),
}


def make_message() -> Message:
    task = {"id": "t-1", "name": "nightly <report>", "kind": "handler"}
    run = {"id": "r-1", "status": "failed", "attempt": 2, "max_attempts": 5, "error": "boom"}
    return Message(
        delivery_id="n-1",
        event="failed",
        created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        subject="Task nightly <report> failed",
        text="Run r-1 failed.",
        body={},
        task=task,
        run=run,
        run_url=RUN_URL,
    )


class _FakeSlack(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]

    def do_POST(self) -> None:
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append(
            {"path": self.path, "payload": payload, "auth": self.headers.get("Authorization")}
        )
        if self.path == "/api/chat.postMessage":
            if self.headers.get("Authorization") != "Bearer xoxb-good":
                status, reply = 200, {"ok": False, "error": "invalid_auth"}
            else:
                status, reply = API_REPLIES.get(
                    payload["channel"], (200, {"ok": True, "ts": "1.2"})
                )
            content_type = "text/plain" if isinstance(reply, str) else "application/json"
            data = (reply if isinstance(reply, str) else json.dumps(reply)).encode()
        else:
            status, text = HOOK_REPLIES.get(self.path, (404, "no_service"))
            content_type, data = "text/html", text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def slack() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    handler = type("FakeSlack", (_FakeSlack,), {"received": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", handler.received
    httpd.shutdown()
    httpd.server_close()


def _settings(base: str) -> TransportSettings:
    return TransportSettings(
        outbound_allow=("127.0.0.1",), timeout_seconds=5, slack_api_base_url=base + "/api"
    )


def _assert_formatted(payload: dict[str, Any]) -> None:
    blocks_text = json.dumps(payload["blocks"])
    assert f"<{RUN_URL}|View run>" in blocks_text
    assert "failed" in blocks_text and "2 of 5" in blocks_text and "r-1" in blocks_text
    assert "nightly &lt;report&gt;" in blocks_text  # mrkdwn escaped
    assert payload["blocks"][0]["type"] == "header"
    assert RUN_URL in payload["text"]


def test_chat_post_message_with_token(slack: tuple[str, list[dict[str, Any]]]) -> None:
    base, received = slack
    config = {"token": "xoxb-good", "channel": "C-ops"}
    get_transport("slack").send(config, make_message(), settings=_settings(base))
    [request] = received
    assert request["path"] == "/api/chat.postMessage"
    assert request["payload"]["channel"] == "C-ops"
    _assert_formatted(request["payload"])


@pytest.mark.parametrize(
    ("token", "channel", "error", "permanent"),
    [
        ("xoxb-wrong", "C-ops", "invalid_auth", True),
        ("xoxb-good", "C-missing", "channel_not_found", True),
        ("xoxb-good", "C-outside", "not_in_channel", True),
        ("xoxb-good", "C-limited", "ratelimited", False),
        ("xoxb-good", "C-down", "HTTP 503", False),
    ],
)
def test_chat_post_message_errors(
    slack: tuple[str, list[dict[str, Any]]], token: str, channel: str, error: str, permanent: bool
) -> None:
    base, _ = slack
    with pytest.raises(TransportError, match=error) as info:
        SlackTransport().send(
            {"token": token, "channel": channel}, make_message(), settings=_settings(base)
        )
    assert info.value.permanent is permanent


def test_incoming_webhook(slack: tuple[str, list[dict[str, Any]]]) -> None:
    base, received = slack
    SlackTransport().send(
        {"webhook_url": base + "/hooks/ok"}, make_message(), settings=_settings(base)
    )
    [request] = received
    assert request["path"] == "/hooks/ok"
    _assert_formatted(request["payload"])


@pytest.mark.parametrize(
    ("path", "error", "permanent"),
    [
        ("/hooks/invalid", "invalid_payload", True),
        ("/hooks/gone", "no_service", True),
        ("/hooks/busy", "rate_limited", False),
        ("/hooks/down", "HTTP 500", False),
    ],
)
def test_incoming_webhook_errors(
    slack: tuple[str, list[dict[str, Any]]], path: str, error: str, permanent: bool
) -> None:
    base, _ = slack
    with pytest.raises(TransportError, match=error) as info:
        SlackTransport().send(
            {"webhook_url": base + path}, make_message(), settings=_settings(base)
        )
    assert info.value.permanent is permanent


def test_webhook_url_goes_through_the_guard(slack: tuple[str, list[dict[str, Any]]]) -> None:
    base, received = slack
    with pytest.raises(TransportError, match="loopback") as info:
        SlackTransport().send(
            {"webhook_url": base + "/hooks/ok"},
            make_message(),
            settings=TransportSettings(slack_api_base_url=base),
        )
    assert info.value.permanent is True
    assert received == []


def test_unreachable_slack_api_is_transient() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with pytest.raises(TransportError) as info:
        SlackTransport().send(
            {"token": "xoxb-good", "channel": "C-ops"}, make_message(), settings=_settings(base)
        )
    assert info.value.permanent is False


def test_config_without_destination_is_permanent() -> None:
    with pytest.raises(TransportError) as info:
        SlackTransport().send({"channel": "C-ops"}, make_message(), settings=TransportSettings())
    assert info.value.permanent is True
