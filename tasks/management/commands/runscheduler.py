"""`manage.py runscheduler`: plan occurrences into runs a short look-ahead before they are due."""

from __future__ import annotations

import logging

from django.conf import settings

from tasks import planning
from tasks.daemon import DaemonCommand
from tasks.db import TASK_CHANGED_CHANNEL, db_now

logger = logging.getLogger(__name__)


class Command(DaemonCommand):
    help = "Run a scheduler: any number may run at once, no leader needed."
    role = "scheduler"
    listen_channels = [TASK_CHANGED_CHANNEL]

    def run_once(self) -> bool:
        result = planning.plan_due_tasks(now=db_now())
        if result.planned or result.skipped:
            logger.info("planned=%d skipped=%d", result.planned, result.skipped)
        return bool(result.planned or result.skipped)

    def sleep_seconds(self) -> float:
        upcoming = planning.next_planning_at()
        cap = settings.TASKS_HEARTBEAT_SECONDS
        if upcoming is None:
            return cap
        return max(0.0, min(cap, (upcoming - db_now()).total_seconds()))
