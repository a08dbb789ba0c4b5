"""The admin operators run the service from: lists that never count big tables, actions that
go through the services, the dashboard."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from tasks.admin.lists import COUNT_CAP, EstimatedCountPaginator
from tasks.models import Process, QueueSample, Run, Task, TaskSet
from tests.factories import RunFactory, TaskFactory, UserFactory


@pytest.fixture
def staff(client, db):
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


def full_counts(queries: list[dict]) -> list[str]:
    """COUNT(*) over tasks_run not bounded by a LIMIT subquery."""
    return [
        q["sql"]
        for q in queries
        if re.search(r'COUNT\(\*\).*FROM "tasks_run"', q["sql"], re.I | re.S)
        and "LIMIT" not in q["sql"].upper()
    ]


@pytest.mark.parametrize(
    "query",
    [
        "",
        "?status__exact=failed",
        "?status__exact=scheduled",
        "?priority=9",
        "?scheduled_at__gte=2020-01-01+00:00:00%2B00:00",
        "?q=nightly",
        "?task__id__exact={task}",
    ],
)
def test_run_changelist_never_counts_the_whole_table(staff, query):
    task = TaskFactory(name="nightly report")
    RunFactory(task=task, status="failed", finished_at=timezone.now(), priority=9)
    RunFactory(task=task, scheduled_at=timezone.now() + timedelta(minutes=1))
    url = reverse("admin:tasks_run_changelist") + query.format(task=task.pk)
    with CaptureQueriesContext(connection) as ctx:
        response = staff.get(url)
    assert response.status_code == 200
    assert not full_counts(ctx.captured_queries)
    assert str(task.pk) in response.content.decode() or "0 runs" in response.content.decode()


def test_search_by_pasted_id_finds_the_run_or_the_tasks_runs(staff):
    run = RunFactory()
    other = RunFactory()
    page = staff.get(reverse("admin:tasks_run_changelist") + f"?q={run.task_id}").content.decode()
    assert str(run.pk) in page and str(other.pk) not in page


def test_task_changelist_filters_and_search(staff):
    owner = UserFactory(username="alice")
    TaskFactory(owner=owner, name="alpha", priority=9)
    TaskFactory(name="beta", status="paused")
    url = reverse("admin:tasks_task_changelist")
    queries = [
        "",
        "?status__exact=paused",
        f"?owner={owner.pk}",
        "?priority=9",
        "?kind__exact=http",
        "?schedule_type=once",
        "?q=alpha",
        "?q=alice",
    ]
    for query in queries:
        assert staff.get(url + query).status_code == 200, query
    page = staff.get(url + f"?owner={owner.pk}").content.decode()
    assert "alpha" in page and "beta" not in page


def test_task_actions_call_the_services(staff):
    task = TaskFactory(
        schedule={"type": "interval", "every": 3600},
        schedule_type="interval",
        next_unplanned_at=timezone.now() + timedelta(hours=1),
    )
    url = reverse("admin:tasks_task_changelist")
    for action, status in (("pause", "paused"), ("resume", "active"), ("cancel", "cancelled")):
        response = staff.post(url, {"action": action, "_selected_action": [task.pk]})
        assert response.status_code == 302
        task.refresh_from_db()
        assert task.status == status
    # run_now on a cancelled task is refused (409 in the API): reported, nothing created.
    staff.post(url, {"action": "run_now", "_selected_action": [task.pk]})
    assert not Run.objects.filter(task=task).exclude(status="cancelled").exists()


def test_run_now_action_creates_a_run(staff):
    task = TaskFactory()
    staff.post(
        reverse("admin:tasks_task_changelist"), {"action": "run_now", "_selected_action": [task.pk]}
    )
    assert Run.objects.filter(task=task, status="scheduled").count() >= 1


def test_run_actions_retry_and_cancel(staff):
    failed = RunFactory(status="failed", attempt=5, finished_at=timezone.now())
    scheduled = RunFactory()
    url = reverse("admin:tasks_run_changelist")
    staff.post(url, {"action": "retry", "_selected_action": [failed.pk]})
    staff.post(url, {"action": "cancel", "_selected_action": [scheduled.pk]})
    failed.refresh_from_db()
    scheduled.refresh_from_db()
    assert (failed.status, scheduled.status) == ("scheduled", "cancelled")
    # Retrying a run that succeeded is refused with a message, not an error page.
    done = RunFactory(status="succeeded", finished_at=timezone.now())
    response = staff.post(url, {"action": "retry", "_selected_action": [done.pk]}, follow=True)
    assert "only failed or cancelled runs" in response.content.decode()


def test_run_page_shows_attempts_and_output_read_only(staff):
    run = RunFactory(status="succeeded", finished_at=timezone.now(), output="hello <world>")
    run.attempts.create(number=1, finished_at=timezone.now(), outcome="succeeded", error="")
    page = staff.get(reverse("admin:tasks_run_change", args=[run.pk])).content.decode()
    assert "hello &lt;world&gt;" in page
    assert "Attempts" in page
    assert 'name="_save"' not in page


def test_run_pages_show_why_a_run_waits_and_since_when_it_is_a_zombie(staff):
    waiting = RunFactory(status="waiting_for_resource", wait_reason="no live worker offers cpu=64")
    zombie = RunFactory(zombie_since=timezone.now())
    listing = staff.get(reverse("admin:tasks_run_changelist")).content.decode()
    assert "no live worker offers cpu=64" in listing and "Zombie since" in listing
    page = staff.get(reverse("admin:tasks_run_change", args=[waiting.pk])).content.decode()
    assert "no live worker offers cpu=64" in page and "Wait reason" in page
    page = staff.get(reverse("admin:tasks_run_change", args=[zombie.pk])).content.decode()
    assert "Zombie since" in page


def test_process_list_and_dashboard(staff):
    now = timezone.now()
    Process.objects.create(
        name="worker:h:1", role="worker", host="h", pid=1, started_at=now, last_seen_at=now
    )
    assert "worker:h:1" in staff.get(reverse("admin:tasks_process_changelist")).content.decode()
    minute = now.replace(second=0, microsecond=0) - timedelta(minutes=2)
    for i in range(3):
        QueueSample.objects.create(
            minute=minute - timedelta(minutes=i),
            due=i,
            running=1,
            waiting_for_resource=0,
            finished=10 * i,
            failed=i,
            lateness_p50=0.01,
            lateness_p99=0.2,
            lateness_max=0.5,
        )
    RunFactory(execute_at=now - timedelta(seconds=5))
    page = staff.get(reverse("admin-dashboard")).content.decode()
    assert page.count('role="img"') == 3 and "<polyline" in page
    assert "Queue depth" in page and "Start lateness" in page and "Throughput" in page
    assert "finished in the last hour" in page.lower()
    assert reverse("admin-dashboard") in staff.get(reverse("admin:index")).content.decode()


def test_dashboard_needs_staff(client, db):
    response = client.get(reverse("admin-dashboard"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_paginator_estimates_unfiltered_and_caps_filtered_counts(db, monkeypatch):
    monkeypatch.setattr("tasks.admin.lists.estimated_rows", lambda table: 5_000_000)
    assert EstimatedCountPaginator(Run.objects.order_by("-id"), 100).count == 5_000_000
    RunFactory.create_batch(3, status="failed", finished_at=timezone.now())
    monkeypatch.setattr("tasks.admin.lists.COUNT_CAP", 2)
    assert (
        EstimatedCountPaginator(Run.objects.filter(status="failed").order_by("-id"), 100).count == 2
    )
    assert COUNT_CAP == 10_000
    assert EstimatedCountPaginator(Task.objects.filter(pk=None).order_by("-id"), 100).count == 0


def test_the_task_page_says_the_task_is_in_a_set(client, db) -> None:
    operator = UserFactory(is_staff=True, is_superuser=True)
    taskset = TaskSet.objects.create(owner=operator, name="nightly")
    task = TaskFactory(owner=operator, taskset=taskset, taskset_key="report")
    client.force_login(operator)
    page = client.get(reverse("admin:tasks_task_change", args=[task.pk])).content.decode()
    assert "nightly / report: a change here is drift" in page
