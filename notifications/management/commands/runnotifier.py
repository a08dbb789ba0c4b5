"""`manage.py runnotifier`: deliver notifications in a process of their own."""

from __future__ import annotations

import logging

from django.conf import settings

from notifications import services
from notifications.delivery_thread import next_wait
from tasks.daemon import DaemonCommand
from tasks.db import db_now
from tasks.outbox import NOTIFICATION_CHANNEL

logger = logging.getLogger(__name__)


class Command(DaemonCommand):
    """Claims due notifications with SKIP LOCKED and sends them; any number may run at once,
    beside or instead of the workers' delivery threads (NOTIFICATIONS_DELIVER_IN_WORKER)."""

    help = "Deliver pending notifications (email, webhook, Slack); several may run at once."
    role = "notifier"
    listen_channels = [NOTIFICATION_CHANNEL]

    def run_once(self) -> bool:
        limit = settings.NOTIFICATIONS_BATCH_SIZE
        # Stopping (SIGTERM), it starts no further send and gives the rest of the batch back.
        claimed = services.deliver_pending(limit=limit, now=db_now(), stopping=self.stop)
        return claimed >= limit

    def sleep_seconds(self) -> float:
        # Wake at least every heartbeat interval so /health sees this process alive.
        return min(next_wait(settings.NOTIFICATIONS_POLL_SECONDS), settings.TASKS_HEARTBEAT_SECONDS)
