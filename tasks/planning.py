"""Turning task schedules into Run rows: the scheduler's work, also used inline by the API."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice

from django.conf import settings
from django.db import transaction

from tasks import schedules
from tasks.db import RUN_DUE_CHANNEL, notify
from tasks.models import Run, Task

logger = logging.getLogger(__name__)

# Occurrences planned for one task in one pass; a longer catch-up continues on the next pass.
MAX_OCCURRENCES_PER_PASS = 1000
# run_all replays at most this many missed occurrences per catch-up; the rest are recorded skipped.
RUN_ALL_CAP = 100


@dataclass(frozen=True)
class PlanResult:
    planned: int = 0
    skipped: int = 0


def plan_task(task: Task, *, now: datetime, horizon: datetime) -> PlanResult:
    """Materialise the task's occurrences due up to `horizon` and advance `next_run_at`.

    Call inside a transaction holding the task's row lock. Runs are inserted with conflicts
    ignored on (task, scheduled_at), so a second scheduler planning the same occurrence, or a
    retry of this pass after a crash, creates nothing twice.
    """
    if task.next_run_at is None or task.next_run_at > horizon:
        return PlanResult()
    schedule = task.schedule
    max_runs = schedule.get("max_runs")
    misfire = schedule.get("misfire", "run_once")
    grace = timedelta(seconds=settings.TASKS_MISFIRE_GRACE_SECONDS)

    times: list[datetime] = []
    upcoming = schedules.fire_times(schedule, after=task.next_run_at - timedelta(microseconds=1))
    following: datetime | None = None
    for at in upcoming:
        if at > horizon or len(times) >= MAX_OCCURRENCES_PER_PASS:
            following = at
            break
        if max_runs is not None and task.runs_planned + len(times) >= max_runs:
            break
        times.append(at)
    last_chunk = following is None or following > horizon

    # A one-time task runs however late it is planned; recurring ones follow their misfire policy.
    recurring = schedule.get("type") != "once"
    missed = [at for at in times if recurring and at < now - grace]
    runnable_missed = _missed_to_run(missed, misfire=misfire, last_chunk=last_chunk)
    runs = []
    skipped = 0
    for at in times:
        status = Run.Status.SCHEDULED
        if at in missed and at not in runnable_missed:
            status = Run.Status.SKIPPED
            skipped += 1
        runs.append(_new_run(task, at, status=status, now=now))
    Run.objects.bulk_create(runs, ignore_conflicts=True)

    task.runs_planned += len(times)
    task.next_run_at = following if following is not None else _next_after(task, times)
    if max_runs is not None and task.runs_planned >= max_runs:
        task.next_run_at = None
    task.save(update_fields=["next_run_at", "runs_planned", "updated_at"])
    if len(runs) > skipped:
        notify(RUN_DUE_CHANNEL)
    return PlanResult(planned=len(runs) - skipped, skipped=skipped)


def _missed_to_run(missed: list[datetime], *, misfire: str, last_chunk: bool) -> set[datetime]:
    if not missed:
        return set()
    if misfire == "run_all":
        return set(missed[-RUN_ALL_CAP:])
    if misfire == "run_once" and last_chunk:
        return {missed[-1]}
    return set()


def _next_after(task: Task, times: list[datetime]) -> datetime | None:
    after = times[-1] if times else task.next_run_at
    if after is None:
        return None
    return next(iter(schedules.fire_times(task.schedule, after=after)), None)


def _new_run(task: Task, at: datetime, *, status: str, now: datetime) -> Run:
    key = f"{task.id}:{at.isoformat()}"
    execute_at = at + timedelta(seconds=schedules.jitter_offset(task.schedule, key=key))
    return Run(
        task=task,
        owner_id=task.owner_id,
        scheduled_at=at,
        execute_at=execute_at,
        priority=task.priority,
        max_attempts=task.max_attempts,
        status=status,
        finished_at=now if status == Run.Status.SKIPPED else None,
        error="missed: the scheduler planned this occurrence too late (misfire policy)"
        if status == Run.Status.SKIPPED
        else "",
    )


def plan_due_tasks(*, now: datetime, batch: int = 100) -> PlanResult:
    """One scheduler pass: lock due tasks with SKIP LOCKED and plan each.

    Any number of schedulers may run this at once: each task row is planned by exactly one of
    them per pass, and the unique (task, scheduled_at) key makes a replayed pass harmless.
    """
    horizon = now + timedelta(seconds=settings.TASKS_LOOKAHEAD_SECONDS)
    total = PlanResult()
    with transaction.atomic():
        due = list(
            Task.objects.select_for_update(skip_locked=True)
            .filter(status=Task.Status.ACTIVE, next_run_at__lte=horizon)
            .order_by("next_run_at")[:batch]
        )
        for task in due:
            result = plan_task(task, now=now, horizon=horizon)
            total = PlanResult(total.planned + result.planned, total.skipped + result.skipped)
    return total


def next_planning_at() -> datetime | None:
    """When the earliest active task's next occurrence enters the look-ahead window."""
    first = (
        Task.objects.filter(status=Task.Status.ACTIVE, next_run_at__isnull=False)
        .order_by("next_run_at")
        .values_list("next_run_at", flat=True)
        .first()
    )
    if first is None:
        return None
    return first - timedelta(seconds=settings.TASKS_LOOKAHEAD_SECONDS)


def preview(schedule: dict, *, now: datetime, count: int) -> list[datetime]:
    """The next fire times, computed by the same code the scheduler plans with."""
    return list(islice(schedules.preview(schedule, now=now, count=count), count))
