"""Creating tasks: one (the API's POST, the seed routes) or many at once (the batch route, all or
none in one transaction and a handful of statements)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from tasks import audit, expectations, instances, occurrences, schedules, task_fields
from tasks.db import RUN_DUE_CHANNEL, TASK_CHANGED_CHANNEL, notify
from tasks.exclusions import CalendarData
from tasks.models import Run, Task, requested
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
    for name, value in field_values(data).items():
        setattr(task, name, value)
    if "team" in data:
        task.team = data["team"]  # the team itself kept, as Model(team=...) keeps it
    task.set_requests()


def field_values(data: dict) -> dict[str, Any]:
    """The attributes `apply_fields` sets from validated `data` (the team as its id), but the
    requests, which follow the task's `resources` (Task.set_requests, models.requested)."""
    values = {field: data[field] for field in TASK_FIELDS if field in data}
    if "team" in values:
        team = values.pop("team")
        values["team_id"] = None if team is None else team.pk
    if data.get("executable") is not None:
        values["executable"] = data["executable"]
    for kind in limits.KINDS:
        if kind.field in data:
            values[kind.field] = data[kind.field]
    return values


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
    if scheduler_needed([task.next_unplanned_at], now=now):
        notify(TASK_CHANGED_CHANNEL)


def scheduler_needed(next_unplanned: Iterable[datetime | None], *, now: datetime) -> bool:
    """Whether a scheduler must wake now for tasks just planned inline (their
    `next_unplanned_at`): one of them has an occurrence left to plan before the schedulers' next
    regular pass.

    A scheduler sleeps until the earliest unplanned occurrence is half a look-ahead away, and never
    longer than a heartbeat (runscheduler's `sleep_seconds`), so an occurrence to plan after the
    next heartbeat is found without a wake-up; a one-time task planned here has none left at all.
    A NOTIFY for every create woke every idle scheduler for a pass with nothing to do.
    """
    soonest = now + timedelta(
        seconds=settings.TASKS_HEARTBEAT_SECONDS + settings.TASKS_LOOKAHEAD_SECONDS / 2
    )
    return any(at is not None and at <= soonest for at in next_unplanned)


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
    """Create every task in `items` (validated API bodies) and plan what is already due
    (`create_task_rows`); returns the tasks, in the order of `items`, as instances: the new ones
    built from the rows inserted, marked saved."""
    created = create_task_rows(owner=owner, items=items, now=now)
    built: dict[UUID, Task] = {}
    for row, item in zip(created.rows, created.items, strict=True):
        related = {"owner": owner}
        if item.get("team") is not None:
            related["team"] = item["team"]
        built[row["id"]] = instances.build(Task, row, related=related)
    inserts.mark_saved(list(built.values()))
    return [built.get(task_id) or created.existing[task_id] for task_id in created.ids]


@dataclass(frozen=True)
class Created:
    """What `create_task_rows` did."""

    ids: list[UUID]  # per item, in order: its new task's id, or the task its dedup_key names
    rows: list[dict[str, Any]]  # the new tasks' fields by attribute name, as inserted
    items: list[dict]  # the item of each row
    existing: dict[UUID, Task]  # the owner's tasks that items named by dedup_key


def create_task_rows(*, owner: Any, items: list[dict], now: datetime) -> Created:
    """Create every task in `items` (validated API bodies) and plan what is already due.

    One transaction: either all tasks and their due runs exist afterwards, or none do. Tasks and
    runs are inserted with one multi-row INSERT each, so 1,000 tasks cost a few round trips; they
    are rows of values (`instances.values`), never model instances, which cost the batch route
    as much CPU as the rest of the create (an instance would hold the same values: `create_tasks`
    builds them from these rows). A `dedup_key` the owner already used answers with the existing
    task, as a single create does.
    """
    keys = [item["dedup_key"] for item in items if item.get("dedup_key")]
    existing = {
        task.dedup_key: task for task in holding_dedup_key(owner).filter(dedup_key__in=keys)
    }
    horizon = now + timedelta(seconds=settings.TASKS_LOOKAHEAD_SECONDS)
    calendars = occurrences.load_calendars([item["schedule"] for item in items])
    ids: list[UUID] = []
    rows: list[dict[str, Any]] = []
    new_items: list[dict] = []
    runs: list[dict[str, Any]] = []
    seen: dict[str, dict[str, Any]] = {}
    keys_known: dict = {}
    for item in items:
        key = item.get("dedup_key") or None
        if key and (key in existing or key in seen):
            ids.append(existing[key].pk if key in existing else seen[key]["id"])
            continue
        schedule = item["schedule"]
        row = instances.values(
            Task,
            {
                "owner_id": owner.pk,
                "dedup_key": key,
                "schedule": schedule,
                "schedule_type": schedule["type"],
                **field_values(item),
            },
        )
        row["cpu_millis"], row["memory_bytes"] = requested(row["resources"])
        row["next_unplanned_at"] = first_fire_at(schedule, now=now, calendars=calendars)
        if key:
            seen[key] = row
        ids.append(row["id"])
        rows.append(row)
        new_items.append(item)
    with transaction.atomic():
        # The keys first: each run carries its task's (REQUEST_FIELDS).
        for row, item in zip(rows, new_items, strict=True):
            row.update(limits.task_keys(owner, row["team_id"], item, keys_known))
            planned = occurrences.advance_values(row, now=now, horizon=horizon, calendars=calendars)
            if planned is not None:
                due, row["runs_planned"], row["next_unplanned_at"] = planned
                runs.extend(instances.values(Run, run) for run in due)
        inserts.insert_values(Task, rows)
        audit.record_all(_created_entry(row) for row in rows)
        inserts.insert_values(Run, runs)
        # Only tasks that expect anything have a health row to make (none to remove: new). After
        # the runs, as a single create: the `late` cursor starts before the first run (a
        # one-time task created past due is judged late as one created alone).
        expecting = [instances.build(Task, row) for row in rows if row["expect"]]
        expectations.sync(expecting, now=now, created=True)
        if runs:
            notify(RUN_DUE_CHANNEL)
        if scheduler_needed((row["next_unplanned_at"] for row in rows), now=now):
            notify(TASK_CHANGED_CHANNEL)
    return Created(
        ids=ids, rows=rows, items=new_items, existing={t.pk: t for t in existing.values()}
    )


def _created_entry(row: dict[str, Any]) -> audit.Entry:
    """`audit.entry("create", "task", task)` of the task `row` holds: its name, else its id
    (Task.__str__), its owner and its team."""
    task_id = str(row["id"])
    return audit.Entry(
        action="create",
        object_type="task",
        object_id=task_id,
        object_name=(row["name"] or task_id)[:500],
        owner_id=row["owner_id"],
        team_id=row["team_id"],
    )
