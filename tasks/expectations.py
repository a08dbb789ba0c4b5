"""A task's expectations (`expect`) and the TaskHealth row its checks read.

`expect` is what the API shows; the row holds its numbers as columns, the task's `health` and
the checks' state. Only tasks that expect something have a row, so the worker's outcome
statement finds none for the others (one primary-key probe of a small table) and the reviewer's
checks read only the tasks concerned (tasks/sql/expect.sql).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Min, Q, QuerySet

from tasks.models import CLAIMABLE_STATUSES, Run, Task, TaskHealth

# The column of the expectation that puts a task in each state other than `up`.
RAISED_BY = {"late": "start_within", "failing": "failure_streak", "overdue": "success_within"}

# The members of `expect`, in the order the API's documentation lists them.
FIELDS = ("start_within", "duration", "failure_streak", "success_within", "repeat_every")


def columns(expect: dict) -> dict:
    """TaskHealth's expectation columns from a validated `expect`."""
    duration = expect.get("duration") or {}
    return {
        "start_within": expect.get("start_within"),
        "min_duration": duration.get("min"),
        "max_duration": duration.get("max"),
        "failure_streak": expect.get("failure_streak"),
        "success_within": expect.get("success_within"),
        "repeat_every": expect.get("repeat_every"),
    }


def sync(tasks: Iterable[Task], *, now: datetime, created: bool = False) -> None:
    """Make each task's health row match its `expect`: none when it expects nothing; otherwise
    its columns, keeping the state (health, streak, last success) when the row exists. Inside
    the caller's transaction, after the tasks are saved. `created`: the tasks were inserted by
    this transaction, so none has a row yet (nothing to remove or keep)."""
    expecting: list[Task] = []
    idle: list[Task] = []
    for task in tasks:
        (expecting if any(task.expect.get(f) for f in FIELDS) else idle).append(task)
    if idle and not created:
        TaskHealth.objects.filter(task__in=idle).delete()
    if not expecting:
        return
    existing = (
        {} if created else {h.task_id: h for h in TaskHealth.objects.filter(task__in=expecting)}
    )
    judged_from = _late_from(expecting, now=now)
    new: list[TaskHealth] = []
    changed: list[TaskHealth] = []
    for task in expecting:
        values = columns(task.expect)
        row = existing.get(task.pk)
        if row is None:
            new.append(
                TaskHealth(
                    task=task,
                    succeeded_at=now,
                    changed_at=now,
                    late_through=judged_from[task.pk],
                    slow_through=now,
                    **values,
                )
            )
            continue
        # A check turned on now starts from now, not from the row's old cursor.
        if row.start_within is None:
            row.late_through = judged_from[task.pk]
        if row.max_duration is None:
            row.slow_through = now
        for name, value in values.items():
            setattr(row, name, value)
        # A state whose expectation is gone no longer holds (no alert: the user removed it).
        if values.get(RAISED_BY.get(row.health, "")) is None and row.health != "up":
            row.health = TaskHealth.Health.UP
            row.changed_at = now
        changed.append(row)
    TaskHealth.objects.bulk_create(new)
    if changed:
        written = [*columns({}), "late_through", "slow_through", "health", "changed_at"]
        TaskHealth.objects.bulk_update(changed, written)


def _late_from(tasks: list[Task], *, now: datetime) -> dict[Any, datetime]:
    """Where each task's `late` cursor starts: before its first run not started and its first
    occurrence not planned, when earlier than now. A one-time task due now, whose run is due at
    or before the moment its expectation is set, is judged too (the cursor is exclusive)."""
    earliest = dict(
        Run.objects.filter(task__in=tasks, attempt=0, status__in=CLAIMABLE_STATUSES, backfill=False)
        .values("task_id")
        .annotate(first=Min("scheduled_at"))
        .values_list("task_id", "first")
    )
    starts = {}
    for task in tasks:
        known = [t for t in (earliest.get(task.pk), task.next_unplanned_at) if t is not None]
        starts[task.pk] = min([now, *known]) - timedelta(microseconds=1)
    return starts


def with_health(tasks: QuerySet[Task], health: str) -> QuerySet[Task]:
    """The tasks whose `health` is `health`: `up` includes those that expect nothing (no row)."""
    if health == TaskHealth.Health.UP:
        return tasks.filter(Q(health_state__isnull=True) | Q(health_state__health=health))
    return tasks.filter(health_state__health=health)


def health_of(task: Task) -> str:
    """The task's `health` as the API shows it (a row is read unless select_related)."""
    try:
        return task.health_state.health
    except TaskHealth.DoesNotExist:
        return TaskHealth.Health.UP
