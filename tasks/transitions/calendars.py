"""Creating, changing and deleting calendars. A change re-plans, in the same transaction, the
runs not started yet of every task whose schedule names the calendar in `exclude`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from tasks import audit
from tasks.exceptions import Conflict
from tasks.models import Calendar, Task
from tasks.transitions.lifecycle import replan_exclusions

FIELDS = ("name", "timezone", "holidays", "dates", "windows", "team")


def tasks_using(calendar: Calendar) -> QuerySet[Task]:
    """The owner's tasks, not cancelled, whose schedule names the calendar."""
    return Task.objects.filter(
        owner_id=calendar.owner_id, schedule__exclude__contains=[str(calendar.pk)]
    ).exclude(status=Task.Status.CANCELLED)


def create_calendar(*, owner: Any, data: dict) -> Calendar:
    calendar = Calendar(owner=owner)
    for field in FIELDS:
        if field in data:
            setattr(calendar, field, data[field])
    with transaction.atomic():
        calendar.save()
        audit.record(audit.entry("create", "calendar", calendar))
    return calendar


def _fields(calendar: Calendar) -> dict[str, Any]:
    return {field: getattr(calendar, field) for field in FIELDS}


def update_calendar(*, calendar: Calendar, data: dict, now: datetime) -> Calendar:
    """Apply the change and re-plan the tasks using the calendar, atomically: no task is
    planned with half of it, and the (task, scheduled_at) key keeps every occurrence single."""
    with transaction.atomic():
        calendar = Calendar.objects.select_for_update().get(pk=calendar.pk)
        was = _fields(calendar)
        for field in FIELDS:
            if field in data:
                setattr(calendar, field, data[field])
        calendar.save()
        audit.record(
            audit.entry("update", "calendar", calendar, audit.diff(was, _fields(calendar)))
        )
        # Locked in id order, like every multi-task change, so two changes cannot deadlock.
        for task in tasks_using(calendar).select_for_update().order_by("pk"):
            replan_exclusions(task=task, now=now)
    return calendar


def delete_calendar(*, calendar: Calendar) -> None:
    """Refused (409, naming them) while tasks use it: their schedules would silently change."""
    with transaction.atomic():
        calendar = Calendar.objects.select_for_update().get(pk=calendar.pk)
        using = list(tasks_using(calendar).order_by("pk").values_list("pk", "name")[:20])
        if using:
            named = ", ".join(f"{pk} ({name})" if name else str(pk) for pk, name in using)
            raise Conflict(f"the calendar is used by tasks: {named}")
        audit.record(audit.entry("delete", "calendar", calendar))
        calendar.delete()
