"""`manage.py runreviewer`: rescue runs of dead workers and flag runs starved past the SLA."""

from __future__ import annotations

import logging

from django.conf import settings

from reviewers import services
from tasks.daemon import DaemonCommand

logger = logging.getLogger(__name__)


class Command(DaemonCommand):
    help = "Run a reviewer: rescues stuck runs; several may run at once."
    role = "reviewer"

    def run_once(self) -> bool:
        rescue = services.rescue_stuck_runs(after_seconds=settings.REVIEWERS_RESCUE_AFTER_SECONDS)
        starved = services.flag_starved_runs(sla_seconds=settings.TASKS_START_SLA_SECONDS)
        if rescue.rescued or rescue.failed or starved:
            logger.info(
                "rescued=%d failed=%d waiting_for_resource=%d",
                rescue.rescued,
                rescue.failed,
                starved,
            )
        return False

    def sleep_seconds(self) -> float:
        return settings.REVIEWERS_INTERVAL_SECONDS
