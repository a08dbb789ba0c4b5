"""`manage.py runscheduler`: plan occurrences into runs a short look-ahead before they are due."""

from __future__ import annotations

import logging

from django.conf import settings

from tasks import occurrences
from tasks.api.workflows import step_bodies
from tasks.daemon import DaemonCommand
from tasks.db import TASK_CHANGED_CHANNEL, db_now
from tasks.transitions.plan import plan_due_tasks
from tasks.transitions.workflow_schedules import next_start_at, start_due_workflows

logger = logging.getLogger(__name__)

# Shortest pause after an idle pass (seconds). A task another scheduler is planning right now
# still shows its old next_unplanned_at until that transaction commits: without a floor, every other
# scheduler would spin on it meanwhile.
MIN_PAUSE_SECONDS = 0.05


class Command(DaemonCommand):
    help = "Run a scheduler: any number may run at once, no leader needed."
    role = "scheduler"
    listen_channels = [TASK_CHANGED_CHANNEL]

    def run_once(self) -> bool:
        result = plan_due_tasks(now=db_now())
        if result.planned or result.skipped:
            logger.info("planned=%d skipped=%d", result.planned, result.skipped)
        # Workflow runs start at their occurrence, not a look-ahead before it: a workflow run
        # is its steps' runs made now, and its overlap policy reads what runs at that moment.
        started = start_due_workflows(now=db_now(), step_bodies=step_bodies)
        if started.started or started.skipped:
            logger.info("workflow runs started=%d skipped=%d", started.started, started.skipped)
        return bool(result.planned or result.skipped or started.started or started.skipped)

    def sleep_seconds(self) -> float:
        """Until the earliest unplanned occurrence is half a look-ahead away, at most a heartbeat.

        Waking as soon as an occurrence enters the look-ahead would plan one task per pass: tens
        of transactions a second with many short intervals. Half a look-ahead later, one pass
        plans every task due within the whole look-ahead, and each occurrence is still planned
        at least half a look-ahead before it is due.
        """
        upcoming = occurrences.next_planning_at()
        cap = settings.TASKS_HEARTBEAT_SECONDS
        slack = settings.TASKS_LOOKAHEAD_SECONDS / 2
        now = db_now()
        wait = cap if upcoming is None else (upcoming - now).total_seconds() + slack
        # A workflow's occurrence is started when it is due: woken then, not half a look-ahead
        # later.
        workflow_due = next_start_at()
        if workflow_due is not None:
            wait = min(wait, (workflow_due - now).total_seconds())
        return max(min(MIN_PAUSE_SECONDS, slack), min(cap, wait))
