"""Migration 0029: tasks stored before the every-second opt-in covered intervals and rrules get
the flag when they fire every second, and only then."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection

from tasks import schedules
from tasks.models import Task
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db
migration = importlib.import_module("tasks.migrations.0029_every_second_opt_in_for_every_type")


@pytest.mark.parametrize(
    ("schedule", "flagged"),
    [
        ({"type": "interval", "every": 1}, True),
        ({"type": "interval", "every": 2}, False),
        ({"type": "rrule", "rule": "FREQ=SECONDLY"}, True),
        ({"type": "rrule", "rule": "FREQ=SECONDLY;INTERVAL=1;BYHOUR=9"}, True),
        ({"type": "rrule", "rule": "FREQ=SECONDLY;INTERVAL=10"}, False),
        ({"type": "rrule", "rule": "FREQ=SECONDLY;BYSECOND=0,30"}, False),
        ({"type": "rrule", "rule": "FREQ=MINUTELY"}, False),
        ({"type": "cron", "expression": "*/5 * * * * *"}, False),
    ],
)
def test_tasks_firing_every_second_get_the_flag(schedule: dict, flagged: bool) -> None:
    task = TaskFactory(schedule=schedule, schedule_type=schedule["type"])
    with connection.cursor() as cursor:
        cursor.execute(migration.KEEP_EVERY_SECOND)
    stored = Task.objects.get(pk=task.pk).schedule
    assert ("allow_every_second" in stored) is flagged
    # What the migration flags is what validation now asks the flag of.
    try:
        schedules.normalize(schedule, now=task.created_at)
    except schedules.ScheduleError as exc:
        assert flagged and "allow_every_second" in str(exc)
    else:
        assert not flagged
