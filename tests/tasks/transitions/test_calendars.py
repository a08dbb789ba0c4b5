"""Calendars in planning: an excluded occurrence is recorded skipped with its reason (holiday,
date, freeze window); changing a calendar re-plans the tasks using it, each occurrence once;
deleting one in use is refused, naming the tasks."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import holidays
import pytest
from django.contrib.auth.models import AbstractBaseUser

from tasks import schedules
from tasks.exceptions import Conflict
from tasks.models import Calendar, Run, Task
from tasks.transitions import calendars, creation, plan
from tests.factories import UserFactory

# 09:00 in Berlin in winter is 08:00 UTC.
T0 = datetime(2030, 12, 20, 12, 0, tzinfo=UTC)
BAVARIA = holidays.country_holidays("DE", subdiv="BY", years=2030)


@pytest.fixture
def owner(db) -> AbstractBaseUser:
    return UserFactory()


def daily(owner: AbstractBaseUser, **schedule: object) -> Task:
    raw = {"type": "daily", "at": "09:00", "timezone": "Europe/Berlin", **schedule}
    data = {
        "name": "report",
        "kind": "handler",
        "payload": {"name": "noop", "args": {}},
        "schedule": schedules.normalize(raw, now=T0),
    }
    return creation.create_task(owner=owner, data=data, now=T0)[0]


def plan_day(day: int) -> None:
    """A scheduler pass just before 09:00 Berlin on that December day of 2030."""
    plan.plan_due_tasks(now=datetime(2030, 12, day, 7, 59, 50, tzinfo=UTC))


def history(task: Task) -> dict[date, tuple[str, str]]:
    runs = Run.objects.filter(task=task).order_by("scheduled_at")
    return {r.scheduled_at.date(): (r.status, r.error) for r in runs}


def test_a_holiday_and_a_date_are_recorded_skipped_with_their_reason(owner) -> None:
    ops = Calendar.objects.create(
        owner=owner,
        name="ops",
        timezone="Europe/Berlin",
        holidays={"country": "DE", "subdivision": "BY"},
        dates=["2030-12-24"],
    )
    task = daily(owner, exclude=[str(ops.pk)])
    for day in (21, 22, 23, 24, 25, 26, 27):
        plan_day(day)

    runs = history(task)
    assert BAVARIA.get(date(2030, 12, 25)) == "Christmas Day"
    assert runs[date(2030, 12, 24)] == ("skipped", "excluded: 2030-12-24 (calendar ops)")
    assert runs[date(2030, 12, 25)] == ("skipped", "excluded: holiday Christmas Day (DE-BY)")
    second = BAVARIA.get(date(2030, 12, 26))
    assert runs[date(2030, 12, 26)] == ("skipped", f"excluded: holiday {second} (DE-BY)")
    assert runs[date(2030, 12, 23)] == ("scheduled", "")
    assert runs[date(2030, 12, 27)] == ("scheduled", "")
    assert sorted(runs) == [date(2030, 12, d) for d in range(21, 28)]  # history complete
    # Counted and alerted as skips of their own kind, not as misfires.
    kinds = set(Run.objects.filter(task=task, status="skipped").values_list("skip_kind", flat=True))
    assert kinds == {"exclusion"}


def test_dropping_a_date_replans_it_once_and_adding_one_skips_it(owner) -> None:
    ops = Calendar.objects.create(owner=owner, name="ops", dates=["2030-12-21"])
    task = daily(owner, exclude=[str(ops.pk)])
    plan_day(21)
    assert history(task)[date(2030, 12, 21)][0] == "skipped"

    # Before the day: the skipped occurrence is planned again and runs, and only once.
    now = datetime(2030, 12, 21, 7, 59, 40, tzinfo=UTC)
    calendars.update_calendar(calendar=ops, data={"dates": ["2030-12-22"]}, now=now)
    plan_day(21)
    plan_day(22)
    runs = Run.objects.filter(task=task).order_by("scheduled_at")
    assert [(r.scheduled_at.day, r.status) for r in runs] == [(21, "scheduled"), (22, "skipped")]
    assert Task.objects.get(pk=task.pk).runs_planned == 2


def test_a_freeze_window_of_the_task_and_of_a_calendar(owner) -> None:
    window = {"start": "2030-12-22T00:00:00", "end": "2030-12-23T00:00:00"}
    freeze = Calendar.objects.create(
        owner=owner,
        name="freeze",
        windows=[{"start": "2030-12-24T00:00:00Z", "end": "2030-12-25T00:00:00Z"}],
    )
    task = daily(owner, exclude_windows=[window], exclude=[str(freeze.pk)])
    for day in (21, 22, 23, 24, 25):
        plan_day(day)
    runs = history(task)
    assert runs[date(2030, 12, 22)] == (
        "skipped",
        "excluded: freeze window 2030-12-21T23:00:00Z..2030-12-22T23:00:00Z",
    )
    assert runs[date(2030, 12, 24)] == (
        "skipped",
        "excluded: freeze window 2030-12-24T00:00:00Z..2030-12-25T00:00:00Z (calendar freeze)",
    )
    assert [runs[date(2030, 12, d)][0] for d in (21, 23, 25)] == ["scheduled"] * 3


def test_business_days_follow_the_calendar(owner) -> None:
    bavaria = Calendar.objects.create(
        owner=owner, name="by", holidays={"country": "DE", "subdivision": "BY"}
    )
    task = daily(owner, business_days_only=True, exclude=[str(bavaria.pk)])
    for day in range(21, 28):
        plan_day(day)
    # 21/22 are a weekend, 25/26 holidays: they are no business days, so no occurrence at all.
    assert sorted(history(task)) == [date(2030, 12, d) for d in (23, 24, 27)]
    assert all(status == "scheduled" for status, _ in history(task).values())


def test_deleting_a_calendar_in_use_is_refused_naming_the_task(owner) -> None:
    ops = Calendar.objects.create(owner=owner, name="ops")
    task = daily(owner, exclude=[str(ops.pk)])
    with pytest.raises(Conflict) as caught:
        calendars.delete_calendar(calendar=ops)
    assert str(task.pk) in caught.value.detail and "report" in caught.value.detail
    Task.objects.filter(pk=task.pk).update(status=Task.Status.CANCELLED)
    calendars.delete_calendar(calendar=ops)
    assert not Calendar.objects.filter(pk=ops.pk).exists()


def test_a_task_without_calendars_plans_without_reading_them(owner, django_assert_num_queries):
    task = daily(owner)
    Task.objects.filter(pk=task.pk).update(next_unplanned_at=T0 + timedelta(days=1))
    # Lock the due tasks, insert runs, advance, NOTIFY (and the savepoint pair): no calendars.
    with django_assert_num_queries(4) as captured:
        plan.plan_due_tasks(now=T0 + timedelta(days=1) - timedelta(seconds=10))
    assert not any("tasks_calendar" in q["sql"] for q in captured.captured_queries)
