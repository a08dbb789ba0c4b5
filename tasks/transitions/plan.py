"""Storing planned runs: the scheduler's pass over due tasks, and one task planned inline by
the API. What to plan is computed by tasks/occurrences.py; this module writes it."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from scheduler_project.sql import queries
from tasks import counters, occurrences
from tasks.db import RUN_DUE_CHANNEL, notify
from tasks.events import skip_events, skipped_events
from tasks.models import Run, Task
from tasks.outbox import enqueue
from tasks.transitions.completion import complete_finished_tasks

logger = logging.getLogger(__name__)

SQL = queries("tasks", "plan.sql")

# A task whose planning raises is tried again this many seconds later.
PLAN_RETRY_SECONDS = 60


@dataclass(frozen=True)
class PlanResult:
    planned: int = 0
    skipped: int = 0


def plan_task(task: Task, *, now: datetime, horizon: datetime) -> PlanResult:
    """Materialise the task's occurrences due up to `horizon` and advance `next_unplanned_at`.

    Call inside a transaction holding the task's row lock. Runs are inserted with conflicts
    ignored on (task, scheduled_at), so a second scheduler planning the same occurrence, or a
    retry of this pass after a crash, creates nothing twice.
    """
    if task.next_unplanned_at is None or task.next_unplanned_at > horizon:
        return PlanResult()
    calendars = occurrences.load_calendars([task.schedule])
    runs = occurrences.advance(task, now=now, horizon=horizon, calendars=calendars)
    Run.objects.bulk_create(runs, ignore_conflicts=True)
    _record_skips(runs)
    task.save(update_fields=["next_unplanned_at", "runs_planned", "updated_at"])
    skipped = sum(1 for r in runs if r.status == Run.Status.SKIPPED)
    if len(runs) > skipped:
        notify(RUN_DUE_CHANNEL)
    elif task.next_unplanned_at is None:
        # The last occurrences were missed and skipped: no worker will finish a run to
        # complete the task, so it is completed here (if no earlier run is still unfinished).
        complete_finished_tasks(task_ids=[task.pk])
    return PlanResult(planned=len(runs) - skipped, skipped=skipped)


def _record_skips(runs: list[Run]) -> None:
    """In the planning transaction: the outbox's `missed` per occurrence recorded missed,
    `skipped` per occurrence skipped (missed or paused), and their count by reason."""
    skipped = [r for r in runs if r.status == Run.Status.SKIPPED]
    if not skipped:
        return
    missed = skipped_events((r.id, r.task_id, 0) for r in skipped if _missed(r))
    enqueue(None, events=missed + skip_events((r.id, r.task_id, 0) for r in skipped))
    with connection.cursor() as cursor:
        counters.count_skipped(
            cursor,
            process=f"planner:{os.getpid()}",
            runs=[(r.task_id, r.skip_kind) for r in skipped],
        )


def _missed(run: Run) -> bool:
    # An occurrence skipped because its task was paused was not missed: nobody is told.
    return run.status == Run.Status.SKIPPED and run.skip_kind == "misfire"


def plan_due_tasks(*, now: datetime, batch: int = 500) -> PlanResult:
    """One scheduler pass: lock due tasks with SKIP LOCKED and plan them together.

    Any number of schedulers may run this at once: each task row is planned by exactly one of
    them per pass, and the unique (task, scheduled_at) key makes a replayed pass harmless.
    A pass costs a fixed handful of statements however many tasks it plans: one INSERT of every
    task's runs, one UPDATE of every task's next_unplanned_at, one NOTIFY. (With 100,000 tasks,
    statements and savepoints per task were three quarters of the scheduler's time.)
    """
    horizon = now + timedelta(seconds=settings.TASKS_LOOKAHEAD_SECONDS)
    with transaction.atomic():
        # FOR NO KEY UPDATE, the lock the pass's own UPDATE of the tasks takes: it excludes the
        # other schedulers and every change of a task as FOR UPDATE did, but not the foreign key
        # check of a row naming the task (FOR KEY SHARE). Under FOR UPDATE, a worker committing
        # a run's notifications, or an API creating a run, waited for the whole pass at its
        # commit (bench/NOTEBOOK.md, "Planned once per connection").
        due = list(
            Task.objects.select_for_update(skip_locked=True, no_key=True)
            .filter(status=Task.Status.ACTIVE, next_unplanned_at__lte=horizon)
            .order_by("next_unplanned_at")[:batch]
        )
        planned: list[tuple[Task, list[Run]]] = []
        failed: list[Task] = []
        # No query unless a task of the batch names calendars.
        calendars = occurrences.load_calendars([task.schedule for task in due])
        for task in due:
            try:
                # Pure computation: nothing is written until every task of the batch is planned.
                runs = occurrences.advance(task, now=now, horizon=horizon, calendars=calendars)
                planned.append((task, runs))
            except Exception:
                # A schedule this code cannot evaluate would fail every pass and, first in
                # next_unplanned_at order, hold up every task behind it. It is pushed back instead
                # of retried in a hot loop; a PATCH of its schedule replans it from now.
                logger.exception(
                    "planning task=%s failed; next attempt at %s",
                    task.pk,
                    now + timedelta(seconds=PLAN_RETRY_SECONDS),
                )
                failed.append(task)
        if failed:
            Task.objects.filter(pk__in=[t.pk for t in failed]).update(
                next_unplanned_at=now + timedelta(seconds=PLAN_RETRY_SECONDS)
            )
        return _store_plans(planned)


def _store_plans(planned: list[tuple[Task, list[Run]]]) -> PlanResult:
    """Write what `advance` computed for a batch of locked tasks, as plan_task does for one."""
    if not planned:
        return PlanResult()
    runs = [run for _, task_runs in planned for run in task_runs]
    # A long catch-up may plan up to MAX_OCCURRENCES_PER_PASS per task: bounded statements.
    Run.objects.bulk_create(runs, ignore_conflicts=True, batch_size=2000)
    skipped = [r for r in runs if r.status == Run.Status.SKIPPED]
    _record_skips(skipped)
    with connection.cursor() as cursor:
        cursor.execute(
            SQL["advance_tasks"],
            {
                "updated_at": timezone.now(),
                "ids": [task.pk for task, _ in planned],
                "next": [task.next_unplanned_at for task, _ in planned],
                "planned": [task.runs_planned for task, _ in planned],
            },
        )
    if len(runs) > len(skipped):
        notify(RUN_DUE_CHANNEL)
    # Tasks whose last occurrences were all missed and skipped: no worker will finish a run to
    # complete them, so they are completed here (if no earlier run is still unfinished).
    ended = [
        task.pk
        for task, task_runs in planned
        if task.next_unplanned_at is None and all(r.status == Run.Status.SKIPPED for r in task_runs)
    ]
    if ended:
        complete_finished_tasks(task_ids=ended)
    return PlanResult(planned=len(runs) - len(skipped), skipped=len(skipped))
