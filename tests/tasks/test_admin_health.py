"""The admin's task list shows each task's health and filters by it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tasks import expectations
from tests.factories import TaskFactory, UserFactory


@pytest.fixture
def staff(client, db):
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


def test_the_task_list_shows_and_filters_health(staff) -> None:
    failing = TaskFactory(name="nightly-export", expect={"failure_streak": 2})
    TaskFactory(name="plain-task")
    expectations.sync([failing], now=datetime.now(UTC))
    failing.health_state.health = "failing"
    failing.health_state.save()

    page = staff.get("/admin/tasks/task/").content.decode()
    assert "column-health" in page
    assert "failing" in page

    filtered = staff.get("/admin/tasks/task/?health=failing").content.decode()
    assert "nightly-export" in filtered and "plain-task" not in filtered
    up = staff.get("/admin/tasks/task/?health=up").content.decode()
    assert "plain-task" in up and "nightly-export" not in up


def test_the_dashboard_counts_tasks_by_health(staff) -> None:
    tasks = [TaskFactory(expect={"failure_streak": 1}) for _ in range(3)]
    expectations.sync(tasks, now=datetime.now(UTC))
    for task, health in zip(tasks, ["failing", "failing", "overdue"], strict=True):
        task.health_state.health = health
        task.health_state.save()

    page = staff.get("/admin/dashboard/").content.decode()

    assert 'health=failing">2</a>' in page
    assert 'health=overdue">1</a>' in page
    assert 'health=late">0</a>' in page
