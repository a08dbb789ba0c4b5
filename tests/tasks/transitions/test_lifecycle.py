"""tasks.transitions (creation, lifecycle, run_actions, plan) called directly, with `now=`."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction

from tasks import schedules
from tasks.exceptions import Conflict
from tasks.models import Attempt, Run, Task
from tasks.transitions import creation, lifecycle, plan, run_actions
from tests.factories import RunFactory, TaskFactory, UserFactory
from tests.tasks.support import finished_run, running_run

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def owner(db) -> AbstractBaseUser:
    return UserFactory()


def data(schedule: dict | None = None, **fields: object) -> dict:
    return {
        "kind": "handler",
        "payload": {"name": "noop", "args": {}},
        "schedule": schedules.normalize(schedule, now=T0),
        **fields,
    }


def test_create_task_plans_a_due_run(owner: AbstractBaseUser) -> None:
    task, created = creation.create_task(owner=owner, data=data(), now=T0)

    assert created
    run = Run.objects.get(task=task)
    assert (run.scheduled_at, run.status, run.owner_id) == (T0, "scheduled", owner.pk)
    assert task.next_unplanned_at is None


def test_create_task_with_a_repeated_dedup_key(owner: AbstractBaseUser) -> None:
    first, created_first = creation.create_task(owner=owner, data=data(dedup_key="k"), now=T0)
    second, created_second = creation.create_task(
        owner=owner, data=data(dedup_key="k", name="other"), now=T0
    )

    assert (created_first, created_second) == (True, False)
    assert second.pk == first.pk
    assert Task.objects.count() == 1
    assert Task.objects.get().name == ""


@pytest.mark.concurrency
@pytest.mark.django_db(transaction=True)
def test_create_task_dedup_race_leaves_one_row() -> None:
    """The loser of a race past the first lookup reads the winner's row (the unique index)."""
    owner = UserFactory()
    inserted = threading.Event()
    winner: list[Task] = []

    def racer() -> None:
        try:
            with transaction.atomic():
                winner.append(Task.objects.create(owner=owner, kind="handler", dedup_key="k"))
                inserted.set()
                time.sleep(0.5)  # commit while the other create waits on the index
        finally:
            inserted.set()
            connection.close()

    thread = threading.Thread(target=racer)
    thread.start()
    assert inserted.wait(timeout=10)
    # The winner has not committed: the lookup misses, the INSERT blocks, then conflicts.
    task, created = creation.create_task(owner=owner, data=data(dedup_key="k"), now=T0)
    thread.join(timeout=10)

    assert not created
    assert task.pk == winner[0].pk
    assert Task.objects.filter(owner=owner, dedup_key="k").count() == 1


def test_update_task_is_a_conflict_while_a_one_time_run_is_running(
    owner: AbstractBaseUser,
) -> None:
    task = TaskFactory(owner=owner)
    running_run(task)

    with pytest.raises(Conflict):
        lifecycle.update_task(task=task, data={"name": "x"}, now=T0)


def test_update_task_of_a_recurring_task_with_a_running_run(owner: AbstractBaseUser) -> None:
    task, _ = creation.create_task(
        owner=owner, data=data({"type": "interval", "every": 10}), now=T0
    )
    run = Run.objects.filter(task=task).order_by("scheduled_at").first()
    Run.objects.filter(pk=run.pk).update(
        status="running", attempt=1, worker="w-1", started_at=T0, heartbeat_at=T0
    )

    lifecycle.update_task(task=task, data={"priority": 8}, now=T0)

    assert set(
        Run.objects.filter(task=task, status="scheduled").values_list("priority", flat=True)
    ) == {8}
    run.refresh_from_db()
    assert (run.status, run.priority) == ("running", 5)


def test_update_task_schedule_replans(owner: AbstractBaseUser) -> None:
    task, _ = creation.create_task(owner=owner, data=data(), now=T0)
    later = schedules.normalize({"type": "once", "run_at": "2030-01-01T12:00:20Z"}, now=T0)

    lifecycle.update_task(task=task, data={"schedule": later}, now=T0)

    run = Run.objects.get(task=task)
    assert run.scheduled_at == T0 + timedelta(seconds=20)


def test_pause_and_resume_replan_missed_occurrences_by_policy(owner: AbstractBaseUser) -> None:
    schedule = {"type": "interval", "every": 10, "misfire": "skip"}
    task, _ = creation.create_task(owner=owner, data=data(schedule), now=T0)
    assert Run.objects.filter(task=task).count() == 3

    task = lifecycle.pause_task(task=task, now=T0)
    assert (task.status, task.next_unplanned_at, task.runs_planned) == (
        "paused",
        T0 + timedelta(seconds=10),
        0,
    )
    assert not Run.objects.filter(task=task).exists()

    later = T0 + timedelta(minutes=10)
    task = lifecycle.resume_task(task=task, now=later)

    assert task.status == "active"
    scheduled = Run.objects.filter(task=task, status="scheduled")
    assert min(scheduled.values_list("scheduled_at", flat=True)) >= later - timedelta(minutes=1)
    assert Run.objects.filter(task=task, status="skipped").exists()


def test_cancel_task_cancels_scheduled_runs(owner: AbstractBaseUser) -> None:
    task, _ = creation.create_task(owner=owner, data=data(), now=T0)

    lifecycle.cancel_task(task=task, force=False, now=T0)

    run = Run.objects.get(task=task)
    assert (run.status, run.finished_at) == ("cancelled", T0)


def test_cancel_task_with_force_stops_the_running_run(owner: AbstractBaseUser) -> None:
    task = TaskFactory(owner=owner)
    run = running_run(task)

    with pytest.raises(Conflict):
        lifecycle.cancel_task(task=task, force=False, now=T0)
    lifecycle.cancel_task(task=task, force=True, now=T0)

    run.refresh_from_db()
    assert (run.status, run.finished_at) == ("cancelled", T0)
    assert Attempt.objects.get(run=run).outcome == "cancelled"


def test_run_now_keeps_the_cadence(owner: AbstractBaseUser) -> None:
    task, _ = creation.create_task(
        owner=owner, data=data({"type": "interval", "every": 3600}), now=T0
    )

    run = lifecycle.run_now(task=task, now=T0 + timedelta(seconds=5))

    assert (run.scheduled_at, run.status) == (T0 + timedelta(seconds=5), "scheduled")
    task.refresh_from_db()
    assert (task.next_unplanned_at, task.runs_planned) == (T0 + timedelta(hours=1), 0)


def test_skip_next_respects_max_runs(owner: AbstractBaseUser) -> None:
    schedule = {"type": "interval", "every": 3600, "max_runs": 1}
    task, _ = creation.create_task(owner=owner, data=data(schedule), now=T0)

    run = lifecycle.skip_next(task=task, now=T0)

    assert (run.status, run.scheduled_at) == ("skipped", T0 + timedelta(hours=1))
    task.refresh_from_db()
    assert (task.next_unplanned_at, task.status) == (None, "completed")
    with pytest.raises(Conflict):
        lifecycle.skip_next(task=task, now=T0)


def test_cancel_run_of_a_scheduled_run(owner: AbstractBaseUser) -> None:
    run = RunFactory(task=TaskFactory(owner=owner, next_unplanned_at=T0))

    run = run_actions.cancel_run(run=run, now=T0)

    assert (run.status, run.finished_at, run.error) == ("cancelled", T0, "cancelled on request")
    assert not Attempt.objects.filter(run=run).exists()


def test_cancel_run_of_a_running_run(owner: AbstractBaseUser) -> None:
    run = running_run(TaskFactory(owner=owner), attempt=2)

    run = run_actions.cancel_run(run=run, now=T0)

    assert run.status == "cancelled"
    attempt = Attempt.objects.get(run=run)
    assert (attempt.number, attempt.outcome, attempt.finished_at) == (2, "cancelled", T0)


@pytest.mark.parametrize("status", ["succeeded", "failed", "cancelled", "skipped"])
def test_cancel_run_of_a_finished_run_is_a_conflict(owner: AbstractBaseUser, status: str) -> None:
    run = finished_run(TaskFactory(owner=owner), status)

    with pytest.raises(Conflict):
        run_actions.cancel_run(run=run, now=T0)


def test_retry_run_gives_fresh_attempts(owner: AbstractBaseUser) -> None:
    task = TaskFactory(owner=owner, max_attempts=4, status="completed")
    run = finished_run(task, "failed", attempt=4, max_attempts=4, worker="w-1", heartbeat_at=T0)

    run = run_actions.retry_run(run=run, now=T0)

    assert (run.status, run.execute_at, run.max_attempts, run.attempt) == ("scheduled", T0, 8, 4)
    assert (run.finished_at, run.worker, run.heartbeat_at) == (None, "", None)
    task.refresh_from_db()
    assert task.status == "active"


@pytest.mark.parametrize("status", ["succeeded", "skipped"])
def test_retry_run_of_a_run_that_did_not_fail_is_a_conflict(
    owner: AbstractBaseUser, status: str
) -> None:
    run = finished_run(TaskFactory(owner=owner), status)

    with pytest.raises(Conflict):
        run_actions.retry_run(run=run, now=T0)
    run.refresh_from_db()
    assert run.status == status


def test_pause_after_run_now_keeps_max_runs(owner: AbstractBaseUser, settings) -> None:
    """An extra run-now run is no occurrence: withdrawing it must not free a max_runs slot."""
    settings.TASKS_LOOKAHEAD_SECONDS = 30.0
    schedule = {"type": "interval", "every": 20, "max_runs": 3}
    task, _ = creation.create_task(owner=owner, data=data(schedule), now=T0)
    first = Run.objects.get(task=task)
    Run.objects.filter(pk=first.pk).update(status="succeeded", attempt=1, finished_at=T0)
    now = T0 + timedelta(seconds=25)
    with transaction.atomic():
        plan.plan_task(task, now=now, horizon=now + timedelta(seconds=30))
    lifecycle.run_now(task=task, now=now)

    lifecycle.pause_task(task=task, now=now)
    task = lifecycle.resume_task(task=task, now=now)
    for step in range(1, 10):
        later = now + timedelta(seconds=20 * step)
        with transaction.atomic():
            plan.plan_task(task, now=later, horizon=later + timedelta(seconds=30))

    occurrences = Run.objects.filter(task=task).exclude(scheduled_at=now)
    assert sorted(occurrences.values_list("scheduled_at", flat=True)) == [
        T0 + timedelta(seconds=20 * i) for i in (1, 2, 3)
    ]
