"""Misfire policies with real processes: after a scheduler outage and after a pause.

Every missed occurrence leaves a run: `run_once` runs the latest and records the rest
`skipped`, `skip` records them all `skipped`, `run_all` runs them all (at most RUN_ALL_CAP).
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from tasks import occurrences, schedules
from tasks.db import db_now
from tasks.models import TERMINAL_STATUSES, Run, Task
from tasks.transitions import creation, lifecycle
from tests.conftest import process_env, wait_for
from tests.factories import UserFactory
from tests.tasks.recurring_support import fire_times_until, iso, recurring_task

pytestmark = pytest.mark.processes

GRACE = 5.0  # TASKS_MISFIRE_GRACE_SECONDS of the fleet
NOOP = {"name": "noop", "args": {}}
POLICIES = ("run_once", "skip", "run_all")


def settled(tasks: list[Task], until: object) -> bool:
    """Every occurrence up to `until` has a run and each of those runs has finished."""
    for task in tasks:
        runs = Run.objects.filter(task=task, scheduled_at__lte=until)
        expected = len(fire_times_until(task.schedule, until))
        if runs.count() < expected or runs.exclude(status__in=TERMINAL_STATUSES).exists():
            return False
    return True


def record(task: Task, until: object) -> dict[object, str]:
    runs = Run.objects.filter(task=task, scheduled_at__lte=until)
    return dict(runs.order_by("scheduled_at").values_list("scheduled_at", "status"))


def test_each_misfire_policy_after_ten_minutes_without_a_scheduler(processes):
    owner = UserFactory()
    now = db_now()
    # The tasks were defined 10 min 15 s ago and no scheduler has run since: their first
    # occurrence is that old (as if next_unplanned_at had fallen behind during an outage).
    began = now.replace(microsecond=0) - timedelta(minutes=10, seconds=15)
    tasks = {
        policy: recurring_task(
            owner,
            {"type": "interval", "every": 30, "start_at": iso(began), "misfire": policy},
            now=now,
            payload=NOOP,
        )
        for policy in POLICIES
    }
    capped = recurring_task(
        owner,
        {
            "type": "interval",
            "every": 1,
            "allow_every_second": True,
            "start_at": iso(began),
            "misfire": "run_all",
        },
        now=now,
        payload=NOOP,
    )
    env = process_env(TASKS_MISFIRE_GRACE_SECONDS=str(GRACE))
    processes.start("runscheduler", env=env)
    processes.start("runworker", "--concurrency", "8", env=env)

    wait_for(lambda: settled([*tasks.values(), capped], now), timeout=60, interval=0.5)

    # Every 30 s from 10 min 15 s ago: 21 occurrences, all missed (the last is 15 s old).
    missed = fire_times_until(tasks["run_once"].schedule, now)
    assert len(missed) == 21
    expected = {
        "run_once": {at: "skipped" for at in missed[:-1]} | {missed[-1]: "succeeded"},
        "skip": dict.fromkeys(missed, "skipped"),
        "run_all": dict.fromkeys(missed, "succeeded"),
    }
    for policy, task in tasks.items():
        assert record(task, now) == expected[policy], policy
    # The record of a missed occurrence says why it did not run.
    for run in Run.objects.filter(status="skipped"):
        assert "misfire" in run.error
        assert run.finished_at is not None

    # run_all is capped: of some 610 missed occurrences, the latest RUN_ALL_CAP ran.
    planned_at = Run.objects.filter(task=capped, status="skipped").first().finished_at
    cutoff = planned_at - timedelta(seconds=GRACE)
    until = planned_at + timedelta(seconds=2)
    wait_for(lambda: db_now() > until and settled([capped], until), timeout=30, interval=0.5)
    history = record(capped, until)
    assert list(history) == fire_times_until(capped.schedule, until), "no silent gap"
    missed_capped = [at for at in history if at < cutoff]
    ran = [at for at in missed_capped if history[at] == "succeeded"]
    assert len(missed_capped) > 600
    # The latest ones ran, at most RUN_ALL_CAP. The cap applies again when a worker claims the
    # catch-up: occurrences within the grace when planned may be late by then, and
    # count among the latest RUN_ALL_CAP late ones, so a few of planning's 100 may be skipped.
    assert ran == missed_capped[len(missed_capped) - len(ran) :]
    assert occurrences.RUN_ALL_CAP - 2 * GRACE <= len(ran) <= occurrences.RUN_ALL_CAP
    assert {history[at] for at in missed_capped[: -len(ran)]} == {"skipped"}
    # Late, but within the grace period: not missed, so these run whatever the policy.
    late = [history[at] for at in history if at >= cutoff]
    assert len(late) >= 7 and set(late) == {"succeeded"}


def test_pause_stops_new_occurrences_and_resume_skips_what_it_covered(processes, settings):
    # The test process resumes (and so plans inline) with the fleet's grace period.
    settings.TASKS_MISFIRE_GRACE_SECONDS = 1.0
    env = process_env(TASKS_MISFIRE_GRACE_SECONDS="1")
    processes.start("runscheduler", env=env)
    processes.start("runworker", "--concurrency", "4", env=env)
    owner = UserFactory()
    created = db_now()
    tasks = {}
    for policy in POLICIES:
        schedule = schedules.normalize(
            {"type": "interval", "every": 2, "misfire": policy}, now=created
        )
        data = {"kind": "handler", "payload": NOOP, "schedule": schedule}
        tasks[policy], _ = creation.create_task(owner=owner, data=data, now=created)
    wait_for(lambda: Run.objects.filter(status="succeeded").count() >= 6, timeout=30)

    paused_at = db_now()
    for policy, task in tasks.items():
        tasks[policy] = lifecycle.pause_task(task=task, now=paused_at)
    time.sleep(9)  # about four occurrences pass while paused
    resumed_at = db_now()
    for policy, task in tasks.items():
        tasks[policy] = lifecycle.resume_task(task=task, now=resumed_at)
    until = resumed_at + timedelta(seconds=4)
    wait_for(lambda: db_now() > until and settled(list(tasks.values()), until), timeout=30)

    # A run claimed just before the pause may start up to the prefetch window later.
    quiet_from = paused_at + timedelta(seconds=settings.TASKS_PREFETCH_SECONDS + 0.1)
    started_while_paused = Run.objects.filter(started_at__gt=quiet_from, started_at__lt=resumed_at)
    assert not started_while_paused.exists(), "pause stops new occurrences"
    for policy, task in tasks.items():
        history = record(task, until)
        assert list(history) == fire_times_until(task.schedule, until), "no silent gap"
        missed = [at for at in history if quiet_from < at < resumed_at - timedelta(seconds=1)]
        assert len(missed) >= 3, history
        # Whatever the misfire policy: what fell inside the pause is skipped, not run at once.
        assert [history[at] for at in missed] == ["skipped"] * len(missed), policy
        # Resume continues from now: every occurrence after it runs.
        assert {history[at] for at in history if at >= resumed_at} == {"succeeded"}, policy
