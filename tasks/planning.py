"""Turning task schedules into Run rows: the scheduler's work, also used inline by the API."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice
from uuid import UUID

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from notifications.outbox import enqueue
from tasks import schedules
from tasks.db import RUN_DUE_CHANNEL, notify
from tasks.ids import idempotency_key
from tasks.models import CLAIMABLE_STATUSES, Run, Task

logger = logging.getLogger(__name__)

# Occurrences planned for one task in one pass; a longer catch-up continues on the next pass.
MAX_OCCURRENCES_PER_PASS = 1000
# run_all replays at most this many missed occurrences per catch-up; the rest are recorded skipped.
RUN_ALL_CAP = 100
# A task whose planning raises is tried again this many seconds later.
PLAN_RETRY_SECONDS = 60


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
    runs = advance(task, now=now, horizon=horizon)
    Run.objects.bulk_create(runs, ignore_conflicts=True)
    # Outbox (issue 5): `missed` per occurrence recorded skipped, in the planning transaction.
    enqueue(None, events=[(r.id, task.id, 0, "missed") for r in runs if r.status == "skipped"])
    task.save(update_fields=["next_run_at", "runs_planned", "updated_at"])
    skipped = sum(1 for r in runs if r.status == Run.Status.SKIPPED)
    if len(runs) > skipped:
        notify(RUN_DUE_CHANNEL)
    elif task.next_run_at is None:
        # The last occurrences were missed and skipped: no worker will finish a run to
        # complete the task, so it is completed here (if no earlier run is still unfinished).
        from tasks.queue import complete_finished_tasks

        complete_finished_tasks(task_ids=[task.pk])
    return PlanResult(planned=len(runs) - skipped, skipped=skipped)


def advance(task: Task, *, now: datetime, horizon: datetime) -> list[Run]:
    """The runs (unsaved) of the task's occurrences up to `horizon`, applying the misfire policy;
    advances `task.next_run_at` and `task.runs_planned` in memory. Pure apart from reading
    settings, so bulk creation can plan many new tasks and insert them in two statements.
    """
    if task.next_run_at is None or task.next_run_at > horizon:
        return []
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

    # A one-time task runs however late it is planned; recurring ones follow their misfire policy.
    recurring = schedule.get("type") != "once"
    missed = [at for at in times if recurring and at < now - grace]
    room = None if max_runs is None else max_runs - task.runs_planned - len(times)
    runnable_missed = _missed_to_run(
        schedule, missed, misfire=misfire, following=following, cutoff=now - grace, room=room
    )
    missed_set = set(missed)
    runs = []
    for at in times:
        status = Run.Status.SCHEDULED
        if at in missed_set and at not in runnable_missed:
            status = Run.Status.SKIPPED
        runs.append(_new_run(task, at, status=status, now=now))

    task.runs_planned += len(times)
    task.next_run_at = following if following is not None else _next_after(task, times)
    if max_runs is not None and task.runs_planned >= max_runs:
        task.next_run_at = None
    return runs


def _missed_to_run(
    schedule: dict,
    missed: list[datetime],
    *,
    misfire: str,
    following: datetime | None,
    cutoff: datetime,
    room: int | None,
) -> set[datetime]:
    """The missed occurrences of this pass that run: the latest of the whole catch-up.

    `run_once` runs the latest missed occurrence, `run_all` the latest RUN_ALL_CAP. A catch-up
    longer than one pass continues from `following`: missed occurrences still to come there
    (before `cutoff`, within the `room` max_runs leaves) take precedence over this pass's.
    """
    cap = {"run_once": 1, "run_all": RUN_ALL_CAP}.get(misfire, 0)
    if not missed or cap == 0:
        return set()
    later = 0
    if following is not None and following < cutoff:
        limit = cap if room is None else min(cap, room)
        for at in schedules.fire_times(schedule, after=following - timedelta(microseconds=1)):
            if at >= cutoff or later >= limit:
                break
            later += 1
    keep = cap - later
    return set(missed[-keep:]) if keep > 0 else set()


def _next_after(task: Task, times: list[datetime]) -> datetime | None:
    after = times[-1] if times else task.next_run_at
    if after is None:
        return None
    return next(iter(schedules.fire_times(task.schedule, after=after)), None)


def _new_run(task: Task, at: datetime, *, status: str, now: datetime) -> Run:
    key = idempotency_key(task.id, at)
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


def plan_due_tasks(*, now: datetime, batch: int = 500) -> PlanResult:
    """One scheduler pass: lock due tasks with SKIP LOCKED and plan them together.

    Any number of schedulers may run this at once: each task row is planned by exactly one of
    them per pass, and the unique (task, scheduled_at) key makes a replayed pass harmless.
    A pass costs a fixed handful of statements however many tasks it plans: one INSERT of every
    task's runs, one UPDATE of every task's next_run_at, one NOTIFY. (With 100,000 tasks,
    statements and savepoints per task were three quarters of the scheduler's time.)
    """
    horizon = now + timedelta(seconds=settings.TASKS_LOOKAHEAD_SECONDS)
    with transaction.atomic():
        due = list(
            Task.objects.select_for_update(skip_locked=True)
            .filter(status=Task.Status.ACTIVE, next_run_at__lte=horizon)
            .order_by("next_run_at")[:batch]
        )
        planned: list[tuple[Task, list[Run]]] = []
        failed: list[Task] = []
        for task in due:
            try:
                # Pure computation: nothing is written until every task of the batch is planned.
                planned.append((task, advance(task, now=now, horizon=horizon)))
            except Exception:
                # A schedule this code cannot evaluate would fail every pass and, first in
                # next_run_at order, hold up every task behind it. It is pushed back instead
                # of retried in a hot loop; a PATCH of its schedule replans it from now.
                logger.exception("planning task=%s failed; next attempt at %s", task.pk,
                                 now + timedelta(seconds=PLAN_RETRY_SECONDS))  # fmt: skip
                failed.append(task)
        if failed:
            Task.objects.filter(pk__in=[t.pk for t in failed]).update(
                next_run_at=now + timedelta(seconds=PLAN_RETRY_SECONDS)
            )
        return _store_plans(planned)


_ADVANCE_TASKS_SQL = """
UPDATE tasks_task t SET next_run_at = v.next_run_at, runs_planned = v.runs_planned,
       updated_at = %(updated_at)s
  FROM unnest(%(ids)s::uuid[], %(next)s::timestamptz[], %(planned)s::int[])
       AS v(id, next_run_at, runs_planned)
 WHERE t.id = v.id
"""


def _store_plans(planned: list[tuple[Task, list[Run]]]) -> PlanResult:
    """Write what `advance` computed for a batch of locked tasks, as plan_task does for one."""
    if not planned:
        return PlanResult()
    runs = [run for _, task_runs in planned for run in task_runs]
    # A long catch-up may plan up to MAX_OCCURRENCES_PER_PASS per task: bounded statements.
    Run.objects.bulk_create(runs, ignore_conflicts=True, batch_size=2000)
    # Outbox (issue 5): `missed` per occurrence recorded skipped, in the planning transaction.
    skipped = [r for r in runs if r.status == Run.Status.SKIPPED]
    enqueue(None, events=[(r.id, r.task_id, 0, "missed") for r in skipped])
    with connection.cursor() as cursor:
        cursor.execute(
            _ADVANCE_TASKS_SQL,
            {
                "updated_at": timezone.now(),
                "ids": [task.pk for task, _ in planned],
                "next": [task.next_run_at for task, _ in planned],
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
        if task.next_run_at is None and all(r.status == Run.Status.SKIPPED for r in task_runs)
    ]
    if ended:
        from tasks.queue import complete_finished_tasks

        complete_finished_tasks(task_ids=ended)
    return PlanResult(planned=len(runs) - len(skipped), skipped=len(skipped))


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


def next_runs(task: Task, *, now: datetime, count: int = 5) -> list[datetime]:
    """The task's next `count` fire times, as its `next_runs` shows them.

    Occurrences already planned but not started, due at `now` or later, come first: the
    look-ahead plans them before they are due, and `next_run_at` is only the first occurrence
    not planned yet. Then the schedule's fire times from `next_run_at`, by the same
    `fire_times` the scheduler plans with, within what max_runs leaves. A skipped occurrence is
    not listed: it will not run.
    """
    if task.status != Task.Status.ACTIVE:
        return []
    prefetched = task.pending_times  # loaded for a whole list page with one query
    if prefetched is None:
        prefetched = pending_times([task.pk], now=now, count=count)[task.pk]
    pending = [at for at in prefetched if at >= now][:count]
    upcoming: list[datetime] = []
    if task.next_run_at is not None:
        max_runs = task.schedule.get("max_runs")
        left = count if max_runs is None else max(0, min(count, max_runs - task.runs_planned))
        after = task.next_run_at - timedelta(microseconds=1)
        upcoming = list(islice(schedules.fire_times(task.schedule, after=after), left))
    return sorted({*pending, *upcoming})[:count]


# Planned occurrences not started yet, due at `now` or later, earliest first: up to `count` per
# task by the (task_id, scheduled_at) unique index, however long each task's history is.
_PENDING_SQL = """
SELECT t.id, r.scheduled_at
  FROM unnest(%s::uuid[]) AS t(id)
 CROSS JOIN LATERAL (
       SELECT scheduled_at FROM tasks_run
        WHERE task_id = t.id AND status = ANY(%s) AND attempt = 0 AND scheduled_at >= %s
        ORDER BY scheduled_at LIMIT %s) AS r
"""


def pending_times(task_ids: list[UUID], *, now: datetime, count: int = 5) -> dict[UUID, list]:
    """Each task's planned occurrences not started yet (what `next_runs` lists first), in one
    query for any number of tasks: a task list page asks for all of its tasks at once."""
    found: dict[UUID, list] = {task_id: [] for task_id in task_ids}
    if task_ids:
        with connection.cursor() as cursor:
            cursor.execute(_PENDING_SQL, [list(task_ids), list(CLAIMABLE_STATUSES), now, count])
            for task_id, scheduled_at in cursor:
                found[task_id].append(scheduled_at)
    return found


def preview(schedule: dict, *, now: datetime, count: int) -> list[datetime]:
    """The next fire times, computed by the same code the scheduler plans with."""
    return list(islice(schedules.preview(schedule, now=now, count=count), count))
