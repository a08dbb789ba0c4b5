"""The reviewer's expectation checks: late, too_slow and overdue, each raised once, also by
several reviewers checking at the same moment on connections of their own."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from notifications.models import Notification
from tasks import expectations
from tasks.models import RunCounter, Task, TaskHealth
from tasks.transitions.expectations import review_expectations
from tests.factories import RunFactory
from tests.notifications.conftest import ChannelFactory, subscribed_task
from tests.tasks.support import running_run

ALERTS = ["late", "too_slow", "overdue", "failing", "recovered"]


def expecting(user, expect: dict, *, since: timedelta = timedelta(minutes=10)) -> Task:
    channel = ChannelFactory(owner=user)
    task = subscribed_task(channel, ALERTS, expect=expect, schedule_type="interval")
    # The expectation set `since` ago: what was due after that is checked.
    expectations.sync([task], now=datetime.now(UTC) - since)
    return task


def events(task: Task) -> list[tuple[str, str]]:
    rows = Notification.objects.filter(task=task).order_by("created_at")
    return [(str(run_id), event) for run_id, event in rows.values_list("run_id", "event")]


def ago(seconds: float) -> datetime:
    return datetime.now(UTC) - timedelta(seconds=seconds)


@pytest.mark.django_db
def test_a_run_not_started_within_start_within_makes_the_task_late_once(user) -> None:
    task = expecting(user, {"start_within": 2})
    RunFactory(task=task, scheduled_at=ago(1))  # not late yet
    late = RunFactory(task=task, scheduled_at=ago(3))
    RunFactory(task=task, scheduled_at=ago(2.5))  # late too, but the task already is

    review_expectations()
    review_expectations()

    assert events(task) == [(str(late.id), "late")]
    assert TaskHealth.objects.get(task=task).health == "late"


@pytest.mark.django_db
def test_a_run_that_started_in_time_is_not_late(user) -> None:
    task = expecting(user, {"start_within": 2})
    running_run(task, scheduled_at=ago(5), started_at=ago(4.5))
    RunFactory(task=task, scheduled_at=ago(5.5), status="succeeded", attempt=1, finished_at=ago(4))

    assert review_expectations() == []
    assert TaskHealth.objects.get(task=task).health == "up"


@pytest.mark.django_db
def test_late_reminds_after_repeat_every(user) -> None:
    task = expecting(user, {"start_within": 1, "repeat_every": 30})
    first = RunFactory(task=task, scheduled_at=ago(5))
    second = RunFactory(task=task, scheduled_at=ago(4))
    review_expectations()
    # As if a pass had judged up to between the two runs, and the alert were 31 s old.
    TaskHealth.objects.filter(task=task).update(late_through=ago(4.5), alerted_at=ago(29))
    review_expectations()  # within repeat_every: nothing
    TaskHealth.objects.filter(task=task).update(late_through=ago(4.5), alerted_at=ago(31))

    review_expectations()

    assert events(task) == [(str(first.id), "late"), (str(second.id), "late")]


@pytest.mark.django_db
def test_a_run_running_past_duration_max_is_too_slow_while_it_runs(user) -> None:
    task = expecting(user, {"duration": {"max": 2}})
    slow = running_run(task, scheduled_at=ago(6), started_at=ago(6))
    running_run(task, scheduled_at=ago(1), started_at=ago(1))

    review_expectations()
    review_expectations()

    assert events(task) == [(str(slow.id), "too_slow")]
    assert TaskHealth.objects.get(task=task).health == "up"  # about one run, not the task


@pytest.mark.django_db
def test_no_success_within_success_within_is_overdue_once(user) -> None:
    task = expecting(user, {"success_within": 5}, since=timedelta(seconds=6))
    failed = RunFactory(
        task=task, scheduled_at=ago(4), status="failed", attempt=1, finished_at=ago(3)
    )
    RunFactory(task=task, scheduled_at=ago(-60))  # not due yet: not the run that shows it

    review_expectations()
    review_expectations()

    assert events(task) == [(str(failed.id), "overdue")]
    assert TaskHealth.objects.get(task=task).health == "overdue"


@pytest.mark.django_db
def test_a_recent_success_is_not_overdue_and_failing_stays_failing(user) -> None:
    fresh = expecting(user, {"success_within": 5}, since=timedelta(seconds=1))
    failing = expecting(user, {"success_within": 5}, since=timedelta(seconds=60))
    TaskHealth.objects.filter(task=failing).update(health="failing")
    RunFactory(task=fresh, scheduled_at=ago(2))
    RunFactory(task=failing, scheduled_at=ago(2))

    assert review_expectations() == []
    assert TaskHealth.objects.get(task=failing).health == "failing"


@pytest.mark.django_db(transaction=True)
def test_reviewers_checking_at_once_raise_each_alert_once(user) -> None:
    late_task = expecting(user, {"start_within": 1})
    slow_task = expecting(user, {"duration": {"max": 1}})
    overdue_task = expecting(user, {"success_within": 1})
    late = RunFactory(task=late_task, scheduled_at=ago(3))
    slow = running_run(slow_task, scheduled_at=ago(3), started_at=ago(3))
    shown = RunFactory(task=overdue_task, scheduled_at=ago(3))
    start, raised, errors = threading.Barrier(4), [], []

    def reviewer() -> None:
        try:
            start.wait(timeout=30)
            for _ in range(3):
                raised.extend(review_expectations())
        except Exception as exc:  # reported below, with the others
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=reviewer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert sorted((str(r[0]), r[3]) for r in raised) == sorted(
        [(str(late.id), "late"), (str(slow.id), "too_slow"), (str(shown.id), "overdue")]
    )
    assert Notification.objects.count() == 3
    counted = dict(RunCounter.objects.filter(metric="alert").values_list("outcome", "value"))
    assert counted == {"late": 1, "too_slow": 1, "overdue": 1}


@pytest.mark.django_db
def test_runs_the_rescue_fails_count_towards_the_failure_streak(user) -> None:
    from tasks.transitions.rescue import rescue_stuck_runs

    task = expecting(user, {"failure_streak": 2})
    stale = datetime.now(UTC) - timedelta(minutes=5)
    first = running_run(task, heartbeat_at=stale, attempt=1, max_attempts=1, scheduled_at=ago(90))
    rescue_stuck_runs(after_seconds=60)
    assert events(task) == []
    second = running_run(task, heartbeat_at=stale, attempt=1, max_attempts=1, scheduled_at=ago(80))

    rescue_stuck_runs(after_seconds=60)

    assert events(task) == [(str(second.id), "failing")]
    row = TaskHealth.objects.get(task=task)
    assert (row.health, row.failures) == ("failing", 2)
    assert first.id != second.id
    counted = dict(RunCounter.objects.filter(metric="alert").values_list("outcome", "value"))
    assert counted == {"failing": 1}


@pytest.mark.django_db
def test_a_healthy_tasks_row_is_written_once_a_minute_not_every_pass(user) -> None:
    recent = expecting(user, {"start_within": 1, "duration": {"max": 60}}, since=timedelta(0))
    stale = expecting(user, {"start_within": 1}, since=timedelta(minutes=5))
    running_run(recent, scheduled_at=ago(3), started_at=ago(3))  # running, not too slow yet
    before = {h.task_id: (h.late_through, h.slow_through) for h in TaskHealth.objects.all()}

    assert review_expectations() == []

    after = {h.task_id: (h.late_through, h.slow_through) for h in TaskHealth.objects.all()}
    assert after[recent.id] == before[recent.id]  # nothing due: not locked, not written
    assert after[stale.id][0] > before[stale.id][0] + timedelta(minutes=4)  # its cursor moved


@pytest.mark.django_db
def test_a_one_time_task_due_now_whose_run_does_not_start_is_late(api) -> None:
    body = {
        "kind": "handler",
        "payload": {"name": "noop"},
        "schedule": {"type": "once", "run_at": datetime.now(UTC).isoformat()},
        "expect": {"start_within": 1},
    }
    response = api.post("/api/v1/tasks", body, format="json")
    assert response.status_code == 201, response.content
    task = Task.objects.get(pk=response.json()["id"])
    run = task.runs.get()
    assert review_expectations() == []  # not late yet
    time.sleep(1.1)  # no worker: the run has not started start_within after it was due
    assert review_expectations() == [(run.pk, task.pk, 0, "late")]
    assert TaskHealth.objects.get(task=task).health == "late"


@pytest.mark.django_db
def test_backfilled_runs_are_never_late(user) -> None:
    task = expecting(user, {"start_within": 1}, since=timedelta(days=2))
    RunFactory(task=task, scheduled_at=ago(86400), backfill=True)
    assert review_expectations() == []
    assert TaskHealth.objects.get(task=task).health == "up"


@pytest.mark.django_db
def test_a_task_with_no_run_at_all_is_overdue_with_the_alert(user) -> None:
    """The dead man's switch: nothing ran, so the alert names no run, but it is sent."""
    task = expecting(user, {"success_within": 5}, since=timedelta(seconds=6))

    assert review_expectations() == [(None, task.pk, 0, "overdue")]
    assert review_expectations() == []

    assert events(task) == [("None", "overdue")]
    assert TaskHealth.objects.get(task=task).health == "overdue"
