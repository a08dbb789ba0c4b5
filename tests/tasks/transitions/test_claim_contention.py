"""Two workers' cycles on real connections (tasks/sql/claim.sql, `cycle`): a cycle whose
snapshot predates another worker's claim must not lock the runs that claim took.

In read committed, FOR UPDATE SKIP LOCKED on a row a transaction committed after the statement's
snapshot locks the row's newest version, rechecks it, drops it when it is no longer claimable, and
keeps the lock to its commit: the worker that owns the run then waits for that commit to record
it (bench/NOTEBOOK.md, "Keyed runs: the claim's scan before the outcome write")."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.conf import settings

from tasks import outbox
from tasks.models import TERMINAL_STATUSES, ConcurrencyKey, RateKey, Run
from tasks.transitions import claim
from tests.conftest import database_url
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.concurrency]


def _cycle_params(worker: str, run: claim.ClaimedRun, limit: int) -> dict:
    outcome = claim.Outcome(
        run_id=run.id,
        attempt=run.attempt,
        status="succeeded",
        attempt_outcome="succeeded",
        started_at=None,
    )
    return {
        "worker": worker,
        "terminal": list(TERMINAL_STATUSES),
        "window": settings.NOTIFICATIONS_RETRY_WINDOW_SECONDS,
        "channel": outbox.NOTIFICATION_CHANNEL,
        "ids": [outcome.run_id],
        "attempts": [outcome.attempt],
        "statuses": [outcome.status],
        "retry_in": [outcome.retry_in],
        "started": [outcome.started_at],
        "errors": [outcome.error],
        "outputs": [outcome.output],
        "exit_codes": [outcome.exit_code],
        "http_statuses": [outcome.http_status],
        "outcomes": [outcome.attempt_outcome],
        "limit": limit,
        "prefetch": 0.0,
        "owner_cap": 0,
        **claim.NO_FLOOR.params(),
        **claim.NO_LIMIT.params(),
    }


def _waiting_for_lock(conninfo: str, pid: int) -> bool:
    with psycopg.connect(conninfo, autocommit=True) as watcher:
        row = watcher.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]
        ).fetchone()
    return row is not None and row[0] == "Lock"


def test_a_cycle_does_not_lock_the_runs_another_worker_claimed_after_its_snapshot() -> None:
    """A's cycle records its run `mine`, which a third transaction holds locked: A's statement
    waits with its snapshot taken. Meanwhile B claims the two oldest runs and commits. When A
    goes on, B's runs are still claimable in A's snapshot. Before the claim's scan came first in
    the statement, A locked them (the newest version, found running, dropped) and kept the locks
    to its commit, so B could not record them until A committed (here: lock_timeout)."""
    at = datetime.now(UTC) - timedelta(seconds=60)
    # A task each: recording a run locks its task's row (tasks_runs_complete_tasks).
    runs = [
        RunFactory(task=TaskFactory(priority=5), scheduled_at=at + timedelta(seconds=i))
        for i in range(6)
    ]
    [mine] = claim.claim_runs(worker="a", limit=1, prefetch_seconds=0, owner_cap=0)
    assert mine.id == runs[0].pk
    conninfo = database_url()
    sql = claim.cycle_sql(2)
    with (
        psycopg.connect(conninfo) as holder,
        psycopg.connect(conninfo) as a,
        psycopg.connect(conninfo, autocommit=True) as b,
    ):
        holder.execute("SELECT 1 FROM tasks_run WHERE id = %s FOR UPDATE", [mine.id])
        with ThreadPoolExecutor(1) as pool:
            a_cycle = pool.submit(lambda: a.execute(sql, _cycle_params("a", mine, 2)).fetchall())
            for _ in range(500):  # until A waits for `mine` (or has finished: a failure)
                if a_cycle.done() or _waiting_for_lock(conninfo, a.info.backend_pid):
                    break
                threading.Event().wait(0.01)
            assert not a_cycle.done(), "A's cycle did not wait for the run the holder locked"
            b_rows = b.execute(claim.claim_sql(2), _cycle_params("b", mine, 2)).fetchall()
            b_claimed = [row[1] for row in b_rows if row[0] == "claimed"]
            assert len(b_claimed) == 2
            holder.rollback()
            a_rows = a_cycle.result(timeout=30)  # A's transaction stays open
        a_claimed = {row[6] for row in a_rows if row[0] == "claimed"}
        assert len(a_claimed) == 2 and not a_claimed & set(b_claimed)
        # B records its runs while A's transaction is open: none of them is locked by A.
        b.execute("SET lock_timeout = '2s'")
        finished = b.execute(
            "UPDATE tasks_run SET status = 'succeeded', finished_at = now()"
            " WHERE id = ANY(%s) AND worker = 'b' RETURNING id",
            [b_claimed],
        ).fetchall()
        assert len(finished) == 2
        a.commit()
    assert Run.objects.filter(status="running", worker="a").count() == 2


@pytest.mark.parametrize("kind", ["concurrency", "rate"])
def test_a_cycle_holds_no_key_row_while_its_outcome_write_waits(kind: str) -> None:
    """The claim's scan comes first in the cycle, the outcome write next, the key rows' locks
    after it (`keyed`, `rate_keyed`): a cycle that waits to record a run holds no key row, so
    no other claim of the key waits for it, and no two cycles wait for each other in a cycle
    (one holding a key row and waiting for a run the other's scan locked, the other waiting
    for the key row)."""
    owner = UserFactory()
    key: ConcurrencyKey | RateKey
    fields: dict[str, ConcurrencyKey | RateKey]
    if kind == "concurrency":
        key = ConcurrencyKey.objects.create(owner=owner, name="db", max_running=10)
        table, fields = "tasks_concurrencykey", {"concurrency_key": key}
    else:
        key = RateKey.objects.create(owner=owner, name="api", rate_limit=10, per_seconds=1)
        table, fields = "tasks_ratekey", {"rate_key": key}
    at = datetime.now(UTC) - timedelta(seconds=60)
    for i in range(4):
        task = TaskFactory(priority=5, owner=owner, **fields)
        RunFactory(task=task, scheduled_at=at + timedelta(seconds=i), **task.requests)
    [mine] = claim.claim_runs(worker="a", limit=1, prefetch_seconds=0, owner_cap=0)
    conninfo = database_url()
    with (
        psycopg.connect(conninfo) as holder,
        psycopg.connect(conninfo) as a,
        psycopg.connect(conninfo) as other,
    ):
        holder.execute("SELECT 1 FROM tasks_run WHERE id = %s FOR UPDATE", [mine.id])
        with ThreadPoolExecutor(1) as pool:
            a_cycle = pool.submit(
                lambda: a.execute(claim.cycle_sql(2), _cycle_params("a", mine, 2)).fetchall()
            )
            for _ in range(500):
                if a_cycle.done() or _waiting_for_lock(conninfo, a.info.backend_pid):
                    break
                threading.Event().wait(0.01)
            try:
                assert not a_cycle.done(), "A's cycle did not wait for the run the holder locked"
                # A has locked its candidates (keyed runs) and waits: the key row is free.
                other.execute("SET lock_timeout = '1s'")
                locked = other.execute(
                    f"SELECT id FROM {table} WHERE id = %s FOR NO KEY UPDATE", [key.pk]
                ).fetchall()
                assert locked == [(key.pk,)]
            finally:
                other.rollback()
                holder.rollback()
            a_rows = a_cycle.result(timeout=30)
        a.commit()
    assert len([row for row in a_rows if row[0] == "claimed"]) == 2
