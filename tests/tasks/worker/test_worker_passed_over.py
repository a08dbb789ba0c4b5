"""A worker whose claim passed over a concurrency key another claim held claims again after a
short pause, a few times in a row, then after its usual one (tasks/worker/worker.py,
PASSED_PAUSE_SECONDS)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.db import connection
from psycopg.conninfo import make_conninfo

from tasks.models import ConcurrencyKey, Run
from tasks.worker.worker import (
    PASSED_PAUSE_SECONDS,
    PASSED_RECLAIMS,
    RECLAIM_PAUSE_SECONDS,
    Worker,
)
from tests.factories import RunFactory, TaskFactory, UserFactory


def _conninfo() -> str:
    keys = {"host": "HOST", "port": "PORT", "user": "USER", "dbname": "NAME"}
    given = {k: connection.settings_dict[v] for k, v in keys.items()}
    return make_conninfo(**{k: v for k, v in given.items() if v})


@pytest.mark.django_db(transaction=True)
def test_a_key_held_by_another_claim_is_claimed_again_soon_then_as_usual() -> None:
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=10)
    task = TaskFactory(owner=key.owner)
    task.concurrency_key = key
    task.save()
    due = datetime.now(UTC) - timedelta(seconds=1)
    run = RunFactory(task=task, scheduled_at=due, **task.requests)
    worker = Worker(concurrency=2)
    worker.pool.shutdown()
    sleeps = []
    with psycopg.connect(_conninfo()) as other:  # another claim, holding the key's row
        other.execute("SELECT FROM tasks_concurrencykey WHERE id = %s FOR NO KEY UPDATE", [key.pk])
        for _ in range(PASSED_RECLAIMS + 1):
            worker.run_once()
            sleeps.append(worker._sleep_seconds())
        other.rollback()
    assert Run.objects.get(pk=run.pk).status == "scheduled"
    assert sleeps == [PASSED_PAUSE_SECONDS] * PASSED_RECLAIMS + [RECLAIM_PAUSE_SECONDS]
    assert worker.passes == PASSED_RECLAIMS + 1
    worker.pool.submit = lambda *args: None  # the run is claimed, not executed here
    worker.run_once()
    assert (Run.objects.get(pk=run.pk).status, worker.passes) == ("running", 0)
