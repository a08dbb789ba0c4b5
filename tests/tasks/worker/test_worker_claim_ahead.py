"""How many runs a worker holds beyond its executing slots (TASKS_CLAIM_AHEAD)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from tasks.models import Run
from tasks.transitions import claim
from tasks.worker.worker import Worker
from tests.factories import RunFactory, TaskFactory


def worker(ahead: int = 32, wait: float = 0.05, concurrency: int = 4) -> Worker:
    with override_settings(TASKS_CLAIM_AHEAD=ahead, TASKS_CLAIM_AHEAD_WAIT_SECONDS=wait):
        w = Worker(concurrency=concurrency)
    w.pool.shutdown()
    return w


def test_a_new_worker_claims_only_what_it_can_start() -> None:
    assert worker().capacity == 4


def test_short_runs_are_held_ahead_up_to_the_limit() -> None:
    w = worker()
    for _ in range(20):
        w._observe(0.0005)
    assert w.capacity == 4 + 32


def test_long_runs_are_not_held_back_from_other_workers() -> None:
    w = worker()
    for _ in range(20):
        w._observe(2.0)
    assert w.capacity == 4


def test_held_runs_would_start_within_the_wait() -> None:
    w = worker(wait=0.05)
    for _ in range(50):
        w._observe(0.02)  # 4 slots finish 200 runs/s: 10 runs start within 50 ms
    assert w.capacity == 4 + 10


def test_the_pace_follows_a_change_in_run_length() -> None:
    w = worker()
    for _ in range(20):
        w._observe(0.0005)
    for _ in range(40):
        w._observe(1.0)
    assert w.capacity == 4


def test_claim_ahead_zero_turns_it_off() -> None:
    w = worker(ahead=0)
    w._observe(0.0001)
    assert w.capacity == 4


@pytest.mark.django_db
def test_a_batch_starts_due_runs_by_priority_and_future_runs_by_time() -> None:
    task = TaskFactory(payload={"name": "noop", "args": {}})
    now = datetime.now(UTC)
    low = RunFactory(task=task, priority=1, scheduled_at=now - timedelta(seconds=30))
    high = RunFactory(task=task, priority=9, scheduled_at=now - timedelta(seconds=1))
    later = RunFactory(task=task, priority=9, scheduled_at=now + timedelta(seconds=0.3))
    soon = RunFactory(task=task, priority=0, scheduled_at=now + timedelta(seconds=0.2))
    claimed = claim.claim_runs(worker="w", limit=10, prefetch_seconds=0.5, owner_cap=0)
    assert [r.id for r in claimed] == [high.id, low.id, soon.id, later.id]
    assert [r.priority for r in claimed] == [9, 1, 0, 9]
    assert Run.objects.filter(status="running").count() == 4
