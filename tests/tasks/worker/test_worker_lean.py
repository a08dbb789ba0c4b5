"""A worker claims with the lean statement until it meets a keyed candidate, then with the full
one for FULL_CLAIM_SECONDS (tasks/worker/worker.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tasks.models import ConcurrencyKey, Run, Task
from tasks.transitions import claim
from tasks.worker import worker as worker_module
from tasks.worker.worker import FULL_CLAIM_SECONDS, Worker
from tests.factories import RunFactory, TaskFactory, UserFactory


def due(task: Task, *, ago: float) -> Run:
    at = datetime.now(UTC) - timedelta(seconds=ago)
    return RunFactory(task=task, scheduled_at=at, **task.requests)


@pytest.mark.django_db(transaction=True)
def test_the_worker_claims_lean_until_it_meets_a_keyed_run_then_full_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[bool] = []
    record_and_claim = claim.record_and_claim

    def recording(**kwargs):  # the real statement, with which variant it was asked for
        asked.append(kwargs["lean"])
        return record_and_claim(**kwargs)

    monkeypatch.setattr(claim, "record_and_claim", recording)
    worker = Worker(concurrency=8)
    worker.pool.shutdown()
    worker.pool.submit = lambda *args: None  # claimed runs are not executed here
    unkeyed = due(TaskFactory(priority=9), ago=2)
    worker.run_once()
    assert (asked, worker.full_until) == ([True], float("-inf"))

    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=5)
    keyed_task = TaskFactory(priority=5, owner=key.owner)
    keyed_task.concurrency_key = key
    keyed_task.save()
    keyed = due(keyed_task, ago=1)
    after = due(TaskFactory(priority=1), ago=5)
    worker.run_once()
    # The lean cycle stopped at the keyed run; the full claim took it and the run after it.
    assert asked == [True, True]
    assert set(Run.objects.filter(worker=worker.name).values_list("pk", flat=True)) == {
        unkeyed.pk,
        keyed.pk,
        after.pk,
    }
    assert worker.full_until > worker_module.time.monotonic() + FULL_CLAIM_SECONDS - 5

    due(TaskFactory(priority=3), ago=1)
    worker.run_once()
    assert asked == [True, True, False]
    worker.full_until = worker_module.time.monotonic()  # the while has passed
    worker.run_once()
    assert asked == [True, True, False, True]
