"""List endpoints cost a constant number of queries per request, however many rows a page shows.

Each endpoint is requested with 5 and then 50 objects (all on one page); the second request may
not make more queries than the first. An N+1 (a query per task, run or notification) fails here.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from notifications.models import Channel, Notification
from tests.factories import RunFactory, TaskFactory

pytestmark = pytest.mark.django_db

NOW = datetime.now(UTC)


def _recurring_task(owner, i: int):
    """An active interval task with a pending run ahead and a finished one behind it."""
    start = NOW + timedelta(minutes=5)
    task = TaskFactory(
        owner=owner,
        name=f"task {i}",
        schedule={"type": "interval", "every": 60, "start_at": start.isoformat()},
        schedule_type="interval",
        next_unplanned_at=start + timedelta(minutes=1),
        runs_planned=2,
    )
    done = RunFactory(
        task=task,
        scheduled_at=NOW - timedelta(minutes=1),
        status="succeeded",
        attempt=1,
        started_at=NOW - timedelta(minutes=1),
        finished_at=NOW - timedelta(seconds=59),
    )
    done.attempts.create(
        number=1,
        worker="w",
        started_at=done.started_at,
        finished_at=done.finished_at,
        outcome="succeeded",
    )
    RunFactory(task=task, scheduled_at=start)
    return task


def _runs_of_one_task(owner, count: int):
    task = TaskFactory(owner=owner)
    for i in range(count):
        run = RunFactory(
            task=task,
            scheduled_at=NOW - timedelta(minutes=i + 1),
            status="failed",
            attempt=2,
            started_at=NOW - timedelta(minutes=i + 1),
            finished_at=NOW - timedelta(minutes=i + 1) + timedelta(seconds=1),
            error="boom",
        )
        for number in (1, 2):
            run.attempts.create(
                number=number,
                worker="w",
                started_at=run.started_at,
                finished_at=run.finished_at,
                outcome="failed",
            )
    return task


def _notifications(owner, count: int) -> None:
    channel = Channel.objects.create(owner=owner, kind="webhook", config={"url": "http://x"})
    task = TaskFactory(owner=owner)
    for i in range(count):
        run = RunFactory(task=task, scheduled_at=NOW - timedelta(minutes=i + 1))
        Notification.objects.create(
            channel=channel,
            run=run,
            task=task,
            attempt=1,
            event="succeeded",
            retry_until=NOW + timedelta(hours=1),
        )


def _queries(api, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = api.get(url)
    assert response.status_code == 200, response.content
    return len(captured.captured_queries)


def _assert_constant(api, url_for, make) -> None:
    counts = []
    for size in (5, 50):
        url = url_for(make(size))
        counts.append(_queries(api, url))
    assert counts[1] <= counts[0], f"{counts[0]} queries for 5 objects, {counts[1]} for 50"


def test_task_list_is_constant(api, user, other_user):
    def make(size: int) -> None:
        for i in range(size):
            _recurring_task(user, i)
        _recurring_task(other_user, 0)  # not listed: the list is the caller's own

    url = "/api/v1/tasks?page_size=100"
    _assert_constant(api, lambda _: url, lambda n: [_delete_tasks(user), make(n)])


def test_seed_task_list_is_constant(api, user):
    url = "/tasks?page_size=100"
    _assert_constant(
        api,
        lambda _: url,
        lambda n: [_delete_tasks(user), [_recurring_task(user, i) for i in range(n)]],
    )


def test_task_runs_list_is_constant(api, user):
    _assert_constant(
        api,
        lambda task: f"/api/v1/tasks/{task.id}/runs?page_size=100",
        lambda n: _runs_of_one_task(user, n),
    )


def test_notification_list_is_constant(api, user):
    def make(size: int) -> None:
        Channel.objects.filter(owner=user).delete()
        _notifications(user, size)

    _assert_constant(api, lambda _: "/api/v1/notifications?page_size=100", make)


def test_list_query_budget(api, user, django_assert_max_num_queries):
    """An absolute budget too: auth, count, page, and one prefetch per related list."""
    for i in range(50):
        _recurring_task(user, i)
    with django_assert_max_num_queries(8):
        assert api.get("/api/v1/tasks?page_size=100").status_code == 200
    task = _runs_of_one_task(user, 50)
    with django_assert_max_num_queries(6):
        assert api.get(f"/api/v1/tasks/{task.id}/runs?page_size=100").status_code == 200


def _delete_tasks(owner) -> None:
    from tasks.models import Task

    Task.objects.filter(owner=owner).delete()
