"""Stopping the delivery thread (Ctrl-C on a worker) while it sends to a mail server that does
not answer: it sends nothing more, gives the rest of its batch back due at once, and returns
after the one send in flight (its timeout), not after the whole batch's."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from notifications.delivery_thread import DeliveryThread
from notifications.models import Notification
from tests.notifications.conftest import ChannelFactory, due_run, finish, subscribed_task

TIMEOUT = 2  # seconds: each send to the silent server waits this long


@pytest.fixture
def silent_smtp() -> Iterator[tuple[int, list[socket.socket]]]:
    """A TCP server that accepts connections and never greets: every send hits its timeout."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join(5)
    for sock in [*accepted, server]:
        sock.close()


@pytest.mark.django_db(transaction=True)
def test_stopping_sends_nothing_more_and_gives_the_batch_back(silent_smtp, settings, user) -> None:
    port, accepted = silent_smtp
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", port, TIMEOUT
    settings.NOTIFICATIONS_DELIVERY_CONCURRENCY = 1
    channel = ChannelFactory(owner=user, kind="email", config={"address": "ops@example.com"})
    for _ in range(4):
        finish(due_run(subscribed_task(channel, ["succeeded"])), "succeeded")
    thread = DeliveryThread()
    thread.start()
    deadline = time.monotonic() + 10
    while not accepted and time.monotonic() < deadline:
        time.sleep(0.02)
    assert accepted, "the first send never connected"

    began = time.monotonic()
    thread.stop()
    took = time.monotonic() - began

    assert not thread.is_alive()
    assert took < TIMEOUT + 1.0, took  # the send in flight only, not four sends' timeouts
    assert len(accepted) == 1
    rows = Notification.objects.order_by("attempts")
    assert [(n.status, n.attempts) for n in rows] == [("pending", 0)] * 3 + [("pending", 1)]
    released = rows[:3]
    assert all(n.last_error == "" for n in released)
    assert all(n.next_attempt_at <= rows[3].next_attempt_at for n in released)
