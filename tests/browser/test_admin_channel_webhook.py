"""A user (no staff rights) adds a webhook channel and a cron task in the admin, picks the
channel by name, sees the fire times before saving, and the webhook arrives, signed with the
secret the admin showed once, when a real worker runs the task."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import standardwebhooks

from tests.conftest import process_env, wait_for
from tests.factories import UserFactory

pytestmark = pytest.mark.processes


@pytest.fixture
def hook() -> Iterator[tuple[str, list[tuple[bytes, dict[str, str]]]]]:
    arrived: list[tuple[bytes, dict[str, str]]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            arrived.append(
                (self.rfile.read(int(self.headers["Content-Length"])), dict(self.headers))
            )
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", arrived
    server.shutdown()
    server.server_close()


def test_a_user_wires_a_task_to_their_webhook_in_the_browser(
    gunicorn, static_root, page, processes, hook
) -> None:
    url, arrived = hook
    site = gunicorn(workers=2, STATIC_ROOT=str(static_root), SCHEDULER_OUTBOUND_ALLOW="127.0.0.1")
    UserFactory(username="carol")
    page.goto(f"{site}/admin/login/")
    page.fill("#id_username", "carol")
    page.fill("#id_password", "password-123")
    page.click("input[type=submit]")
    page.wait_for_selector("#content")

    page.goto(f"{site}/admin/notifications/channel/add/")
    page.select_option("#id_kind", "webhook")
    page.fill("#id_name", "carol hook")
    page.fill("#id_url", url)
    page.click("#channel-save")
    secret = page.locator("#generated-secret").inner_text().strip()
    assert secret.startswith("whsec_")

    page.goto(f"{site}/admin/tasks/task/add/")
    page.fill("#id_name", "every two seconds")
    page.select_option("#id_kind", "handler")
    page.fill("#id_payload", '{"name": "echo", "args": {"to": "carol"}}')
    page.select_option("#id_schedule_type", "cron")
    page.fill("#id_expression", "*/2 * * * * *")
    page.wait_for_function("document.querySelectorAll('.next-fire-times-preview li').length === 5")
    page.get_by_label("carol hook (webhook)").check()
    page.get_by_label("succeeded", exact=True).check()
    page.click("input[name=_continue]")
    page.wait_for_selector(".next-fire-times li")

    processes.start(
        "runworker", "--concurrency", "1", env=process_env(SCHEDULER_OUTBOUND_ALLOW="127.0.0.1")
    )
    wait_for(lambda: arrived, timeout=60, interval=0.3, details=processes.logs)
    body, headers = arrived[0]
    standardwebhooks.Webhook(secret).verify(body, headers)  # raises unless signed with it
    assert b'"succeeded"' in body and b"every two seconds" in body
