"""Backfilled runs go through a real worker: claimed in scheduled_at order, run to success,
never skipped by the claim's misfire rule however old they are."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command

from tasks import schedules
from tasks.db import db_now
from tasks.models import Attempt, Run, Task
from tasks.transitions.backfill import backfill
from tasks.transitions.plan import plan_task
from tests.factories import UserFactory
from tests.tasks.recurring_support import iso, recurring_task

pytestmark = pytest.mark.django_db(transaction=True)


def daily_task(owner, *, days_back: int) -> Task:
    """A daily task whose schedule began `days_back` days ago, misfire `skip` (a missed
    occurrence never runs), planned from now on as a new task is."""
    now = db_now()
    raw = {
        "type": "daily",
        "at": "03:00",
        "start_at": iso(now - timedelta(days=days_back)),
        "misfire": "skip",
    }
    task = recurring_task(owner, raw, now=now, payload={"name": "noop", "args": {}})
    task.next_unplanned_at = next(schedules.fire_times(task.schedule, after=now))
    task.save(update_fields=["next_unplanned_at"])
    return task


def work_until_idle(task_ids: list) -> None:
    """A real worker (`runworker --once`, claim and record in this process) until none of the
    tasks' runs waits."""
    for _ in range(30):
        waiting = Run.objects.filter(task_id__in=task_ids, status__in=["scheduled", "running"])
        if not waiting.exists():
            return
        call_command("runworker", "--concurrency", "1", "--once")
    raise AssertionError("runs still waiting after 30 worker passes")


def test_backfilled_runs_run_in_order_and_are_not_missed() -> None:
    owner = UserFactory()
    task = daily_task(owner, days_back=30)
    # The control: the same days planned on time by the scheduler, then never started. The
    # claim finds them past their grace and, by the misfire policy, skips every one.
    control = daily_task(owner, days_back=30)
    now = db_now()
    start = now - timedelta(days=10)
    control.next_unplanned_at = next(schedules.fire_times(control.schedule, after=start))
    plan_task(control, now=start, horizon=now)
    assert Run.objects.filter(task=control).count() == 10

    result = backfill(task=task, start=start, end=now, now=now)
    assert (result.created, result.existing) == (10, 0)

    work_until_idle([task.pk, control.pk])

    runs = list(Run.objects.filter(task=task).order_by("scheduled_at"))
    assert [r.status for r in runs] == ["succeeded"] * 10
    assert all(r.backfill and r.attempt == 1 for r in runs)
    started = [r.started_at for r in runs]
    assert started == sorted(started)  # claimed and started in scheduled_at order
    assert Attempt.objects.filter(run__task=task, outcome="succeeded").count() == 10
    control_runs = Run.objects.filter(task=control)
    assert set(control_runs.values_list("status", flat=True)) == {"skipped"}
    assert all("misfire" in error for error in control_runs.values_list("error", flat=True))

    again = backfill(task=task, start=start, end=now, now=db_now())
    assert (again.created, again.existing) == (0, 10)
    assert Run.objects.filter(task=task).count() == 10
