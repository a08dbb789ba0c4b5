"""The recorded start of a run: on the database clock, never after the outcome it belongs to."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.db import connection

from tasks.db import db_now
from tasks.models import Attempt, RateKey, Run
from tasks.worker.worker import Worker
from tests.factories import RunFactory, TaskFactory
from tests.handlers import BODY_STARTS

HOLD_SECONDS = 1.0


@pytest.mark.django_db(transaction=True)
def test_a_claim_that_waited_for_a_key_row_records_the_start_when_it_began() -> None:
    task = TaskFactory(payload={"name": "noop", "args": {}})
    # A rate key's row: a claim waits for another claim's lock on it (a concurrency key's row
    # another claim holds is passed over, not waited for).
    key = RateKey.objects.create(owner=task.owner, name="api", rate_limit=100, per_seconds=1)
    run = RunFactory(
        task=task, rate_key_id=key.pk, scheduled_at=datetime.now(UTC) - timedelta(seconds=1)
    )
    locked, done = threading.Event(), threading.Event()
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)

    def hold_the_key_row() -> None:
        # Another claim's lock on the key's row: this worker's claim waits for it, and its
        # clock_timestamp() is taken after the wait.
        with psycopg.connect(**params) as other:
            other.execute("SELECT FROM tasks_ratekey WHERE id = %s FOR UPDATE", [key.pk])
            locked.set()
            time.sleep(HOLD_SECONDS)
        done.set()

    holder = threading.Thread(target=hold_the_key_row)
    holder.start()
    assert locked.wait(10)
    worker = Worker(concurrency=1)
    try:
        worker.run_once()  # waits on the key row, then claims and starts the run
        assert done.is_set(), "the claim waited for the lock"
        deadline = time.monotonic() + 10
        while Run.objects.get(pk=run.pk).status == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
            worker.run_once()  # records the outcome
    finally:
        holder.join()
        worker.pool.shutdown()

    recorded = Run.objects.get(pk=run.pk)
    attempt = Attempt.objects.get(run_id=run.pk)
    assert recorded.status == "succeeded"
    assert recorded.started_at <= recorded.finished_at, "started after it finished"
    assert attempt.started_at <= attempt.finished_at
    # Anchored at the claim's send, the start read late by the whole wait for the lock.
    assert attempt.finished_at - attempt.started_at < timedelta(seconds=HOLD_SECONDS / 2)


@pytest.mark.django_db(transaction=True)
def test_runs_claimed_ahead_start_on_the_database_clock_never_before_their_time() -> None:
    # The database runs on this host: its clock_timestamp() and time.time() are one clock.
    task = TaskFactory(payload={"name": "body_start", "args": {}})
    now = db_now()
    runs = [
        RunFactory(task=task, scheduled_at=now + timedelta(seconds=0.25 + 0.05 * i))
        for i in range(4)
    ]
    worker = Worker(concurrency=4)
    try:
        worker._sleep_seconds()  # an idle worker asks when the next run is due: a clock reading
        worker.run_once()  # claims the four ahead of their time (the prefetch window)
        assert Run.objects.filter(status="running").count() == 4
        deadline = time.monotonic() + 10
        while Run.objects.filter(status="running").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
            worker.run_once()  # records the outcomes
    finally:
        worker.pool.shutdown()

    for run in runs:
        attempt = Attempt.objects.get(run_id=run.pk)
        began = BODY_STARTS[str(run.pk)]
        assert attempt.outcome == "succeeded"
        assert began >= run.scheduled_at.timestamp(), "the body began before its time"
        assert attempt.started_at >= run.scheduled_at, "recorded as started before its time"
        # Recorded never later than it began (as the database clock read then).
        assert attempt.started_at.timestamp() <= began + 1e-4
