"""Creating tasks: one (the API's POST, the seed routes) or many at once (the batch route, all or
none in one transaction and a handful of statements)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from tasks import audit, expectations, instances, occurrences, schedules, task_fields
from tasks.db import RUN_DUE_CHANNEL, TASK_CHANGED_CHANNEL, notify
from tasks.exclusions import CalendarData
from tasks.models import Run, Task
from tasks.transitions import inserts, limits
from tasks.transitions.plan import plan_task

MAX_BATCH = 1000

# Fields of Task a create or update may set directly (after validation by the API).
TASK_FIELDS = task_fields.COLUMNS


def apply_fields(task: Task, data: dict) -> None:
    """Set on `task` (unsaved) the validated fields `data` names, the executable when given, and
    the requests as numbers: what creating a task and changing one both set. Writes nothing:
    the keys its `concurrency` and `rate_limit` name are resolved by create and update, in the
    transaction that saves the task (limits.resolve_task_keys)."""
    for field in TASK_FIELDS:
        if field in data:
            setattr(task, field, data[field])
    if data.get("executable") is not None:
        task.executable = data["executable"]
    for kind in limits.KINDS:
        if kind.field in data:
            setattr(task, kind.field, data[kind.field])
    task.set_requests()


def first_fire_at(
    schedule: dict, *, now: datetime, calendars: dict[str, CalendarData] | None = None
) -> datetime | None:
    """The first occurrence to plan: a one-time task's run_at even if past; otherwise >= now.
    Business days follow the schedule's calendars (loaded here unless given)."""
    after = None if schedule["type"] == "once" else now - timedelta(microseconds=1)
    if calendars is None:
        calendars = occurrences.load_calendars([schedule])
    off = occurrences.days_off(occurrences.exclusions_of(schedule, calendars))
    return next(iter(schedules.fire_times(schedule, after=after, days_off=off)), None)


def plan_now(task: Task, *, now: datetime) -> None:
    """Plan inline what is already inside the look-ahead, so a due task needs no scheduler pass."""
    horizon = now + timedelta(seconds=settings.TASKS_LOOKAHEAD_SECONDS)
    plan_task(task, now=now, horizon=horizon)
    if scheduler_needed([task], now=now):
        notify(TASK_CHANGED_CHANNEL)


def scheduler_needed(tasks: list[Task], *, now: datetime) -> bool:
    """Whether a scheduler must wake now for these tasks, just planned inline: one of them has an
    occurrence left to plan before the schedulers' next regular pass.

    A scheduler sleeps until the earliest unplanned occurrence is half a look-ahead away, and never
    longer than a heartbeat (runscheduler's `sleep_seconds`), so an occurrence to plan after the
    next heartbeat is found without a wake-up; a one-time task planned here has none left at all.
    A NOTIFY for every create woke every idle scheduler for a pass with nothing to do.
    """
    soonest = now + timedelta(
        seconds=settings.TASKS_HEARTBEAT_SECONDS + settings.TASKS_LOOKAHEAD_SECONDS / 2
    )
    return any(
        task.next_unplanned_at is not None and task.next_unplanned_at <= soonest for task in tasks
    )


def holding_dedup_key(owner: Any) -> QuerySet[Task]:
    """The owner's tasks that hold their dedup_key: all but cancelled ones (the unique index's
    condition), so a key is free again once its task is deleted."""
    return Task.objects.filter(owner=owner).exclude(status=Task.Status.CANCELLED)


def create_task(*, owner: Any, data: dict, now: datetime) -> tuple[Task, bool]:
    """Create a task (and its due runs) in one transaction; returns (task, created).

    A repeated `dedup_key` of the same owner returns the existing task, also when two creates
    race: the partial unique index decides and the loser reads the winner's row.
    """
    dedup_key = data.get("dedup_key")
    if dedup_key:
        existing = holding_dedup_key(owner).filter(dedup_key=dedup_key).first()
        if existing:
            return existing, False
    schedule = data["schedule"]
    task = Task(owner=owner, dedup_key=dedup_key or None, schedule=schedule)
    task.schedule_type = schedule["type"]
    apply_fields(task, data)
    task.next_unplanned_at = first_fire_at(schedule, now=now)
    try:
        with transaction.atomic():
            limits.resolve_task_keys(task, data)
            task.save()
            expectations.sync([task], now=now, created=True)
            plan_now(task, now=now)
            audit.record(audit.entry("create", "task", task))
    except IntegrityError:
        if dedup_key:
            existing = holding_dedup_key(owner).filter(dedup_key=dedup_key).first()
            if existing:
                return existing, False
        raise
    return task, True


def create_tasks(*, owner: Any, items: list[dict], now: datetime) -> list[Task]:
    """Create every task in `items` (validated API bodies) and plan what is already due.

    One transaction: either all tasks and their due runs exist afterwards, or none do. Tasks and
    runs are inserted with one multi-row INSERT each, so 1,000 tasks cost a few round trips.
    A `dedup_key` the owner already used answers with the existing task, as a single create does.
    """
    keys = [item["dedup_key"] for item in items if item.get("dedup_key")]
    existing = {
        task.dedup_key: task for task in holding_dedup_key(owner).filter(dedup_key__in=keys)
    }
    horizon = now + timedelta(seconds=settings.TASKS_LOOKAHEAD_SECONDS)
    calendars = occurrences.load_calendars([item["schedule"] for item in items])
    result: list[Task] = []
    new_tasks: list[Task] = []
    new_items: list[dict] = []
    runs: list[Run] = []
    seen: dict[str, Task] = {}
    keys_known: dict = {}
    for item in items:
        key = item.get("dedup_key") or None
        if key and (key in existing or key in seen):
            result.append(existing.get(key) or seen[key])
            continue
        task = instances.build(
            Task,
            {
                "owner_id": owner.pk,
                "dedup_key": key,
                "schedule": item["schedule"],
                "schedule_type": item["schedule"]["type"],
            },
            related={"owner": owner},
        )
        apply_fields(task, item)
        task.next_unplanned_at = first_fire_at(task.schedule, now=now, calendars=calendars)
        if key:
            seen[key] = task
        new_tasks.append(task)
        new_items.append(item)
        result.append(task)
    with transaction.atomic():
        # The keys first: each run carries its task's (Task.requests).
        for task, item in zip(new_tasks, new_items, strict=True):
            limits.resolve_task_keys(task, item, keys_known)
            runs.extend(occurrences.advance(task, now=now, horizon=horizon, calendars=calendars))
        inserts.insert(new_tasks)
        expectations.sync(new_tasks, now=now, created=True)
        audit.record_all(audit.entry("create", "task", task) for task in new_tasks)
        inserts.insert(runs)
        if runs:
            notify(RUN_DUE_CHANNEL)
        if scheduler_needed(new_tasks, now=now):
            notify(TASK_CHANGED_CHANNEL)
    return result
