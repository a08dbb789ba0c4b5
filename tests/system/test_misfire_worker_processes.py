"""Misfire policies when the *workers* fall behind, with real processes.

The scheduler plans every occurrence on time; then no worker starts them for longer than the
grace period: all workers stopped (an outage), or every slot taken by a long run (a saturated
pool). Scaled down from the issue's 100 s outage: 1-second tasks with a 3-second grace.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest

from tasks import schedules
from tasks.db import db_now
from tasks.models import TERMINAL_STATUSES, Attempt, Process, Run, Task
from tasks.transitions import creation
from tests.conftest import process_env, wait_for
from tests.factories import UserFactory
from tests.tasks.recurring_support import fire_times_until, recorded_keys

pytestmark = pytest.mark.processes

GRACE = 3
POLICIES = ("run_once", "skip", "run_all")


def create(owner: object, policy: str, *, now: datetime) -> Task:
    raw = {
        "type": "interval",
        "every": 1,
        "allow_every_second": True,
        "misfire": policy,
        "misfire_grace": GRACE,
    }
    data = {
        "kind": "handler",
        "payload": {"name": "record", "args": {}},
        "schedule": schedules.normalize(raw, now=now),
    }
    return creation.create_task(owner=owner, data=data, now=now)[0]


def history(task: Task, until: datetime) -> dict[datetime, str]:
    runs = Run.objects.filter(task=task, scheduled_at__lte=until).order_by("scheduled_at")
    return dict(runs.values_list("scheduled_at", "status"))


def settled(tasks: list[Task], until: datetime) -> bool:
    return all(
        len(history(task, until)) == len(fire_times_until(task.schedule, until))
        and set(history(task, until).values()) <= set(TERMINAL_STATUSES)
        for task in tasks
    )


def old_occurrences(task: Task, *, back: datetime) -> list[datetime]:
    """Occurrences past their grace when a worker could take them again at `back`, and not
    attempted before: a run released by a stopping worker counts as attempted (its next
    claim is attempt 2, and retries are never missed)."""
    tried = Attempt.objects.filter(run__task=task, finished_at__lt=back)
    return list(
        Run.objects.filter(task=task, scheduled_at__lt=back - timedelta(seconds=GRACE))
        .exclude(pk__in=tried.values("run_id"))
        .order_by("scheduled_at")
        .values_list("scheduled_at", flat=True)
    )


def check_policies(tasks: dict[str, Task], *, back: datetime, until: datetime, records) -> None:
    for policy, task in tasks.items():
        record = history(task, until)
        assert list(record) == fire_times_until(task.schedule, until), f"{policy}: a hole"
        old = old_occurrences(task, back=back)
        assert len(old) >= 5, (policy, old)
        statuses = [record[at] for at in old]
        if policy == "run_once":  # at most one of them ran: the latest; the rest are skipped
            assert statuses.count("succeeded") <= 1, statuses
            assert statuses[:-1] == ["skipped"] * (len(old) - 1), statuses
        elif policy == "skip":
            assert statuses == ["skipped"] * len(old), statuses
        else:
            assert statuses == ["succeeded"] * len(old), statuses
        skipped = Run.objects.filter(task=task, status="skipped")
        assert all("misfire" in run.error and run.attempt == 0 for run in skipped)
    executed = recorded_keys(records)
    assert executed and max(executed.values()) == 1, "an occurrence executed twice"
    window = Run.objects.filter(task__in=tasks.values(), scheduled_at__lte=until)
    for run in window:  # a skipped occurrence never executed; a succeeded one did, once
        assert (run.idempotency_key in executed) == (run.status == "succeeded"), run


@pytest.fixture
def fleet_env(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    env = process_env(SCHEDULER_HANDLER_MODULES="tests.handlers", TEST_RECORD_DIR=str(records))
    return env, records


def test_after_a_worker_outage_each_policy_holds(processes, fleet_env) -> None:
    env, records = fleet_env
    processes.start("runscheduler", env=env)
    workers = [processes.start("runworker", "--concurrency", "2", env=env) for _ in range(2)]
    owner = UserFactory()
    tasks = {policy: create(owner, policy, now=db_now()) for policy in POLICIES}
    wait_for(lambda: Run.objects.filter(status="succeeded").count() >= 6, timeout=30)

    for worker in workers:  # every worker down; the scheduler keeps planning
        worker.terminate()
        worker.wait(timeout=30)
    time.sleep(GRACE + 8)
    back = db_now()
    processes.start("runworker", "--concurrency", "2", env=env)
    until = back + timedelta(seconds=3)
    wait_for(lambda: db_now() > until and settled(list(tasks.values()), until), timeout=40)

    check_policies(tasks, back=back, until=until, records=records)


def test_in_a_saturated_pool_each_policy_holds(processes, fleet_env) -> None:
    env, records = fleet_env
    processes.start("runscheduler", env=env)
    processes.start("runworker", "--concurrency", "1", env=env)
    wait_for(lambda: Process.objects.filter(role="worker", stopped_at=None).exists(), timeout=30)
    owner = UserFactory()
    now = db_now()
    # One long run takes the only slot for 10 s, starting before the 1-second tasks' first.
    once = schedules.normalize({"type": "once"}, now=now)
    blocker = {
        "kind": "handler",
        "payload": {"name": "record", "args": {"sleep": 10}},
        "schedule": once,
        "priority": 9,
    }
    creation.create_task(owner=owner, data=blocker, now=now)
    wait_for(lambda: Run.objects.filter(status="running").exists(), timeout=20)
    tasks = {policy: create(owner, policy, now=db_now()) for policy in POLICIES}
    wait_for(lambda: Run.objects.filter(status="succeeded").count() >= 1, timeout=30)
    freed = Run.objects.get(status="succeeded", task__schedule_type="once").finished_at
    until = freed + timedelta(seconds=3)
    wait_for(lambda: db_now() > until and settled(list(tasks.values()), until), timeout=40)

    check_policies(tasks, back=freed, until=until, records=records)
