"""A thread that delivers notifications as soon as they are enqueued (LISTEN) and when retries
fall due; the worker runs one (NOTIFICATIONS_DELIVER_IN_WORKER), `runnotifier` runs the same
service in its own process."""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import close_old_connections, connection

from notifications import services
from tasks.db import Listener, db_now, is_unavailable
from tasks.outages import DATABASE
from tasks.outbox import NOTIFICATION_CHANNEL

logger = logging.getLogger(__name__)


def next_wait(poll: float) -> float:
    """How long a deliverer may sleep: until the next retry falls due, at most `poll`."""
    until = services.seconds_until_next_due()
    return poll if until is None else max(0.0, min(poll, until))


class DeliveryThread(threading.Thread):
    """Delivers pending notifications until stopped. A NOTIFY on `scheduler_notification` (sent
    on commit of the outcome that enqueued them) wakes it at once; otherwise it sleeps until the
    earliest retry is due, at most NOTIFICATIONS_POLL_SECONDS. Uses its own database connection
    (Django's, per thread) plus the listener's."""

    def __init__(self) -> None:
        super().__init__(name="notifications", daemon=True)
        self.stopping = threading.Event()
        self.wake = threading.Event()
        self.listener = Listener([NOTIFICATION_CHANNEL], self.wake)
        self.delivered = 0

    def stop(self, timeout: float = 15.0) -> None:
        """Finish the batch in hand (sends are bounded by their timeouts), then return."""
        self.stopping.set()
        self.wake.set()
        self.listener.stop()
        if self.is_alive():
            self.join(timeout)

    def run(self) -> None:
        self.listener.start()
        limit = settings.NOTIFICATIONS_BATCH_SIZE
        poll = settings.NOTIFICATIONS_POLL_SECONDS
        try:
            while not self.stopping.is_set():
                self.wake.clear()
                close_old_connections()
                try:
                    claimed = services.deliver_pending(
                        limit=limit, now=db_now(), stopping=self.stopping
                    )
                    self.delivered += claimed
                    wait = 0.0 if claimed >= limit else next_wait(poll)
                except Exception as exc:  # a database restart or a bug: log, back off, carry on
                    if is_unavailable(exc):
                        DATABASE.failed(exc, what="notification delivery")
                    else:
                        logger.exception("notification delivery failed; retrying shortly")
                    connection.close()
                    wait = 1.0
                if wait > 0:
                    self.wake.wait(wait)
        finally:
            connection.close()


def start_delivery_thread() -> DeliveryThread | None:
    """Start a DeliveryThread when NOTIFICATIONS_DELIVER_IN_WORKER; else None (the worker's
    companion thread, registered in apps.py)."""
    if not settings.NOTIFICATIONS_DELIVER_IN_WORKER:
        return None
    thread = DeliveryThread()
    thread.start()
    return thread
