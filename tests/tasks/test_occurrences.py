"""tasks.occurrences: materialising occurrences, idempotently, with the misfire policies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import AbstractBaseUser

from tasks import occurrences, schedules
from tasks.models import Run, Task
from tasks.transitions import creation
from tasks.transitions.plan import PlanResult, plan_due_tasks, plan_task
from tests.factories import UserFactory

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


@pytest.fixture
def owner(db) -> AbstractBaseUser:
    return UserFactory()


@pytest.fixture(autouse=True)
def _timing(settings) -> None:
    settings.TASKS_LOOKAHEAD_SECONDS = 30.0
    settings.TASKS_MISFIRE_GRACE_SECONDS = 60.0


def make_task(owner: AbstractBaseUser, schedule: dict, *, now: datetime = T0) -> Task:
    data = {
        "kind": "handler",
        "payload": {"name": "noop", "args": {}},
        "schedule": schedules.normalize(schedule, now=now),
    }
    task, created = creation.create_task(owner=owner, data=data, now=now)
    assert created
    return task


def plan(task: Task, now: datetime) -> PlanResult:
    return plan_task(task, now=now, horizon=now + timedelta(seconds=30))


def runs_by_status(task: Task) -> dict[str, list[datetime]]:
    found: dict[str, list[datetime]] = {}
    for run in Run.objects.filter(task=task).order_by("scheduled_at"):
        found.setdefault(run.status, []).append(run.scheduled_at)
    return found


def late_minutely(
    owner: AbstractBaseUser, misfire: str, minutes_late: int
) -> tuple[Task, datetime]:
    """An every-60-s task whose first occurrence (T0 + 1 min) lies `minutes_late` in the past."""
    task = make_task(owner, {"type": "interval", "every": 60, "misfire": misfire})
    assert task.next_unplanned_at == T0 + MINUTE
    assert not Run.objects.filter(task=task).exists()
    return task, T0 + MINUTE + minutes_late * MINUTE


def test_only_occurrences_inside_the_lookahead_are_planned(owner: AbstractBaseUser) -> None:
    task = make_task(owner, {"type": "interval", "every": 10})

    assert runs_by_status(task) == {"scheduled": [T0 + timedelta(seconds=s) for s in (10, 20, 30)]}
    assert task.next_unplanned_at == T0 + timedelta(seconds=40)
    assert task.runs_planned == 3


def test_plan_task_twice_creates_no_duplicate(owner: AbstractBaseUser) -> None:
    task, now = late_minutely(owner, "run_all", 0)

    first = plan(task, now)
    second = plan(task, now)

    assert (first.planned, second.planned) == (1, 0)
    assert Run.objects.filter(task=task).count() == 1


def test_replayed_pass_on_a_stale_row_creates_no_duplicate(owner: AbstractBaseUser) -> None:
    task, now = late_minutely(owner, "run_all", 3)
    stale = Task.objects.get(pk=task.pk)

    plan(task, now)
    count = Run.objects.filter(task=task).count()
    plan(stale, now)  # a second scheduler, or a retry after a crash, from the old row

    assert count == 4
    assert Run.objects.filter(task=task).count() == count
    task.refresh_from_db()
    assert task.next_unplanned_at == now + MINUTE


def test_replayed_pass_with_skipped_occurrences(owner: AbstractBaseUser) -> None:
    task, now = late_minutely(owner, "skip", 5)
    stale = Task.objects.get(pk=task.pk)

    plan(task, now)
    before = sorted(Run.objects.filter(task=task).values_list("scheduled_at", "status"))
    plan(stale, now)

    assert sorted(Run.objects.filter(task=task).values_list("scheduled_at", "status")) == before


def test_misfire_run_once_runs_only_the_latest_missed(owner: AbstractBaseUser) -> None:
    task, now = late_minutely(owner, "run_once", 10)

    result = plan(task, now)

    runs = runs_by_status(task)
    # Missed: before now - grace (60 s). The latest of them runs; the rest are recorded skipped.
    assert runs["skipped"] == [T0 + i * MINUTE for i in range(1, 9)]
    assert runs["scheduled"] == [now - 2 * MINUTE, now - MINUTE, now]
    assert (result.planned, result.skipped) == (3, 8)
    skipped = Run.objects.filter(task=task, status="skipped").first()
    assert skipped.finished_at == now
    assert "misfire" in skipped.error


def test_misfire_skip_skips_every_missed(owner: AbstractBaseUser) -> None:
    task, now = late_minutely(owner, "skip", 10)

    plan(task, now)

    runs = runs_by_status(task)
    assert runs["skipped"] == [T0 + i * MINUTE for i in range(1, 10)]
    # Inside the grace window an occurrence is late, not missed.
    assert runs["scheduled"] == [now - MINUTE, now]


def test_misfire_run_all_runs_every_missed(owner: AbstractBaseUser) -> None:
    task, now = late_minutely(owner, "run_all", 10)

    plan(task, now)

    runs = runs_by_status(task)
    assert "skipped" not in runs
    assert len(runs["scheduled"]) == 11


def test_misfire_run_all_is_capped(owner: AbstractBaseUser) -> None:
    task, now = late_minutely(owner, "run_all", 200)

    plan(task, now)

    runs = runs_by_status(task)
    # 199 missed (before now - grace); on time: now - 1 min and now.
    assert len(runs["skipped"]) == 199 - occurrences.RUN_ALL_CAP
    missed_run = [at for at in runs["scheduled"] if at < now - MINUTE]
    assert len(missed_run) == occurrences.RUN_ALL_CAP
    # The latest missed are the ones replayed.
    assert max(runs["skipped"]) < min(runs["scheduled"])


def test_run_once_over_several_passes_runs_one(owner: AbstractBaseUser) -> None:
    task, now = late_minutely(owner, "run_once", occurrences.MAX_OCCURRENCES_PER_PASS + 200)

    plan(task, now)
    assert "scheduled" not in runs_by_status(task)  # the catch-up continues next pass
    plan(task, now)

    runs = runs_by_status(task)
    assert runs["scheduled"] == [now - 2 * MINUTE, now - MINUTE, now]


def test_a_late_one_time_task_runs_anyway(owner: AbstractBaseUser) -> None:
    run_at = T0 + timedelta(hours=1)
    task = make_task(owner, {"type": "once", "run_at": run_at.isoformat()})

    plan(task, run_at + timedelta(days=3))

    assert runs_by_status(task) == {"scheduled": [run_at]}
    task.refresh_from_db()
    assert task.next_unplanned_at is None


def test_max_runs_stops_planning(owner: AbstractBaseUser) -> None:
    task = make_task(owner, {"type": "interval", "every": 10, "max_runs": 2})

    assert len(runs_by_status(task)["scheduled"]) == 2
    assert task.next_unplanned_at is None
    assert plan(task, T0 + timedelta(minutes=5)).planned == 0


def test_jitter_delays_execute_at_but_not_scheduled_at(owner: AbstractBaseUser) -> None:
    task = make_task(owner, {"type": "interval", "every": 10, "jitter": 5})

    for run in Run.objects.filter(task=task):
        assert run.scheduled_at.second % 10 == 0
        assert run.scheduled_at <= run.execute_at < run.scheduled_at + timedelta(seconds=5)


def test_plan_due_tasks_plans_active_tasks_only(owner: AbstractBaseUser) -> None:
    active, now = late_minutely(owner, "run_all", 0)
    paused, _ = late_minutely(owner, "run_all", 0)
    Task.objects.filter(pk=paused.pk).update(status="paused")

    result = plan_due_tasks(now=now)

    assert result.planned == 1
    assert Run.objects.filter(task=active).count() == 1
    assert not Run.objects.filter(task=paused).exists()


def test_next_planning_at_is_the_earliest_next_run_minus_lookahead(
    owner: AbstractBaseUser,
) -> None:
    make_task(owner, {"type": "interval", "every": 3600})
    make_task(owner, {"type": "interval", "every": 600})

    assert occurrences.next_planning_at() == T0 + timedelta(seconds=600 - 30)


def test_preview_uses_the_planning_code(owner: AbstractBaseUser) -> None:
    schedule = schedules.normalize({"type": "interval", "every": 60}, now=T0)

    assert occurrences.preview(schedule, now=T0, count=3)[0] == [T0 + i * MINUTE for i in (1, 2, 3)]


def test_task_whose_last_occurrences_are_skipped_completes(owner: AbstractBaseUser) -> None:
    task = make_task(owner, {"type": "interval", "every": 60, "max_runs": 3, "misfire": "skip"})

    plan(task, T0 + timedelta(minutes=30))

    assert runs_by_status(task) == {"skipped": [T0 + i * MINUTE for i in (1, 2, 3)]}
    task.refresh_from_db()
    assert (task.next_unplanned_at, task.status) == (None, "completed")
