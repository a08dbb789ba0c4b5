"""Expectations with real role processes: `late` reaches a webhook once with three reviewers
running and no worker; `too_fast` and `too_slow` (while the run still runs) from a worker's
handlers and a reviewer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.conf import settings

from tasks import expectations
from tasks.db import db_now
from tasks.models import Run, TaskHealth
from tests.conftest import process_env, wait_for
from tests.notifications.conftest import Receiver, serving, webhook_channel
from tests.tasks.recurring_support import recurring_task

ALERTS = ["late", "too_fast", "too_slow", "failing", "overdue", "recovered"]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with serving() as recv:
        yield recv


def role_env(**extra: str) -> dict[str, str]:
    # The pytest process encrypted the channel secret: the roles need the same key.
    return process_env(
        SCHEDULER_OUTBOUND_ALLOW="127.0.0.1",
        SCHEDULER_ENCRYPTION_KEY=settings.SCHEDULER_ENCRYPTION_KEY,
        **extra,
    )


def events(receiver: Receiver) -> list[str]:
    return [d["body"]["event"] for d in receiver.accepted]


@pytest.mark.processes
def test_late_reaches_the_webhook_once_with_three_reviewers(
    processes, receiver: Receiver, user
) -> None:
    channel = webhook_channel(receiver, user)
    now = db_now()
    task = recurring_task(
        user,
        {
            "type": "interval",
            "every": 1,
            "allow_every_second": True,
            "start_at": (now + timedelta(seconds=3)).isoformat(),
        },
        now=now,
        notify=[{"channel": str(channel.id), "events": ALERTS}],
        expect={"start_within": 2},
    )
    expectations.sync([task], now=now)
    env = role_env()
    processes.start("runscheduler", env=env)
    for _ in range(3):
        processes.start("runreviewer", env=env)
    processes.start("runnotifier", env=env)  # no worker: nothing starts, nothing finishes

    wait_for(lambda: receiver.accepted, timeout=30, interval=0.05)
    [delivery] = receiver.accepted
    run = Run.objects.get(pk=delivery["body"]["run"]["id"])
    # Raised once the run was start_within late, not when it started (it never does).
    assert delivery["arrived"] >= run.scheduled_at.timestamp() + 2
    assert run.status in ("scheduled", "waiting_for_resource") and run.started_at is None
    assert delivery["body"]["event"] == "late" and delivery["verified"]
    assert delivery["body"]["expectation"]["expect"] == {"start_within": 2}

    # Every later occurrence is late too; the task stays late and nobody is told again.
    time.sleep(4)
    assert (
        Run.objects.filter(task=task, scheduled_at__lt=db_now() - timedelta(seconds=2)).count() > 3
    )
    assert events(receiver) == ["late"]
    assert TaskHealth.objects.get(task=task).health == "late"


@pytest.mark.processes
def test_too_fast_and_too_slow_from_a_worker_and_a_reviewer(
    processes, receiver: Receiver, user
) -> None:
    channel = webhook_channel(receiver, user)
    notify = [{"channel": str(channel.id), "events": ALERTS}]
    now = db_now()
    once = {"type": "once", "run_at": now.isoformat()}
    fast = recurring_task(
        user,
        once,
        now=now,
        notify=notify,
        expect={"duration": {"min": 5}},
        payload={"name": "noop", "args": {}},
    )
    slow = recurring_task(
        user,
        once,
        now=now,
        notify=notify,
        expect={"duration": {"max": 2}},
        payload={"name": "sleep", "args": {"seconds": 6}},
    )
    expectations.sync([fast, slow], now=now)
    env = role_env()
    processes.start("runscheduler", env=env)
    processes.start("runworker", "--concurrency", "2", env=env)
    processes.start("runreviewer", env=env)

    wait_for(lambda: sorted(events(receiver)) == ["too_fast", "too_slow"], timeout=30)
    by_event = {d["body"]["event"]: d for d in receiver.accepted}
    assert by_event["too_fast"]["body"]["task"]["id"] == str(fast.id)
    assert by_event["too_slow"]["body"]["task"]["id"] == str(slow.id)
    # While it still runs: the 6 s sleep had not finished when the alert arrived.
    slow_run = Run.objects.get(task=slow)
    assert by_event["too_slow"]["body"]["run"]["status"] == "running"
    wait_for(lambda: Run.objects.get(task=slow).status == "succeeded", timeout=20)
    slow_run.refresh_from_db()
    assert by_event["too_slow"]["arrived"] < slow_run.finished_at.timestamp()
    assert sorted(events(receiver)) == ["too_fast", "too_slow"]
