"""The worker's prepared statements are planned again once the tables they read have grown:
a generic plan made on a nearly empty queue is not kept for the connection's life."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from tasks import schedules
from tasks.transitions import claim
from tasks.transitions.creation import create_tasks
from tasks.worker.worker import Worker
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def generic_plans() -> Iterator[None]:
    # As runworker's connections (generic_plans): one plan per prepared statement, kept. The
    # queue is a new one, statistics included (earlier tests leave pages and statistics).
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE tasks_run, tasks_task CASCADE")
        cursor.execute("SET plan_cache_mode = force_generic_plan")
    try:
        yield
    finally:
        connection.close()  # the next test's connection has neither the mode nor the plans


def tasks_due(owner: Any, n: int, *, at: datetime) -> None:
    item = {
        "kind": "handler",
        "payload": {"name": "noop", "args": {}},
        "schedule": schedules.normalize({"type": "once", "run_at": at.isoformat()}, now=at),
    }
    create_tasks(owner=owner, items=[dict(item) for _ in range(n)], now=timezone.now())


def run_read_sequentially() -> int:
    """Rows of tasks_run this connection has read by sequential scans so far."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")  # flushed as this statement ends
    with connection.cursor() as cursor:
        cursor.execute("SELECT seq_tup_read FROM pg_stat_user_tables WHERE relname = 'tasks_run'")
        return int(cursor.fetchone()[0])


def claim_and_record(worker: Worker) -> int:
    """Claim the run due now and record its outcome, as the worker's cycle does (one variant
    of the statement each time); the rows of tasks_run the recording read sequentially."""
    [run] = claim.record_and_claim(
        worker=worker.name,
        outcomes=[],
        limit=2,
        prefetch_seconds=0.5,
        owner_cap=0,
        floor=worker.claim_floor(),
    )[1]
    outcome = claim.Outcome(
        run_id=run.id,
        attempt=run.attempt,
        status="succeeded",
        attempt_outcome="succeeded",
        started_at=run.claimed_at,
    )
    before = run_read_sequentially()
    recorded, _ = claim.record_and_claim(
        worker=worker.name,
        outcomes=[outcome],
        limit=2,
        prefetch_seconds=0.5,
        owner_cap=0,
        floor=worker.claim_floor(),
    )
    assert [r[0] for r in recorded] == [run.id]
    return run_read_sequentially() - before


def prepared() -> int:
    """Statements prepared on this connection (psycopg's, at the protocol level)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE NOT from_sql")
        return int(cursor.fetchone()[0])


def test_a_plan_made_on_a_nearly_empty_queue_is_made_again_once_the_queue_has_grown(
    generic_plans: None,
) -> None:
    owner = UserFactory()
    worker = Worker(concurrency=1, name="plans-test")
    now = timezone.now()
    tasks_due(owner, 1, at=now)
    claim_and_record(worker)  # planned on a queue of one run: a sequential scan is cheapest
    assert prepared() > 0
    worker.floor_found = float("-inf")  # a second later: the floor is found again
    worker.claim_floor()
    assert prepared() > 0  # the same size: the plans are kept

    # The queue grows (thousands of runs due within the lookahead) on the worker's connection.
    tasks_due(owner, 3000, at=now + timedelta(seconds=20))
    worker.floor_found = float("-inf")
    worker.plans_sized()
    # Its statements are dropped, so each is planned again, for the queue's size now. Which
    # plan PostgreSQL then makes depends on the statistics earlier tests left, so the rows it
    # reads are not asserted here (bench/NOTEBOOK.md has them, in the section named
    # "Start lateness behind the commit before the day's changes").
    assert prepared() == 0
    tasks_due(owner, 1, at=now)
    claim_and_record(worker)
    assert prepared() > 0
