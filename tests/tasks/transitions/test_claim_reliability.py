"""Reliability, in process: retries, timeouts, fencing, idempotency keys, priority and capacity."""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest
from django.db import connection, transaction
from django.test import override_settings
from rest_framework.test import APIClient

from tasks.models import Attempt, Run
from tasks.retries import backoff_seconds
from tasks.transitions.claim import (
    ClaimedRun,
    Outcome,
    claim_runs,
    record_outcomes,
    renew_heartbeats,
)
from tasks.transitions.rescue import flag_starved_runs, rescue_stuck_runs
from tasks.transitions.run_actions import cancel_run
from tasks.worker.worker import Worker
from tests.conftest import database_url
from tests.factories import RunFactory, TaskFactory, UserFactory

TERMINAL = {"succeeded", "failed", "cancelled", "skipped"}


def drive(worker: Worker, until: Callable[[], bool], *, timeout: float) -> None:
    """Call `run_once` in a loop with short sleeps until `until()` holds."""
    deadline = time.monotonic() + timeout
    while not until():
        assert time.monotonic() < deadline, "the in-process worker did not get there in time"
        worker.run_once()
        time.sleep(0.01)


def status_of(run: Run) -> str:
    return Run.objects.values_list("status", flat=True).get(pk=run.pk)


def succeeded(outcome_run: ClaimedRun) -> Outcome:
    return Outcome(
        run_id=outcome_run.id,
        attempt=outcome_run.attempt,
        status="succeeded",
        attempt_outcome="succeeded",
        started_at=outcome_run.claimed_at,
    )


def claim(worker: str, limit: int = 10, owner_cap: int = 100) -> list[ClaimedRun]:
    return claim_runs(worker=worker, limit=limit, prefetch_seconds=0, owner_cap=owner_cap)


# --- 1. retries -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_failing_handler_is_retried_until_attempts_are_spent_then_failed() -> None:
    task = TaskFactory(
        payload={"name": "fail", "args": {"message": "boom"}},
        max_attempts=3,
        retry_backoff_base=0.01,
        retry_backoff_cap=0.02,
    )
    run = RunFactory(task=task)
    worker = Worker(concurrency=2)
    try:
        drive(worker, lambda: status_of(run) in TERMINAL, timeout=15)
    finally:
        worker.pool.shutdown()

    run.refresh_from_db()
    assert (run.status, run.attempt) == ("failed", 3)
    assert run.finished_at is not None
    attempts = list(Attempt.objects.filter(run=run).order_by("number"))
    assert [a.number for a in attempts] == [1, 2, 3]
    assert {a.outcome for a in attempts} == {"failed"}
    assert all("boom" in a.error for a in attempts)
    assert all(a.started_at and a.finished_at >= a.started_at for a in attempts)
    # Each retry started after the previous attempt finished (backoff, never overlapping).
    for before, after in itertools.pairwise(attempts):
        assert after.started_at >= before.finished_at


@pytest.mark.parametrize("base,cap", [(0.01, 0.02), (2.0, 600.0), (1.0, 1.0), (0.5, 1e9)])
def test_backoff_is_full_jitter_within_the_exponential_ceiling(base: float, cap: float) -> None:
    rng = random.Random(4)
    for attempt in range(1, 80):
        ceiling = min(cap, base * 2 ** (attempt - 1))
        samples = [backoff_seconds(attempt, base=base, cap=cap, rng=rng) for _ in range(60)]
        assert all(0 <= s <= ceiling for s in samples), (attempt, ceiling, samples)
        # Full jitter covers the whole window, not just a corner of it.
        assert max(samples) > ceiling * 0.7 and min(samples) < ceiling * 0.3
    # Without an explicit rng as well.
    assert 0 <= backoff_seconds(3, base=base, cap=cap) <= min(cap, base * 4)


def test_retry_endpoint_brings_a_dead_lettered_run_back(api: APIClient, user) -> None:
    task = TaskFactory(owner=user, max_attempts=3, payload={"name": "fail", "args": {}})
    now = datetime.now(UTC)
    run = RunFactory(
        task=task, status="failed", attempt=3, started_at=now, finished_at=now, error="boom"
    )

    response = api.post(f"/api/v1/runs/{run.id}/retry")

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "scheduled"
    run.refresh_from_db()
    assert (run.status, run.finished_at, run.max_attempts) == ("scheduled", None, 6)
    # It is claimable again, as attempt 4.
    [claimed] = claim("w-retry")
    assert (claimed.id, claimed.attempt) == (run.id, 4)


# --- 2. timeouts ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_handler_past_its_timeout_is_recorded_timed_out_and_retried_then_failed() -> None:
    task = TaskFactory(
        payload={"name": "sleep", "args": {"seconds": 5}},
        timeout=0.2,
        max_attempts=2,
        retry_backoff_base=0.01,
        retry_backoff_cap=0.01,
    )
    run = RunFactory(task=task)
    worker = Worker(concurrency=2)
    started = time.monotonic()
    try:
        drive(worker, lambda: Attempt.objects.filter(run=run).exists(), timeout=3)
        first_after = time.monotonic() - started
        assert first_after < 1.5, f"timed out attempt recorded after {first_after:.2f}s"
        first = Attempt.objects.get(run=run)
        assert (first.number, first.outcome) == (1, "timed_out")
        assert status_of(run) in ("scheduled", "running")  # back to the queue (maybe reclaimed)
        drive(worker, lambda: status_of(run) in TERMINAL, timeout=3)
    finally:
        worker.pool.shutdown(wait=False, cancel_futures=True)

    run.refresh_from_db()
    assert run.status == "failed"
    assert list(
        Attempt.objects.filter(run=run).order_by("number").values_list("number", "outcome")
    ) == [
        (1, "timed_out"),
        (2, "timed_out"),
    ]


# --- 3. heartbeats, rescue, fencing ---------------------------------------------------------


def make_stale(run_id: object) -> None:
    Run.objects.filter(pk=run_id).update(heartbeat_at=datetime.now(UTC) - timedelta(minutes=5))


@pytest.mark.django_db
def test_late_outcome_of_a_rescued_run_is_dropped() -> None:
    run = RunFactory(task=TaskFactory(max_attempts=3))
    [held] = claim("w-a")
    assert (held.id, held.attempt) == (run.id, 1)
    make_stale(run.id)

    rescued = rescue_stuck_runs(after_seconds=0)
    assert (rescued.rescued, rescued.failed) == (1, 0)
    recorded = record_outcomes(worker="w-a", outcomes=[succeeded(held)])

    assert recorded == []
    run.refresh_from_db()
    assert (run.status, run.worker, run.heartbeat_at) == ("scheduled", "", None)
    assert "stopped heart-beating" in run.error
    assert list(Attempt.objects.filter(run=run).values_list("number", "outcome", "worker")) == [
        (1, "rescued", "w-a")
    ]


@pytest.mark.django_db
def test_late_outcome_cannot_overwrite_the_next_attempt_of_another_worker() -> None:
    run = RunFactory(task=TaskFactory(max_attempts=3))
    [old] = claim("w-a")
    make_stale(run.id)
    rescue_stuck_runs(after_seconds=0)
    [new] = claim("w-b")
    assert (new.id, new.attempt) == (run.id, 2)

    assert record_outcomes(worker="w-a", outcomes=[succeeded(old)]) == []
    run.refresh_from_db()
    assert (run.status, run.worker, run.attempt) == ("running", "w-b", 2)

    assert [r[0] for r in record_outcomes(worker="w-b", outcomes=[succeeded(new)])] == [run.id]
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert list(
        Attempt.objects.filter(run=run).order_by("number").values_list("number", "outcome")
    ) == [(1, "rescued"), (2, "succeeded")]


@pytest.mark.django_db
def test_rescue_with_attempts_spent_fails_the_run() -> None:
    run = RunFactory(task=TaskFactory(max_attempts=1))
    [held] = claim("w-a")
    make_stale(run.id)

    assert rescue_stuck_runs(after_seconds=0).failed == 1

    run.refresh_from_db()
    assert run.status == "failed"
    assert run.finished_at is not None
    assert record_outcomes(worker="w-a", outcomes=[succeeded(held)]) == []
    assert status_of(run) == "failed"
    assert list(Attempt.objects.filter(run=run).values_list("outcome", flat=True)) == ["rescued"]


@pytest.mark.django_db
def test_fresh_heartbeats_are_not_rescued() -> None:
    run = RunFactory(task=TaskFactory())
    claim("w-a")

    assert rescue_stuck_runs(after_seconds=60).rescued == 0
    assert status_of(run) == "running"


@pytest.mark.django_db
def test_renew_heartbeats_answers_only_the_runs_still_held() -> None:
    task = TaskFactory(max_attempts=3)
    now = datetime.now(UTC)
    for i in range(3):
        RunFactory(task=task, scheduled_at=now - timedelta(seconds=i))
    taken, cancelled, kept = (c.id for c in claim("w-a", limit=3))
    elsewhere = RunFactory(task=TaskFactory())
    assert [c.id for c in claim("w-b")] == [elsewhere.id]
    # The reviewer takes one back, a user cancels another.
    make_stale(taken)
    assert rescue_stuck_runs(after_seconds=60).rescued == 1
    cancel_run(run=Run.objects.get(pk=cancelled), now=datetime.now(UTC))
    before = Run.objects.get(pk=kept).heartbeat_at

    with connection.cursor() as cursor:
        held = renew_heartbeats(cursor, worker="w-a", run_ids=[taken, cancelled, kept])

    assert held == {kept}
    assert Run.objects.get(pk=kept).heartbeat_at > before
    assert (status_of(Run(pk=taken)), status_of(Run(pk=cancelled))) == ("scheduled", "cancelled")


# --- 4. idempotency ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_idempotency_key_is_stable_across_retries_and_rescues() -> None:
    scheduled = datetime(2030, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    task = TaskFactory(max_attempts=5)
    run = RunFactory(task=task, scheduled_at=scheduled, execute_at=datetime.now(UTC))
    expected = f"{task.id}:2030-01-02T03:04:05.678000Z"

    [first] = claim("w-a")
    retry = Outcome(
        run_id=first.id,
        attempt=1,
        status="scheduled",
        attempt_outcome="failed",
        started_at=first.claimed_at,
        error="boom",
    )
    assert record_outcomes(worker="w-a", outcomes=[retry])
    [second] = claim("w-b")
    make_stale(run.id)
    rescue_stuck_runs(after_seconds=0)
    [third] = claim("w-c")

    assert [c.attempt for c in (first, second, third)] == [1, 2, 3]
    assert {c.id for c in (first, second, third)} == {run.id}
    assert first.idempotency_key == second.idempotency_key == third.idempotency_key == expected


@pytest.mark.django_db(transaction=True)
def test_payload_receives_the_same_key_after_a_rescue(monkeypatch, tmp_path: Path) -> None:
    import tests.handlers  # noqa: F401  registers `record`

    monkeypatch.setenv("TEST_RECORD_DIR", str(tmp_path))
    task = TaskFactory(payload={"name": "record", "args": {}}, max_attempts=3)
    run = RunFactory(task=task)
    [dead] = claim("w-dead")  # a worker that dies before recording anything
    make_stale(run.id)
    rescue_stuck_runs(after_seconds=0)
    worker = Worker(concurrency=1)
    try:
        drive(worker, lambda: status_of(run) in TERMINAL, timeout=10)
    finally:
        worker.pool.shutdown()

    assert status_of(run) == "succeeded"
    lines = [line.split() for f in tmp_path.iterdir() for line in f.read_text().splitlines()]
    assert lines == [[dead.idempotency_key, str(run.id), "2"]]
    assert dead.idempotency_key.startswith(f"{task.id}:") and dead.idempotency_key.endswith("Z")


# --- 5. priority and capacity -----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("ahead", [0, 32])
def test_under_contention_higher_priority_starts_first(
    ahead: int, monkeypatch, tmp_path: Path
) -> None:
    import tests.handlers  # noqa: F401  registers `record`

    # The order the handler ran in, as it wrote it: runs a fraction of a millisecond apart
    # claimed in different batches can have their recorded started_at a round trip apart.
    monkeypatch.setenv("TEST_RECORD_DIR", str(tmp_path))
    task = TaskFactory(payload={"name": "record", "args": {}})
    rng = random.Random(5)
    now = datetime.now(UTC)
    runs = [
        RunFactory(task=task, priority=rng.randint(0, 9), scheduled_at=now - timedelta(seconds=i))
        for i in range(40)
    ]
    assert len({r.priority for r in runs}) > 5
    with override_settings(TASKS_CLAIM_AHEAD=ahead):
        worker = Worker(concurrency=1)
    try:
        drive(worker, lambda: not Run.objects.exclude(status="succeeded").exists(), timeout=30)
    finally:
        worker.pool.shutdown()

    priority = dict(Run.objects.values_list("id", "priority"))
    [log] = tmp_path.iterdir()
    order = [priority[UUID(line.split()[1])] for line in log.read_text().splitlines()]
    assert len(order) == 40
    assert order == sorted(order, reverse=True), order


def busy_and_quiet_owner() -> tuple[Any, Any, Run]:
    """Owner A with 5 due runs at priority 9, owner B with one at priority 0 (B's run)."""
    a, b = UserFactory(), UserFactory()
    now = datetime.now(UTC)
    task_a, task_b = TaskFactory(owner=a, priority=9), TaskFactory(owner=b, priority=0)
    for i in range(5):
        RunFactory(task=task_a, scheduled_at=now - timedelta(seconds=i))
    run_b = RunFactory(task=task_b)
    return a, b, run_b


@pytest.mark.django_db
def test_owner_cap_holds_within_one_claim_batch() -> None:
    a, _, run_b = busy_and_quiet_owner()

    with override_settings(TASKS_OWNER_MAX_RUNNING=2):
        claimed = claim("w-a", limit=10, owner_cap=2)

    owners = [Run.objects.get(pk=c.id).owner_id for c in claimed]
    assert run_b.id in {c.id for c in claimed}
    assert owners.count(a.id) <= 2, owners


@pytest.mark.django_db
def test_owner_at_the_cap_gets_nothing_while_others_are_served() -> None:
    a, _, run_b = busy_and_quiet_owner()
    assert len(claim("w-a", limit=2, owner_cap=2)) == 2  # A's two highest-priority runs

    claimed = claim("w-b", limit=10, owner_cap=2)

    assert [c.id for c in claimed] == [run_b.id]
    assert Run.objects.filter(owner=a, status="running").count() == 2
    # With the cap lifted, A's remaining runs are claimable.
    assert len(claim("w-c", limit=10, owner_cap=0)) == 3


@pytest.mark.django_db
def test_starved_run_is_flagged_waiting_for_resource_and_stays_claimable(
    api: APIClient, user
) -> None:
    task = TaskFactory(owner=user)
    now = datetime.now(UTC)
    starved = RunFactory(task=task, scheduled_at=now - timedelta(seconds=20))
    recent = RunFactory(task=task, scheduled_at=now - timedelta(seconds=2))

    assert flag_starved_runs(sla_seconds=10) == 1

    assert status_of(starved) == "waiting_for_resource"
    assert status_of(recent) == "scheduled"
    body = api.get(f"/api/v1/runs/{starved.id}").json()
    assert body["status"] == "waiting_for_resource"
    claimed = claim("w-a", limit=10)
    assert starved.id in {c.id for c in claimed}
    assert status_of(starved) == "running"


@pytest.mark.django_db(transaction=True)
def test_flagging_starved_runs_skips_runs_a_claim_holds_a_batch_at_a_time() -> None:
    # Under a backlog, an UPDATE that waited on a claim's row lock would hold every due run it
    # had locked so far out of all claims meanwhile.
    task = TaskFactory()
    now = datetime.now(UTC)
    held = RunFactory(task=task, scheduled_at=now - timedelta(seconds=40))
    oldest, older, old = (
        RunFactory(task=task, scheduled_at=now - timedelta(seconds=s)) for s in (30, 25, 20)
    )
    with psycopg.connect(database_url()) as other:  # a claim's transaction, still open
        other.execute("SELECT 1 FROM tasks_run WHERE id = %s FOR UPDATE", [held.pk])
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL lock_timeout = '2s'")  # waiting fails the test, not hangs
            assert flag_starved_runs(sla_seconds=10, batch=2) == 2
        assert {status_of(r) for r in (oldest, older)} == {"waiting_for_resource"}
        assert status_of(old) == "scheduled"  # the next pass's
        assert flag_starved_runs(sla_seconds=10, batch=2) == 1
        assert status_of(old) == "waiting_for_resource"
        assert status_of(held) == "scheduled"
    assert flag_starved_runs(sla_seconds=10, batch=2) == 1  # released: flagged on the next pass
    assert status_of(held) == "waiting_for_resource"


@pytest.mark.django_db
def test_a_backfilled_run_is_starved_only_the_sla_after_it_was_made(user) -> None:
    """Due days ago by design: a backfill just made is not late, and sends no `stuck`."""
    task = TaskFactory(owner=user)
    days_ago = datetime.now(UTC) - timedelta(days=9)
    fresh = RunFactory(task=task, scheduled_at=days_ago, backfill=True)
    old = RunFactory(task=task, scheduled_at=days_ago + timedelta(days=1), backfill=True)
    Run.objects.filter(pk=old.pk).update(created_at=datetime.now(UTC) - timedelta(seconds=20))

    assert flag_starved_runs(sla_seconds=10) == 1

    assert status_of(fresh) == "scheduled"
    assert status_of(old) == "waiting_for_resource"
