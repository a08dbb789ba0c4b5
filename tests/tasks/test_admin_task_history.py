"""The admin's task pages: a task's own latest runs whatever other tasks do, its next fire time
and its last run."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from tests.factories import RunFactory, TaskFactory, UserFactory

BASE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def staff(client, db):
    client.force_login(UserFactory(username="operator", is_staff=True, is_superuser=True))
    return client


def finished(task, at: datetime, status: str = "succeeded"):
    end = at + timedelta(seconds=1)
    return RunFactory(
        task=task, scheduled_at=at, status=status, attempt=1, started_at=at, finished_at=end
    )


def shown_run_ids(html: str) -> set[str]:
    """The runs the page links to (its strip's squares and its runs table)."""
    return set(re.findall(r"/admin/tasks/run/([0-9a-f-]{36})/change/", html))


def test_a_task_page_shows_its_own_thirty_latest_runs_beside_a_busy_task(staff) -> None:
    quiet = TaskFactory(name="quiet")
    own = [finished(quiet, BASE + timedelta(minutes=i)) for i in range(35)]
    busy = TaskFactory(name="busy")  # created after, with newer runs than all of the quiet one's
    for i in range(30):
        finished(busy, BASE + timedelta(hours=1, seconds=i))

    response = staff.get(reverse("admin:tasks_task_change", args=[quiet.pk]))

    assert response.status_code == 200
    latest = {str(run.pk) for run in own[-30:]}
    assert shown_run_ids(response.content.decode()) == latest


def test_the_task_list_shows_the_next_fire_time_and_the_last_run(staff) -> None:
    task = TaskFactory(
        name="every minute",
        schedule={"type": "interval", "every": 60, "start_at": "2026-03-01T12:00:00Z"},
        schedule_type="interval",
        next_unplanned_at=datetime(2099, 1, 1, tzinfo=UTC),  # the planner's cursor: not shown
        runs_planned=3,
    )
    finished(task, BASE, "failed")
    RunFactory(task=task, scheduled_at=datetime(2098, 6, 1, 9, 30, tzinfo=UTC))  # planned

    page = staff.get(reverse("admin:tasks_task_changelist")).content.decode()

    assert "failed</span> 2026-03-01 12:00:00 UTC" in page
    assert "2098-06-01 09:30:00" in page and "2099-01-01" not in page
