"""Expectations judged in the worker's outcome statement: failing once, recovered once,
reminders, too_fast, and nothing for tasks that expect nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from notifications.models import Notification
from tasks import expectations
from tasks.models import RunCounter, Task, TaskHealth
from tests.notifications.conftest import ChannelFactory, due_run, finish, subscribed_task

pytestmark = pytest.mark.django_db

ALERTS = ["failing", "recovered", "too_fast", "late", "overdue", "too_slow"]


def expecting(user, expect: dict, **fields) -> Task:
    channel = ChannelFactory(owner=user)
    task = subscribed_task(channel, ALERTS, expect=expect, schedule_type="interval", **fields)
    expectations.sync([task], now=datetime.now(UTC))
    return task


def alerts_of(task: Task) -> list[str]:
    return list(
        Notification.objects.filter(task=task)
        .order_by("created_at")
        .values_list("event", flat=True)
    )


def run_and_finish(task: Task, status: str, minutes_ago: int) -> None:
    at = datetime.now(UTC) - timedelta(minutes=minutes_ago)
    finish(due_run(task, scheduled_at=at, max_attempts=1), status)


def test_a_failure_streak_alerts_once_then_recovers_once(user) -> None:
    task = expecting(user, {"failure_streak": 3}, max_attempts=1)

    for minutes_ago in (9, 8):
        run_and_finish(task, "failed", minutes_ago)
    assert alerts_of(task) == []
    assert TaskHealth.objects.get(task=task).health == "up"

    run_and_finish(task, "failed", 7)
    assert alerts_of(task) == ["failing"]
    assert TaskHealth.objects.get(task=task).health == "failing"

    run_and_finish(task, "failed", 6)  # still down: nothing new
    assert alerts_of(task) == ["failing"]

    run_and_finish(task, "succeeded", 5)
    assert alerts_of(task) == ["failing", "recovered"]
    row = TaskHealth.objects.get(task=task)
    assert (row.health, row.failures) == ("up", 0)

    run_and_finish(task, "succeeded", 4)
    assert alerts_of(task) == ["failing", "recovered"]
    counted = dict(RunCounter.objects.filter(metric="alert").values_list("outcome", "value"))
    assert counted == {"failing": 1, "recovered": 1}


def test_a_success_resets_the_streak(user) -> None:
    task = expecting(user, {"failure_streak": 2}, max_attempts=1)

    run_and_finish(task, "failed", 9)
    run_and_finish(task, "succeeded", 8)
    run_and_finish(task, "failed", 7)

    assert alerts_of(task) == []
    assert TaskHealth.objects.get(task=task).failures == 1


def test_repeat_every_reminds_while_down(user) -> None:
    task = expecting(user, {"failure_streak": 1, "repeat_every": 60}, max_attempts=1)
    run_and_finish(task, "failed", 9)
    run_and_finish(task, "failed", 8)  # within repeat_every: nothing
    assert alerts_of(task) == ["failing"]

    TaskHealth.objects.filter(task=task).update(
        alerted_at=datetime.now(UTC) - timedelta(seconds=61)
    )
    run_and_finish(task, "failed", 7)

    assert alerts_of(task) == ["failing", "failing"]


def test_a_success_faster_than_duration_min_is_too_fast(user) -> None:
    task = expecting(user, {"duration": {"min": 5}})
    slow = expecting(user, {"duration": {"min": 0.001}})

    run_and_finish(task, "succeeded", 9)
    finish(due_run(slow), "succeeded")

    assert alerts_of(task) == ["too_fast"]
    assert alerts_of(slow) == []
    assert TaskHealth.objects.get(task=task).health == "up"


def test_a_task_without_expectations_is_not_judged(user) -> None:
    channel = ChannelFactory(owner=user)
    task = subscribed_task(channel, ALERTS, max_attempts=1)

    run_and_finish(task, "failed", 9)
    run_and_finish(task, "succeeded", 8)

    assert alerts_of(task) == []
    assert not TaskHealth.objects.exists()
    assert not RunCounter.objects.filter(metric="alert").exists()
