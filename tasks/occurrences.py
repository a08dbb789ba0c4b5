"""Turning task schedules into Run rows (computed, not stored: tasks/transitions/plan.py stores
them) and reading what is planned: a task's next runs, schedule previews."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from itertools import islice
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection

from tasks import exclusions, instances, schedules
from tasks.exclusions import CalendarData, Exclusions
from tasks.ids import idempotency_key
from tasks.models import CLAIMABLE_STATUSES, REQUEST_FIELDS, Calendar, Run, Task

# Occurrences planned for one task in one pass; a longer catch-up continues on the next pass.
MAX_OCCURRENCES_PER_PASS = 1000
RUN_ALL_CAP = schedules.RUN_ALL_CAP
MISSED_REASON = "missed: the scheduler planned this occurrence too late (misfire policy)"
PAUSED_REASON = "paused: the task was paused at this occurrence's time"


def _paused_during(task: Mapping[str, Any]) -> Callable[[datetime], bool]:
    """Whether an occurrence's time fell while the task was paused (its last pause, from
    `paused_at` until `resumed_at`): such an occurrence is recorded skipped, never run."""
    start, end = task["paused_at"], task["resumed_at"]
    if start is None or end is None or end <= start:
        return lambda at: False
    return lambda at: start <= at < end


def load_calendars(schedules_: list[dict]) -> dict[str, CalendarData]:
    """The calendars these schedules name in `exclude`, by id: one query, none without any."""
    ids = exclusions.calendar_ids(schedules_)
    if not ids:
        return {}
    return {str(c.pk): calendar_data(c) for c in Calendar.objects.filter(pk__in=ids)}


def calendar_data(calendar: Calendar) -> CalendarData:
    return CalendarData(
        id=str(calendar.pk),
        name=calendar.name,
        timezone=calendar.timezone,
        country=(calendar.holidays or {}).get("country"),
        subdivision=(calendar.holidays or {}).get("subdivision"),
        dates=frozenset(date.fromisoformat(d) for d in calendar.dates),
        windows=tuple(
            (datetime.fromisoformat(w["start"]), datetime.fromisoformat(w["end"]))
            for w in calendar.windows
        ),
    )


def exclusions_of(schedule: dict, calendars: dict[str, CalendarData] | None) -> Exclusions:
    if schedule.get("type") == "once":
        return Exclusions()
    return exclusions.for_schedule(schedule, calendars or {})


def days_off(excluded: Exclusions) -> Callable[[date], bool] | None:
    """The business days' holidays: None (Monday to Friday) for a schedule without calendars."""
    return excluded.days_off if excluded.calendars else None


# What planning reads of a task (`advance_values`).
PLANNED_FROM = (
    "id",
    "owner_id",
    "schedule",
    "next_unplanned_at",
    "runs_planned",
    "paused_at",
    "resumed_at",
    "priority",
    "max_attempts",
    *REQUEST_FIELDS,
)


def advance(
    task: Task,
    *,
    now: datetime,
    horizon: datetime,
    calendars: dict[str, CalendarData] | None = None,
) -> list[Run]:
    """The runs (unsaved) of the task's occurrences up to `horizon`, applying the misfire policy
    and the exclusions (`calendars`: the ones its schedule names, see load_calendars);
    advances `task.next_unplanned_at` and `task.runs_planned` in memory. Pure apart from reading
    settings, so bulk creation can plan many new tasks and insert them in bulk.
    """
    values = {name: getattr(task, name) for name in PLANNED_FROM}
    planned = advance_values(values, now=now, horizon=horizon, calendars=calendars)
    if planned is None:
        return []
    runs, task.runs_planned, task.next_unplanned_at = planned
    return [instances.build(Run, run, related={"task": task}) for run in runs]


def advance_values(
    task: Mapping[str, Any],
    *,
    now: datetime,
    horizon: datetime,
    calendars: dict[str, CalendarData] | None = None,
) -> tuple[list[dict[str, Any]], int, datetime | None] | None:
    """`advance` for a task given as its fields' values by attribute name (a row the batch
    create inserts without an instance): the values of its runs (`Run`'s attributes, the rest
    its defaults), its `runs_planned` and `next_unplanned_at` after them; None when nothing is
    due by `horizon` (both left as they are)."""
    if task["next_unplanned_at"] is None or task["next_unplanned_at"] > horizon:
        return None
    schedule = task["schedule"]
    recurring = schedule.get("type") != "once"
    due = due_occurrences(
        schedule,
        next_at=task["next_unplanned_at"],
        planned=task["runs_planned"],
        now=now,
        horizon=horizon,
        calendars=calendars,
        paused=_paused_during(task),
    )
    grace = timedelta(seconds=grace_seconds(schedule)) if recurring else None
    runs = [
        _run_values(task, o.at, status=o.status, kind=o.kind, reason=o.reason, now=now, grace=grace)
        for o in due.occurrences
    ]
    return runs, due.planned, due.next_at


@dataclass(frozen=True)
class Occurrence:
    """One occurrence of a schedule as planned: `scheduled` (it runs) or `skipped`, with the
    kind of skip (`misfire`, `pause`, `exclusion`) and its reason."""

    at: datetime
    status: str
    kind: str = ""
    reason: str = ""


@dataclass(frozen=True)
class DueOccurrences:
    occurrences: list[Occurrence]
    next_at: datetime | None  # the first occurrence not planned yet; None: the schedule ended
    planned: int  # occurrences planned so far, these included (max_runs counts them)


def due_occurrences(
    schedule: dict,
    *,
    next_at: datetime,
    planned: int,
    now: datetime,
    horizon: datetime,
    calendars: dict[str, CalendarData] | None = None,
    paused: Callable[[datetime], bool] | None = None,
) -> DueOccurrences:
    """A schedule's occurrences from `next_at` up to `horizon` (`planned` of them planned
    before), each to run or skipped by the misfire policy, the exclusions or `paused` (times
    that fell while its owner was paused). What tasks (advance) and workflows
    (tasks/transitions/workflow_schedules.py) plan from. Pure apart from reading settings."""
    max_runs = schedule.get("max_runs")
    misfire = schedule.get("misfire", "run_once")
    grace = timedelta(seconds=grace_seconds(schedule))
    excluded = exclusions_of(schedule, calendars)
    off = days_off(excluded)

    times: list[datetime] = []
    upcoming = schedules.fire_times(
        schedule, after=next_at - timedelta(microseconds=1), days_off=off
    )
    following: datetime | None = None
    for at in upcoming:
        if at > horizon or len(times) >= MAX_OCCURRENCES_PER_PASS:
            following = at
            break
        if max_runs is not None and planned + len(times) >= max_runs:
            break
        times.append(at)

    # A one-time schedule runs however late it is planned; recurring ones follow their misfire
    # policy, except for the occurrences that fell while paused: those are skipped.
    recurring = schedule.get("type") != "once"
    paused_ = paused if recurring and paused is not None else lambda at: False
    reasons = {at: excluded.reason(at) for at in times} if excluded else {}

    def left_out(at: datetime) -> bool:
        # Paused or excluded: recorded skipped for that reason, never counted as missed.
        return paused_(at) or (bool(excluded) and excluded.reason(at) is not None)

    missed = [at for at in times if recurring and at < now - grace and not left_out(at)]
    room = None if max_runs is None else max_runs - planned - len(times)
    runnable_missed = _missed_to_run(
        schedule,
        missed,
        misfire=misfire,
        following=following,
        cutoff=now - grace,
        room=room,
        paused=left_out,
        days_off=off,
    )
    missed_set = set(missed)
    found = []
    for at in times:
        if paused_(at):
            found.append(Occurrence(at, Run.Status.SKIPPED, "pause", PAUSED_REASON))
        elif reasons.get(at):
            found.append(Occurrence(at, Run.Status.SKIPPED, "exclusion", reasons[at] or ""))
        elif at in missed_set and at not in runnable_missed:
            found.append(Occurrence(at, Run.Status.SKIPPED, "misfire", MISSED_REASON))
        else:
            found.append(Occurrence(at, Run.Status.SCHEDULED))

    planned += len(times)
    following = following if following is not None else _next_after(schedule, next_at, times, off)
    if max_runs is not None and planned >= max_runs:
        following = None
    return DueOccurrences(occurrences=found, next_at=following, planned=planned)


def _missed_to_run(
    schedule: dict,
    missed: list[datetime],
    *,
    misfire: str,
    following: datetime | None,
    cutoff: datetime,
    room: int | None,
    paused: Callable[[datetime], bool],
    days_off: Callable[[date], bool] | None,
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
        after = following - timedelta(microseconds=1)
        for at in schedules.fire_times(schedule, after=after, days_off=days_off):
            if at >= cutoff or later >= limit:
                break
            later += 0 if paused(at) else 1
    keep = cap - later
    return set(missed[-keep:]) if keep > 0 else set()


def _next_after(
    schedule: dict, next_at: datetime, times: list[datetime], off: Callable[[date], bool] | None
) -> datetime | None:
    after = times[-1] if times else next_at
    return next(iter(schedules.fire_times(schedule, after=after, days_off=off)), None)


def grace_seconds(schedule: dict) -> float:
    """The task's misfire grace: its schedule's `misfire_grace`, else the deployment default."""
    return schedules.misfire_grace(schedule, default=settings.TASKS_MISFIRE_GRACE_SECONDS)


def shown_schedule(schedule: dict) -> dict:
    """A schedule as the API shows it: a recurring one with the misfire grace that applies."""
    if schedule.get("type", "once") == "once" or schedule.get("misfire_grace") is not None:
        return schedule
    return {**schedule, "misfire_grace": grace_seconds(schedule)}


def _run_values(
    task: Mapping[str, Any],
    at: datetime,
    *,
    status: str,
    kind: str,
    reason: str,
    now: datetime,
    grace: timedelta | None,
) -> dict[str, Any]:
    execute_at = at
    schedule = task["schedule"]
    if schedule.get("jitter"):  # the key only seeds the jitter: made when there is one
        key = idempotency_key(task["id"], at)
        execute_at += timedelta(seconds=schedules.jitter_offset(schedule, key=key))
    return {
        "task_id": task["id"],
        "owner_id": task["owner_id"],
        "scheduled_at": at,
        "execute_at": execute_at,
        # Counted from execute_at: jitter is a planned delay, not lateness.
        "missed_after": None if grace is None else execute_at + grace,
        "priority": task["priority"],
        "max_attempts": task["max_attempts"],
        **{name: task[name] for name in REQUEST_FIELDS},
        "status": status,
        "finished_at": now if status == Run.Status.SKIPPED else None,
        "skip_kind": kind,
        "error": reason,
    }


def occurrences_between(
    schedule: dict,
    *,
    start: datetime,
    end: datetime,
    limit: int,
    calendars: dict[str, CalendarData] | None = None,
) -> list[tuple[datetime, str | None]]:
    """The schedule's occurrences in [start, end), each with the reason its exclusions leave
    it out (None: it runs), by the same `fire_times` the scheduler plans with; at most
    `limit + 1` of them, so a caller can tell that the range holds more than `limit`."""
    excluded = exclusions_of(schedule, calendars)
    found: list[tuple[datetime, str | None]] = []
    after = start - timedelta(microseconds=1)
    for at in schedules.fire_times(schedule, after=after, days_off=days_off(excluded)):
        if at >= end or len(found) > limit:
            break
        found.append((at, excluded.reason(at) if excluded else None))
    return found


def next_planning_at() -> datetime | None:
    """When the earliest active task's next occurrence enters the look-ahead window."""
    first = (
        Task.objects.filter(status=Task.Status.ACTIVE, next_unplanned_at__isnull=False)
        .order_by("next_unplanned_at")
        .values_list("next_unplanned_at", flat=True)
        .first()
    )
    if first is None:
        return None
    return first - timedelta(seconds=settings.TASKS_LOOKAHEAD_SECONDS)


def next_runs(task: Task, *, now: datetime, count: int = 5) -> list[datetime]:
    """The task's next `count` fire times, as its `next_runs` shows them.

    Occurrences already planned but not started, due at `now` or later, come first: the
    look-ahead plans them before they are due, and `next_unplanned_at` is only the first occurrence
    not planned yet. Then the schedule's fire times from `next_unplanned_at`, by the same
    `fire_times` the scheduler plans with, within what max_runs leaves. A skipped occurrence is
    not listed: it will not run.
    """
    if task.status != Task.Status.ACTIVE:
        return []
    prefetched = task.pending_times  # loaded for a whole list page with one query
    if prefetched is None:
        prefetched = pending_times([task.pk], now=now, count=count)[task.pk]
    upcoming: tuple[datetime, ...] = ()
    if task.next_unplanned_at is not None:
        upcoming = upcoming_times(task.schedule, task.next_unplanned_at, task.runs_planned, count)
    return merge_next_runs(prefetched, upcoming, now=now, count=count)


def feed_times(
    tasks: list[Task], *, now: datetime, until: datetime, count: int
) -> dict[UUID, list[datetime]]:
    """Each task's fire times from `now` to `until`, at most `count`, as `next_runs` lists them:
    the occurrences planned but not started, then the schedule's fire times that will run (its
    calendars' exclusions applied). A task that is not active has none. Two queries for any
    number of tasks (a user's calendar feed): the planned runs, and the calendars if any."""
    active = [task for task in tasks if task.status == Task.Status.ACTIVE]
    planned = pending_times([task.pk for task in active], now=now, count=count)
    calendars = load_calendars([task.schedule for task in active])
    found: dict[UUID, list[datetime]] = {task.pk: [] for task in tasks}
    for task in active:
        upcoming: tuple[datetime, ...] = ()
        if task.next_unplanned_at is not None and task.next_unplanned_at <= until:
            upcoming = upcoming_times(
                task.schedule, task.next_unplanned_at, task.runs_planned, count, calendars
            )
        merged = merge_next_runs(planned[task.pk], upcoming, now=now, count=count)
        found[task.pk] = [at for at in merged if at <= until]
    return found


def upcoming_times(
    schedule: dict,
    next_unplanned_at: datetime,
    runs_planned: int,
    count: int,
    calendars: dict[str, CalendarData] | None = None,
) -> tuple[datetime, ...]:
    """The schedule's first `count` fire times from `next_unplanned_at` (the first occurrence not
    planned yet) that will run, by the same `fire_times` the scheduler plans with, within what
    max_runs leaves. They depend on nothing else (not even the clock) but the calendars the
    schedule names. An excluded occurrence is left out but counts against max_runs."""
    max_runs = schedule.get("max_runs")
    left = None if max_runs is None else max(0, max_runs - runs_planned)
    after = next_unplanned_at - timedelta(microseconds=1)
    excluded = exclusions_of(schedule, calendars)
    found: list[datetime] = []
    # Excluded occurrences are skipped over, a bounded number of them (a long freeze window).
    for seen, at in enumerate(
        schedules.fire_times(schedule, after=after, days_off=days_off(excluded))
    ):
        if len(found) >= count or (left is not None and seen >= left) or seen >= 10 * count + 1000:
            break
        if not excluded or excluded.reason(at) is None:
            found.append(at)
    return tuple(found)


def merge_next_runs(
    pending: list[datetime], upcoming: tuple[datetime, ...], *, now: datetime, count: int
) -> list[datetime]:
    """`next_runs`: the occurrences planned but not started, due at `now` or later, and then
    the upcoming fire times; the first `count`."""
    return sorted({*(at for at in pending if at >= now), *upcoming})[:count]


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


def preview(
    schedule: dict, *, now: datetime, count: int, calendars: dict[str, CalendarData] | None = None
) -> tuple[list[datetime], list[tuple[datetime, str]]]:
    """The next `count` fire times that will run, and the excluded ones among them (time,
    reason), computed by the same code the scheduler plans with."""
    excluded = exclusions_of(schedule, calendars)
    if not excluded:
        times = schedules.preview(schedule, now=now, count=count, days_off=days_off(excluded))
        return list(islice(times, count)), []
    runs: list[datetime] = []
    skipped: list[tuple[datetime, str]] = []
    after = now
    # Excluded occurrences are listed beside the ones that run, up to `count` of each.
    for at in schedules.fire_times(schedule, after=after, days_off=days_off(excluded)):
        reason = excluded.reason(at)
        if reason is None:
            runs.append(at)
        elif len(skipped) < count:
            skipped.append((at, reason))
        if len(runs) >= count or len(runs) + len(skipped) >= 10 * count + 100:
            break
    return runs, skipped
