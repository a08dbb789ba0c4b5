"""Recurring planning and its services, called directly with `now=` (no processes)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from tasks import occurrences, schedules
from tasks.db import db_now
from tasks.management.commands.runscheduler import MIN_PAUSE_SECONDS
from tasks.management.commands.runscheduler import Command as Scheduler
from tasks.models import Run, Task
from tasks.transitions import claim, creation, lifecycle, overlap
from tasks.transitions.plan import PLAN_RETRY_SECONDS, plan_due_tasks, plan_task
from tests.factories import RunFactory, TaskFactory, UserFactory

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
SECOND = timedelta(seconds=1)


@pytest.fixture
def owner(db) -> AbstractBaseUser:
    return UserFactory()


@pytest.fixture(autouse=True)
def _timing(settings) -> None:
    settings.TASKS_LOOKAHEAD_SECONDS = 30.0
    settings.TASKS_MISFIRE_GRACE_SECONDS = 60.0
    settings.TASKS_HEARTBEAT_SECONDS = 2.0


def make_task(owner: AbstractBaseUser, schedule: dict, *, now: datetime = T0) -> Task:
    data = {
        "kind": "handler",
        "payload": {"name": "noop", "args": {}},
        "schedule": schedules.normalize(schedule, now=now),
    }
    task, _ = creation.create_task(owner=owner, data=data, now=now)
    return task


def plan(task: Task, now: datetime) -> None:
    with transaction.atomic():
        plan_task(task, now=now, horizon=now + timedelta(seconds=30))


def statuses(task: Task) -> dict[str, list[datetime]]:
    found: dict[str, list[datetime]] = {}
    for run in Run.objects.filter(task=task).order_by("scheduled_at"):
        found.setdefault(run.status, []).append(run.scheduled_at)
    return found


def test_run_all_runs_the_latest_hundred_of_a_catch_up_longer_than_a_pass(owner) -> None:
    task = make_task(owner, {"type": "interval", "every": 60, "misfire": "run_all"})
    now = T0 + (occurrences.MAX_OCCURRENCES_PER_PASS + 300) * MINUTE

    plan(task, now)
    plan(task, now)

    runs = statuses(task)
    missed_run = [at for at in runs["scheduled"] if at < now - MINUTE]
    assert len(missed_run) == occurrences.RUN_ALL_CAP  # not one hundred per pass
    assert max(runs["skipped"]) < min(missed_run)
    assert len(runs["skipped"]) + len(missed_run) == occurrences.MAX_OCCURRENCES_PER_PASS + 298


def test_run_once_runs_the_latest_missed_when_a_pass_ends_on_it(owner) -> None:
    task = make_task(owner, {"type": "interval", "every": 60})
    # The first pass ends on the first occurrence inside the grace period: every missed one is
    # in it, but the catch-up goes on in a second pass.
    now = T0 + (occurrences.MAX_OCCURRENCES_PER_PASS + 1) * MINUTE

    plan(task, now)
    plan(task, now)

    runs = statuses(task)
    assert len(runs["skipped"]) == occurrences.MAX_OCCURRENCES_PER_PASS - 2
    assert runs["scheduled"] == [now - 2 * MINUTE, now - MINUTE, now]


def test_run_once_under_max_runs_counts_only_occurrences_that_will_exist(owner) -> None:
    schedule = {"type": "interval", "every": 60, "max_runs": occurrences.MAX_OCCURRENCES_PER_PASS}
    task = make_task(owner, schedule)
    now = T0 + 2000 * MINUTE

    plan(task, now)

    runs = statuses(task)
    # max_runs ends the schedule inside the first pass: its last occurrence is the latest missed.
    assert runs["scheduled"] == [T0 + occurrences.MAX_OCCURRENCES_PER_PASS * MINUTE]
    task.refresh_from_db()
    assert task.next_unplanned_at is None


def test_a_task_whose_planning_fails_is_pushed_back_and_the_rest_planned(owner, caplog) -> None:
    good = make_task(owner, {"type": "interval", "every": 60})
    bad = make_task(owner, {"type": "interval", "every": 60})
    broken = {**bad.schedule, "type": "cron", "expression": "not a cron expression"}
    Task.objects.filter(pk=bad.pk).update(schedule=broken)
    now = T0 + 5 * MINUTE

    plan_due_tasks(now=now)

    assert Run.objects.filter(task=good).exists()
    bad.refresh_from_db()
    assert bad.next_unplanned_at == now + timedelta(seconds=PLAN_RETRY_SECONDS)
    assert f"planning task={bad.pk} failed" in caplog.text


def test_jitter_is_keyed_by_the_runs_idempotency_key(owner) -> None:
    task = make_task(owner, {"type": "interval", "every": 10, "jitter": 5})

    for run in Run.objects.filter(task=task):
        offset = schedules.jitter_offset(task.schedule, key=run.idempotency_key)
        assert (run.execute_at - run.scheduled_at).total_seconds() == pytest.approx(
            offset, abs=1e-6
        )


def test_next_runs_lists_planned_occurrences_first(owner) -> None:
    task = make_task(owner, {"type": "interval", "every": 10})
    assert task.next_unplanned_at == T0 + 40 * SECOND  # 10, 20 and 30 s are planned already

    times = occurrences.next_runs(task, now=T0, count=5)

    assert times == [T0 + s * SECOND for s in (10, 20, 30, 40, 50)]


def test_next_runs_leaves_out_skipped_and_started_occurrences(owner) -> None:
    task = make_task(owner, {"type": "interval", "every": 10, "max_runs": 4})
    Run.objects.filter(task=task, scheduled_at=T0 + 10 * SECOND).update(
        status="running", attempt=1, worker="w", started_at=T0, heartbeat_at=T0
    )
    lifecycle.skip_next(task=task, now=T0)  # 20 s

    times = occurrences.next_runs(task, now=T0, count=5)

    assert times == [T0 + 30 * SECOND, T0 + 40 * SECOND]  # max_runs ends it after 40 s


def test_skip_next_never_skips_an_extra_run_now_run(owner) -> None:
    task = make_task(owner, {"type": "interval", "every": 10})
    extra = lifecycle.run_now(task=task, now=T0 + 2 * SECOND)

    skipped = lifecycle.skip_next(task=task, now=T0 + 2 * SECOND)

    assert skipped.scheduled_at == T0 + 10 * SECOND
    extra.refresh_from_db()
    assert extra.status == "scheduled"


def test_skip_next_leaves_a_run_a_worker_claimed_meanwhile(owner, monkeypatch) -> None:
    task = make_task(owner, {"type": "interval", "every": 10})
    first = Run.objects.get(task=task, scheduled_at=T0 + 10 * SECOND)
    # The worker's claim lands between skip_next's read and its write: the CAS sees it.
    original = lifecycle._is_occurrence

    def claim_then_check(schedule: dict, at: datetime, *rest: object) -> bool:
        Run.objects.filter(pk=first.pk).update(
            status="running", attempt=1, worker="w", started_at=T0, heartbeat_at=T0
        )
        return original(schedule, at, *rest)

    monkeypatch.setattr(lifecycle, "_is_occurrence", claim_then_check)
    skipped = lifecycle.skip_next(task=task, now=T0)

    assert skipped.scheduled_at == T0 + 20 * SECOND
    first.refresh_from_db()
    assert first.status == "running"


def test_resume_completes_a_task_whose_last_run_finished_while_paused(owner) -> None:
    task = make_task(owner, {"type": "interval", "every": 10, "max_runs": 1})
    run = Run.objects.get(task=task)
    Run.objects.filter(pk=run.pk).update(
        status="running", attempt=1, worker="w", started_at=T0, heartbeat_at=T0
    )
    task = lifecycle.pause_task(task=task, now=T0)
    Run.objects.filter(pk=run.pk).update(status="succeeded", finished_at=T0 + SECOND)

    task = lifecycle.resume_task(task=task, now=T0 + MINUTE)

    assert task.status == "completed"
    assert Task.objects.get(pk=task.pk).status == "completed"


def test_a_window_wholly_in_the_past_is_refused() -> None:
    raw = {
        "type": "interval",
        "every": 60,
        "start_at": "2029-01-01T00:00:00Z",
        "end_at": "2029-06-01T00:00:00Z",
    }
    with pytest.raises(schedules.ScheduleError) as caught:
        schedules.normalize(raw, now=T0)
    assert list(caught.value.errors) == ["end_at"]
    assert schedules.normalize(raw, now=datetime(2029, 3, 1, tzinfo=UTC))["end_at"]


def test_scheduler_sleeps_until_half_a_lookahead_before_the_earliest_occurrence(owner) -> None:
    now = db_now()
    Task.objects.create(
        owner=owner,
        kind="handler",
        schedule={"type": "interval", "every": 60},
        next_unplanned_at=now + timedelta(seconds=30 + 16),
    )
    scheduler = Scheduler()

    # Due for planning (30 s ahead) in 16 s; planned 15 s later, still 15 s before it is due.
    assert scheduler.sleep_seconds() == 2.0  # capped at the heartbeat interval

    Task.objects.update(next_unplanned_at=now + timedelta(seconds=30 - 14))
    assert 0.5 < scheduler.sleep_seconds() <= 1.0

    Task.objects.update(next_unplanned_at=now)  # e.g. locked by another scheduler planning it
    assert scheduler.sleep_seconds() == MIN_PAUSE_SECONDS


def test_overlap_skip_holds_between_runs_claimed_together(owner) -> None:
    now = db_now()
    schedule = schedules.normalize(
        {"type": "interval", "every": 1, "allow_every_second": True, "overlap": "skip"}, now=now
    )
    task = TaskFactory(owner=owner, schedule=schedule, schedule_type="interval")
    for seconds in (3, 2):
        RunFactory(task=task, scheduled_at=now - timedelta(seconds=seconds))

    claimed = claim.claim_runs(worker="w-1", limit=4, prefetch_seconds=0.5, owner_cap=0)
    assert len(claimed) == 2
    to_run = overlap.resolve_overlaps(worker="w-1", claimed=claimed)

    assert len(to_run) == 1, "two runs of a task with overlap=skip would run at once"


def test_overlap_cancel_previous_runs_only_the_newest_of_a_batch(owner) -> None:
    now = db_now()
    schedule = schedules.normalize(
        {"type": "interval", "every": 1, "allow_every_second": True, "overlap": "cancel_previous"},
        now=now,
    )
    task = TaskFactory(owner=owner, schedule=schedule, schedule_type="interval")
    for seconds in (3, 2):
        RunFactory(task=task, scheduled_at=now - timedelta(seconds=seconds))

    claimed = claim.claim_runs(worker="w-1", limit=4, prefetch_seconds=0.5, owner_cap=0)
    to_run = overlap.resolve_overlaps(worker="w-1", claimed=claimed)

    newest = max(claimed, key=lambda r: r.scheduled_at)
    assert [r.id for r in to_run] == [newest.id]
    older = Run.objects.get(task=task, scheduled_at=now - timedelta(seconds=3))
    assert older.status == "cancelled" and older.attempt == 0
