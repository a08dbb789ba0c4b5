"""POST /api/v1/tasks/{id}/backfill: the runs of past occurrences, once each, and its 400s."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from rest_framework.test import APIClient

from tasks.db import db_now
from tasks.models import Run, RunCounter, Task
from tests.tasks.recurring_support import iso

pytestmark = pytest.mark.django_db


def daily(create: Callable, *, days_back: int = 30, **schedule: object) -> dict:
    """A daily task whose schedule began `days_back` days ago: planned from now on, as every
    new task is, so the days before now have no runs."""
    began = db_now() - timedelta(days=days_back)
    body = {"type": "daily", "at": "03:00", "start_at": iso(began), **schedule}
    return create(schedule=body)


def backfill(api: APIClient, task: dict, **body: object):
    return api.post(f"/api/v1/tasks/{task['id']}/backfill", body, format="json")


def last_days(days: int) -> tuple[datetime, datetime]:
    end = db_now()
    return end - timedelta(days=days), end


def backfilled(task: dict) -> list[Run]:
    return list(Run.objects.filter(task_id=task["id"], backfill=True).order_by("scheduled_at"))


def test_ten_days_of_a_daily_task_make_ten_runs_once(api: APIClient, create: Callable) -> None:
    task = daily(create)
    start, end = last_days(10)
    assert not Run.objects.filter(task_id=task["id"], scheduled_at__lt=end).exists()

    first = backfill(api, task, start=iso(start), end=iso(end))

    assert first.status_code == 201, first.content
    assert first.json() == {"created": 10, "excluded": 0, "existing": 0}
    runs = backfilled(task)
    times = [run.scheduled_at for run in runs]
    assert len(times) == 10 and all(start <= at < end for at in times)
    assert times == [times[0] + timedelta(days=i) for i in range(10)]
    assert {(r.status, r.missed_after, r.execute_at == r.scheduled_at) for r in runs} == {
        ("scheduled", None, True)
    }
    assert {r.priority for r in runs} == {task["priority"]}

    again = backfill(api, task, start=iso(start), end=iso(end))

    assert again.status_code == 200, again.content
    assert again.json() == {"created": 0, "excluded": 0, "existing": 10}
    assert [run.pk for run in backfilled(task)] == [run.pk for run in runs]


def test_the_run_json_says_backfill(api: APIClient, create: Callable) -> None:
    task = daily(create)
    start, end = last_days(2)
    backfill(api, task, start=iso(start), end=iso(end))
    run = backfilled(task)[0]
    assert api.get(f"/api/v1/runs/{run.pk}").json()["backfill"] is True
    planned = Run.objects.filter(task_id=task["id"], backfill=False).first()
    if planned is not None:
        assert api.get(f"/api/v1/runs/{planned.pk}").json()["backfill"] is False


def test_an_overlapping_range_creates_only_the_new_occurrences(
    api: APIClient, create: Callable
) -> None:
    task = daily(create)
    end = db_now()
    backfill(api, task, start=iso(end - timedelta(days=3)), end=iso(end))

    wider = backfill(api, task, start=iso(end - timedelta(days=5)), end=iso(end))

    assert wider.json() == {"created": 2, "excluded": 0, "existing": 3}
    assert len(backfilled(task)) == 5


def test_a_lower_priority_is_kept_on_the_runs(api: APIClient, create: Callable) -> None:
    task = daily(create)  # the default priority, 5
    start, end = last_days(3)
    answer = backfill(api, task, start=iso(start), end=iso(end), priority="low")
    assert answer.status_code == 201, answer.content
    assert {r.priority for r in backfilled(task)} == {1}


def test_excluded_occurrences_are_recorded_skipped_with_the_planners_reason(
    api: APIClient, create: Callable
) -> None:
    start, end = last_days(5)
    first = start.replace(hour=3, minute=0, second=0, microsecond=0)
    first += timedelta(days=1) if first < start else timedelta()
    holiday = (first + timedelta(days=1)).date()  # the second occurrence's day
    calendar = api.post(
        "/api/v1/calendars", {"name": "office", "dates": [holiday.isoformat()]}, format="json"
    )
    assert calendar.status_code == 201, calendar.content
    fourth = first + timedelta(days=3)
    window = {"start": iso(fourth - timedelta(hours=1)), "end": iso(fourth + timedelta(hours=1))}
    task = daily(create, exclude=[calendar.json()["id"]], exclude_windows=[window])

    answer = backfill(api, task, start=iso(start), end=iso(end))

    assert answer.json() == {"created": 3, "excluded": 2, "existing": 0}
    skipped = [r for r in backfilled(task) if r.status == "skipped"]
    reasons = sorted(r.error for r in skipped)
    assert reasons[0].startswith("excluded: ") and str(holiday) in " ".join(reasons)
    assert any("freeze window" in reason for reason in reasons)
    assert all(r.finished_at is not None for r in skipped)
    # Counted as the planner counts an excluded occurrence (scheduler_runs_skipped_total).
    counted = RunCounter.objects.filter(metric="skipped", outcome="exclusion")
    assert sum(counted.values_list("value", flat=True)) == 2


def error(response) -> dict:
    assert response.status_code == 400, response.content
    return response.json()


def test_end_must_be_after_start(api: APIClient, create: Callable) -> None:
    task = daily(create)
    start, end = last_days(2)
    assert "end" in error(backfill(api, task, start=iso(end), end=iso(start)))
    assert "end" in error(backfill(api, task, start=iso(start), end=iso(start)))


def test_end_in_the_future_is_the_schedulers(api: APIClient, create: Callable) -> None:
    task = daily(create)
    start, end = last_days(2)
    answer = error(backfill(api, task, start=iso(start), end=iso(end + timedelta(hours=1))))
    assert "future" in answer["end"][0]
    assert not backfilled(task)


@pytest.mark.parametrize(
    "schedule", [{"type": "interval", "every": 60}, {"type": "cron", "expression": "0 3 * * *"}]
)
def test_a_start_before_1970_is_refused_not_overflowed(
    api: APIClient, create: Callable, schedule: dict
) -> None:
    # Found by the fuzz test: year 1 overflowed counting an interval back from its anchor.
    task = create(schedule=schedule)
    answer = error(backfill(api, task, start="0001-01-01T00:00:01Z", end="0001-01-01T00:01:00Z"))
    assert answer["start"] == ["Must not be before 1970-01-01T00:00:00Z."]
    assert not backfilled(task)


def test_start_and_end_are_required_datetimes(api: APIClient, create: Callable) -> None:
    task = daily(create)
    assert set(error(backfill(api, task))) == {"start", "end"}
    assert "start" in error(backfill(api, task, start="yesterday", end=iso(db_now())))


def test_more_occurrences_than_max_runs_create_nothing(api: APIClient, create: Callable) -> None:
    task = daily(create)
    start, end = last_days(10)
    answer = error(backfill(api, task, start=iso(start), end=iso(end), max_runs=9))
    assert "more than 9" in answer["max_runs"][0]
    assert not backfilled(task)
    exact = backfill(api, task, start=iso(start), end=iso(end), max_runs=10)
    assert exact.json()["created"] == 10


def test_the_default_max_runs_is_a_thousand(api: APIClient, create: Callable) -> None:
    began = db_now() - timedelta(days=2)
    task = create(schedule={"type": "interval", "every": 60, "start_at": iso(began)})
    start = began
    answer = error(backfill(api, task, start=iso(start), end=iso(start + timedelta(minutes=1001))))
    assert "more than 1000" in answer["max_runs"][0]
    assert not backfilled(task)


@pytest.mark.parametrize("max_runs", [0, 10_001, "many"])
def test_max_runs_is_between_one_and_the_cap(api: APIClient, create: Callable, max_runs) -> None:
    task = daily(create)
    start, end = last_days(2)
    assert "max_runs" in error(
        backfill(api, task, start=iso(start), end=iso(end), max_runs=max_runs)
    )


def test_priority_above_the_tasks_is_refused(api: APIClient, create: Callable) -> None:
    task = daily(create)
    start, end = last_days(2)
    answer = error(backfill(api, task, start=iso(start), end=iso(end), priority=9))
    assert "task's priority (5)" in answer["priority"][0]
    assert "priority" in error(backfill(api, task, start=iso(start), end=iso(end), priority=12))
    assert not backfilled(task)


def test_a_one_time_task_names_the_schedule(api: APIClient, create: Callable) -> None:
    task = create(schedule={"type": "once", "delay": 3600})
    start, end = last_days(2)
    assert "schedule" in error(backfill(api, task, start=iso(start), end=iso(end)))


def test_a_start_before_the_schedule_begins_is_refused(api: APIClient, create: Callable) -> None:
    task = daily(create, days_back=3)
    start, end = last_days(5)
    assert "start_at" in error(backfill(api, task, start=iso(start), end=iso(end)))["start"][0]
    # An rrule without start_at begins when it was defined: COUNT and INTERVAL count from it.
    rule = create(schedule={"type": "rrule", "rule": "FREQ=DAILY;BYHOUR=3;BYMINUTE=0"})
    assert "anchor" in error(backfill(api, rule, start=iso(start), end=iso(end)))["start"][0]


def test_a_task_defined_today_is_backfilled_over_the_days_before_it(
    api: APIClient, create: Callable
) -> None:
    fresh = create(schedule={"type": "daily", "at": "03:00"})
    start, end = last_days(10)

    response = backfill(api, fresh, start=iso(start), end=iso(end))

    assert response.status_code == 201, response.content
    assert response.json()["created"] == 10
    times = [run.scheduled_at for run in backfilled(fresh)]
    assert {(at.hour, at.minute) for at in times} == {(3, 0)}


def test_an_interval_reaching_behind_its_anchor_keeps_its_phase(
    api: APIClient, create: Callable
) -> None:
    task = create(schedule={"type": "interval", "every": 3600})
    anchor = datetime.fromisoformat(Task.objects.get(pk=task["id"]).schedule["anchor"])
    start, end = anchor - timedelta(hours=5, minutes=30), anchor

    response = backfill(api, task, start=iso(start), end=iso(end))

    assert response.status_code == 201, response.content
    times = [run.scheduled_at for run in backfilled(task)]
    assert times == [anchor - timedelta(hours=h) for h in (5, 4, 3, 2, 1)]


def test_an_unknown_field_is_named(api: APIClient, create: Callable) -> None:
    task = daily(create)
    start, end = last_days(2)
    assert "max_run" in error(backfill(api, task, start=iso(start), end=iso(end), max_run=3))


def test_another_users_task_is_not_found(
    api: APIClient, other_api: APIClient, create: Callable
) -> None:
    task = daily(create)
    start, end = last_days(2)
    assert backfill(other_api, task, start=iso(start), end=iso(end)).status_code == 404
    assert not backfilled(task)


def test_a_cancelled_task_is_a_conflict(api: APIClient, create: Callable) -> None:
    task = daily(create)
    api.delete(f"/api/v1/tasks/{task['id']}")
    start, end = last_days(2)
    answer = backfill(api, task, start=iso(start), end=iso(end))
    assert answer.status_code == 409 and answer.json()["code"] == "conflict"
    assert not backfilled(task)


def test_a_completed_task_can_be_backfilled(api: APIClient, create: Callable) -> None:
    task = daily(create)
    Task.objects.filter(pk=task["id"]).update(status="completed", next_unplanned_at=None)
    start, end = last_days(2)
    assert backfill(api, task, start=iso(start), end=iso(end)).json()["created"] == 2


def test_a_paused_task_is_a_conflict(api: APIClient, create: Callable) -> None:
    task = daily(create)
    api.post(f"/api/v1/tasks/{task['id']}/pause")
    start, end = last_days(2)
    assert backfill(api, task, start=iso(start), end=iso(end)).status_code == 409


def test_a_pause_withdraws_unstarted_backfilled_runs_without_moving_the_cursor(
    api: APIClient, create: Callable
) -> None:
    task = daily(create)
    before = Task.objects.get(pk=task["id"])
    start, end = last_days(3)
    backfill(api, task, start=iso(start), end=iso(end))

    api.post(f"/api/v1/tasks/{task['id']}/pause")

    paused = Task.objects.get(pk=task["id"])
    assert not backfilled(task)
    assert paused.next_unplanned_at is not None and paused.next_unplanned_at >= end
    assert paused.runs_planned <= before.runs_planned


def test_skip_next_skips_the_next_occurrence_not_a_backfilled_one(
    api: APIClient, create: Callable
) -> None:
    task = daily(create)
    start, end = last_days(3)
    backfill(api, task, start=iso(start), end=iso(end))

    skipped = api.post(f"/api/v1/tasks/{task['id']}/skip-next")

    assert skipped.status_code == 200, skipped.content
    assert skipped.json()["scheduled_at"] > iso(end)
    assert {r.status for r in backfilled(task)} == {"scheduled"}


def test_a_change_of_the_tasks_priority_caps_a_backfill_but_never_raises_it(
    api: APIClient, create: Callable
) -> None:
    task = daily(create)
    start, end = last_days(3)
    backfill(api, task, start=iso(start), end=iso(end), priority=3)

    api.patch(f"/api/v1/tasks/{task['id']}", {"priority": 9}, format="json")
    assert {r.priority for r in backfilled(task)} == {3}

    api.patch(f"/api/v1/tasks/{task['id']}", {"priority": 2}, format="json")
    assert {r.priority for r in backfilled(task)} == {2}
