"""Creating many tasks at once: all or none, in one transaction and a handful of statements."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from tasks import planning
from tasks.db import RUN_DUE_CHANNEL, TASK_CHANGED_CHANNEL, notify
from tasks.models import Run, Task
from tasks.services import TASK_FIELDS, first_fire_at, holding_dedup_key

MAX_BATCH = 1000


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
    result: list[Task] = []
    new_tasks: list[Task] = []
    runs: list[Run] = []
    seen: dict[str, Task] = {}
    for item in items:
        key = item.get("dedup_key") or None
        if key and (key in existing or key in seen):
            result.append(existing.get(key) or seen[key])
            continue
        task = Task(owner=owner, dedup_key=key, schedule=item["schedule"])
        task.schedule_type = item["schedule"]["type"]
        for field in TASK_FIELDS:
            if field in item:
                setattr(task, field, item[field])
        task.next_run_at = first_fire_at(task.schedule, now=now)
        runs.extend(planning.advance(task, now=now, horizon=horizon))
        if key:
            seen[key] = task
        new_tasks.append(task)
        result.append(task)
    with transaction.atomic():
        Task.objects.bulk_create(new_tasks)
        Run.objects.bulk_create(runs)
        if runs:
            notify(RUN_DUE_CHANNEL)
        notify(TASK_CHANGED_CHANNEL)
    return result
