"""Backfill: the runs of a task's past occurrences that were never recorded, on request.

The occurrences come from the schedule by the code the scheduler plans with
(occurrences.occurrences_between: fire times, calendars, freeze windows); the runs are written
by one INSERT ... ON CONFLICT DO NOTHING in the transaction that holds the task's row lock, so
a backfill either records its whole range or nothing, and an occurrence is never recorded
twice, however often the same range is backfilled (docs/schedules.md, "Backfill").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction

from scheduler_project.sql import queries
from tasks import audit, counters, events, occurrences, outbox, schedules
from tasks.db import RUN_DUE_CHANNEL, notify
from tasks.exceptions import Conflict
from tasks.ids import uuid7
from tasks.models import Run, Task

SQL = queries("tasks", "backfill.sql")

DEFAULT_MAX_RUNS = 1000
MAX_RUNS_CAP = 10_000
# The earliest start taken: an interval counted back from its anchor, or a pattern from just
# before `start`, must stay within Python's dates (year 1 overflowed: a 500).
EARLIEST_START = datetime(1970, 1, 1, tzinfo=UTC)
# What a backfill may add runs to: an active task, or one that completed (its history).
BACKFILLABLE = (Task.Status.ACTIVE, Task.Status.COMPLETED)


class BackfillError(ValueError):
    """A request the task's schedule refuses; `field` names the request's field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class BackfillResult:
    created: int  # new runs that will run
    excluded: int  # new runs recorded skipped: their occurrence is excluded
    existing: int  # occurrences that already had a run


def backfill(
    *,
    task: Task,
    start: datetime,
    end: datetime,
    now: datetime,
    max_runs: int = DEFAULT_MAX_RUNS,
    priority: int | None = None,
) -> BackfillResult:
    """Record a run for every occurrence of the task's schedule in [start, end) not recorded.

    Raises BackfillError (the field at fault) or Conflict (a paused or ended task), having
    written nothing. Holds the task's row lock (FOR UPDATE) for the transaction: a scheduler
    pass (SKIP LOCKED), a pause or a schedule change of the task waits or goes before, so the
    schedule expanded is the task's schedule when the runs are written.
    """
    if start < EARLIEST_START:
        raise BackfillError("start", f"Must not be before {_iso(EARLIEST_START)}.")
    if end <= start:
        raise BackfillError("end", "Must be later than start.")
    if end > now:
        raise BackfillError(
            "end", "Must not be in the future: occurrences from now on are the scheduler's."
        )
    if not 1 <= max_runs <= MAX_RUNS_CAP:
        raise BackfillError("max_runs", f"Must be between 1 and {MAX_RUNS_CAP}.")
    with transaction.atomic():
        task = Task.objects.select_for_update().get(pk=task.pk)
        if task.status not in BACKFILLABLE:
            raise Conflict(
                f"the task is {task.status}: only an active or completed one is backfilled"
            )
        priority = _priority(task, priority)
        found = _occurrences(task, start=start, end=end, max_runs=max_runs)
        inserted = _insert(task, found, priority=priority, now=now)
        changes = {"start": start, "end": end, "priority": priority, "runs": len(inserted)}
        audit.record(audit.entry("backfill", "task", task, changes))
    excluded = sum(1 for _, status, _ in inserted if status == Run.Status.SKIPPED)
    return BackfillResult(
        created=len(inserted) - excluded, excluded=excluded, existing=len(found) - len(inserted)
    )


def _priority(task: Task, priority: int | None) -> int:
    # A backfill may run below the task's own runs, never ahead of them.
    if priority is None:
        return task.priority
    if priority > task.priority:
        raise BackfillError("priority", f"Must not be above the task's priority ({task.priority}).")
    return priority


def _occurrences(
    task: Task, *, start: datetime, end: datetime, max_runs: int
) -> list[tuple[datetime, str | None]]:
    schedule = task.schedule
    if schedule.get("type") == "once":
        raise BackfillError("schedule", "A one-time task has no occurrences to backfill.")
    begins = schedules.beginning(schedule)
    if begins is not None and start < begins:
        back = None if schedule.get("start_at") else _defined_before(schedule, start)
        if back is None:
            raise BackfillError("start", _before_beginning(schedule, begins))
        schedule = back
    calendars = occurrences.load_calendars([schedule])
    found = occurrences.occurrences_between(
        schedule, start=start, end=end, limit=max_runs, calendars=calendars
    )
    if len(found) > max_runs:
        raise BackfillError(
            "max_runs",
            f"The range holds more than {max_runs} occurrences; backfill a shorter range "
            f"or raise max_runs (at most {MAX_RUNS_CAP}).",
        )
    return found


def _defined_before(schedule: dict, start: datetime) -> dict | None:
    """The schedule as if defined before `start`, for a backfill reaching behind its anchor
    (the moment it was defined, when it has no start_at): the types whose fire times do not
    depend on that moment get every time of their pattern, an interval the same phase counted
    back. None for an rrule: its COUNT and INTERVAL count from its start."""
    kind = schedule["type"]
    if kind in ("daily", "weekly", "monthly", "cron"):
        return {**schedule, "anchor": (start - timedelta(microseconds=1)).isoformat()}
    if kind == "interval" and schedule.get("anchor"):
        anchor = datetime.fromisoformat(schedule["anchor"])
        step = timedelta(seconds=schedule["every"])
        return {**schedule, "anchor": (anchor - ((anchor - start) // step + 1) * step).isoformat()}
    return None


def _before_beginning(schedule: dict, begins: datetime) -> str:
    if schedule.get("start_at"):
        why = "its start_at"
    else:
        why = "its anchor, when it was defined: an rrule's COUNT and INTERVAL count from it"
    return (
        f"Before the schedule begins ({_iso(begins)}, {why}); a schedule has no occurrences "
        "before it begins. To backfill earlier, give the schedule an earlier start_at."
    )


def _insert(
    task: Task, found: list[tuple[datetime, str | None]], *, priority: int, now: datetime
) -> list[tuple]:
    """The runs inserted (id, status, error): the occurrences of `found` not yet recorded."""
    if not found:
        return []
    excluded = [reason is not None for _, reason in found]
    with connection.cursor() as cursor:
        cursor.execute(
            SQL["insert_backfill"],
            {
                "task": task.pk,
                "owner": task.owner_id,
                "priority": priority,
                "max_attempts": task.max_attempts,
                "now": now,
                **task.requests,
                "ids": [uuid7() for _ in found],
                "times": [at for at, _ in found],
                "statuses": [Run.Status.SKIPPED if x else Run.Status.SCHEDULED for x in excluded],
                "errors": [reason or "" for _, reason in found],
            },
        )
        inserted = cursor.fetchall()
        skipped = [(run_id, error) for run_id, status, error in inserted if status == "skipped"]
        if skipped:
            # As the planner records an excluded occurrence: its `skipped` and its count.
            rows = [(run_id, task.pk, 0) for run_id, _ in skipped]
            outbox.enqueue(cursor, events=events.skip_events(rows))
            counters.count_skipped(
                cursor, process=f"api:{os.getpid()}", runs=[(task.pk, "exclusion") for _ in skipped]
            )
    if len(inserted) > len(skipped):
        notify(RUN_DUE_CHANNEL)
    return inserted


def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")
