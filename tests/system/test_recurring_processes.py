"""Recurring tasks with real processes: three schedulers, three workers, 100+ tasks, 30 s.

Every occurrence in the window is planned once, executed once and started on time, with no
leader among the schedulers. Run with `pytest -s` to see the lateness figures.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import timedelta

import pytest

from bench.recurring import CRONS, INTERVALS
from tasks.db import TASK_CHANGED_CHANNEL, db_now, notify
from tasks.models import TERMINAL_STATUSES, Attempt, Process, Run, Task
from tests.conftest import process_env, wait_for
from tests.factories import UserFactory
from tests.tasks.recurring_support import (
    describe,
    fire_times_until,
    iso,
    lateness,
    recorded_keys,
    recurring_task,
)

pytestmark = pytest.mark.processes

WINDOW = 30.0  # six 5 s look-aheads: every scheduler plans, and competes, several times
LEAD = 3.0  # seconds from creating the tasks to their first occurrence
# Second-level crons have a wildcard hour, so they run on absolute time in any zone.
ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe")


def build_tasks(owner: object, t0: object) -> list[Task]:
    """60 interval tasks (1-3 s, phases spread over the second) and 40 six-field crons."""
    now = db_now()
    tasks = []
    for i in range(60):
        start = t0 + timedelta(milliseconds=(i * 37) % 1000)
        raw = {
            "type": "interval",
            "every": INTERVALS[i % 3],
            "start_at": iso(start),
            "allow_every_second": True,  # the first interval is 1 s
        }
        tasks.append(recurring_task(owner, raw, now=now, name=f"interval-{i}"))
    for i in range(40):
        raw = {
            "type": "cron",
            "expression": CRONS[i % len(CRONS)],
            "timezone": ZONES[i % len(ZONES)],
            "start_at": iso(t0),
            "allow_every_second": True,  # the first expression fires every second
        }
        tasks.append(recurring_task(owner, raw, now=now, name=f"cron-{i}"))
    return tasks


def test_three_schedulers_run_every_occurrence_once_and_on_time(processes, tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    # A short look-ahead keeps all three schedulers planning all the time, competing for rows.
    env = process_env(
        SCHEDULER_HANDLER_MODULES="tests.handlers",
        TEST_RECORD_DIR=str(records),
        TASKS_LOOKAHEAD_SECONDS="5",
    )
    for _ in range(3):
        processes.start("runscheduler", env=env)
    for _ in range(3):
        processes.start("runworker", "--concurrency", "4", env=env)
    # Idle workers: the window opens once every process is up (its heartbeat row exists).
    wait_for(lambda: Process.objects.filter(stopped_at=None).count() == 6, timeout=60)
    t0 = db_now().replace(microsecond=0) + timedelta(seconds=LEAD)
    end = t0 + timedelta(seconds=WINDOW)
    tasks = build_tasks(UserFactory(), t0)
    notify(TASK_CHANGED_CHANNEL)  # as the API does after a change: schedulers wake at once
    expected = {task.pk: fire_times_until(task.schedule, end) for task in tasks}
    total = sum(len(times) for times in expected.values())
    assert total > 1400

    wait_for(lambda: db_now() > end, timeout=LEAD + WINDOW + 20, interval=1.0)
    in_window = Run.objects.filter(scheduled_at__lte=end)
    try:
        wait_for(lambda: not in_window.exclude(status__in=TERMINAL_STATUSES).exists(), timeout=20)
    except AssertionError:
        pass  # the assertions below say what is missing

    runs = list(in_window)
    by_task: dict[object, list] = defaultdict(list)
    for run in runs:
        by_task[run.task_id].append(run.scheduled_at)
    missing_or_extra = {
        pk: (len(times), len(by_task[pk]))
        for pk, times in expected.items()
        if sorted(by_task[pk]) != times
    }
    assert not missing_or_extra, f"(expected, planned) per task: {missing_or_extra}"
    statuses = Counter(run.status for run in runs)
    assert statuses == {"succeeded": total}, statuses
    # The unique key makes a duplicate row impossible; the record shows none *executed* twice.
    executed = recorded_keys(records)
    twice = {key: n for key, n in executed.items() if n > 1}
    assert not twice, f"executed more than once: {list(twice.items())[:5]}"
    assert {run.idempotency_key for run in runs} <= set(executed)
    attempts = Attempt.objects.filter(run__in=[run.pk for run in runs])
    assert attempts.count() == total
    assert set(attempts.values_list("number", "outcome")) == {(1, "succeeded")}

    stats = lateness(runs)
    planners = {
        log.name: log.read_text().count("planned=")
        for log in sorted(tmp_path.glob("runscheduler-*.log"))
    }
    workers = Counter(run.worker.split(":")[2] for run in runs)
    print(f"\n3 schedulers, 3 workers x 4, {len(tasks)} tasks, {WINDOW:.0f} s: {describe(stats)}")
    print(f"planning passes per scheduler: {planners}; runs per worker pid: {dict(workers)}")
    assert stats["early"] == 0, "no run starts before its scheduled_at (jitter 0)"
    assert stats["p99"] < 1.0, describe(stats)
    assert all(planners.values()), f"every scheduler planned, with no leader: {planners}"
    assert len(workers) == 3
