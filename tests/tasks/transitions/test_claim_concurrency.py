"""Concurrency keys in the claim (tasks/sql/claim.sql, `key_ctes`): at most a key's limit of its
runs running, strict order within a key, and no key holding back other runs."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from tasks import outbox
from tasks.models import TERMINAL_STATUSES, ConcurrencyKey, Run, Task
from tasks.transitions import claim, limits
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db


def keyed_task(key: ConcurrencyKey | None, priority: int = 5, **fields) -> Task:
    task = TaskFactory(priority=priority, owner=key.owner if key else UserFactory(), **fields)
    task.concurrency_key = key
    task.save()
    return task


def due(task: Task, *, ago: float = 1.0) -> Run:
    at = datetime.now(UTC) - timedelta(seconds=ago)
    return RunFactory(task=task, scheduled_at=at, **task.requests)


def take(limit: int = 8, worker: str = "w") -> list[claim.ClaimedRun]:
    return list(claim.claim_runs(worker=worker, limit=limit, prefetch_seconds=0, owner_cap=0))


def test_a_key_admits_at_most_its_limit_and_then_the_next_in_priority_then_due_order() -> None:
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=2)
    low = keyed_task(key, priority=1)
    high = keyed_task(key, priority=9)
    runs = [due(low, ago=10), due(low, ago=20), due(high, ago=1), due(high, ago=2)]
    claimed = take()
    assert {r.id for r in claimed} == {runs[3].pk, runs[2].pk}
    waiting = Run.objects.get(pk=runs[1].pk)
    assert waiting.status == "waiting_for_resource"
    assert waiting.wait_reason == "waiting for concurrency key db (2 of 2 running)"
    assert take() == []  # full: nothing more from the next claim
    Run.objects.filter(pk=runs[3].pk).update(status="succeeded", finished_at=datetime.now(UTC))
    # The older of the two low-priority runs goes next, and its reason is cleared.
    assert [r.id for r in take()] == [runs[1].pk]
    assert Run.objects.get(pk=runs[1].pk).wait_reason == ""
    key.refresh_from_db()
    assert key.admitted == 3


def test_a_held_key_does_not_hold_back_other_keys_or_unkeyed_runs() -> None:
    owner = UserFactory()
    db = ConcurrencyKey.objects.create(owner=owner, name="db", max_running=1)
    other = ConcurrencyKey.objects.create(owner=owner, name="other", max_running=5)
    # Many due runs of the full key at the top priority, older than everything else.
    full = [due(keyed_task(db, priority=9), ago=60 + i) for i in range(12)]
    assert len(take(limit=1)) == 1
    rest = [due(keyed_task(other, priority=9)), due(keyed_task(None, priority=1))]
    claimed = take(limit=4)
    assert {r.id for r in claimed} == {r.pk for r in rest}
    assert Run.objects.filter(pk__in=[r.pk for r in full], status="running").count() == 1


def test_the_limit_on_the_key_row_applies_at_the_next_claim() -> None:
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=4)
    task = keyed_task(key)
    for i in range(6):
        due(task, ago=i + 1)
    assert len(take(limit=2)) == 2
    ConcurrencyKey.objects.filter(pk=key.pk).update(max_running=1, declared=True)
    assert take() == []  # two run, the limit is one now
    Run.objects.filter(task=task, status="running").update(
        status="succeeded", finished_at=datetime.now(UTC)
    )
    assert len(take()) == 1


def test_two_owners_keys_of_one_name_are_counted_apart() -> None:
    mine = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=1)
    theirs = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=1)
    for key in (mine, theirs):
        task = keyed_task(key)
        due(task, ago=1)
        due(task, ago=2)
    claimed = take()
    assert len(claimed) == 2
    assert {Run.objects.get(pk=r.id).concurrency_key_id for r in claimed} == {mine.pk, theirs.pk}


def _claim_params(worker: str, limit: int) -> dict:
    return {
        "worker": worker,
        "limit": limit,
        "prefetch": 0.0,
        "owner_cap": 0,
        **claim.NO_FLOOR.params(),
        "window": settings.NOTIFICATIONS_RETRY_WINDOW_SECONDS,
        "channel": outbox.NOTIFICATION_CHANNEL,
        **claim.NO_LIMIT.params(),
    }


def _waiting_for_lock(conninfo: str, pid: int) -> bool:
    with psycopg.connect(conninfo, autocommit=True) as watcher:
        row = watcher.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]
        ).fetchone()
    return row is not None and row[0] == "Lock"


def _conninfo() -> str:
    return " ".join(
        f"{k}={v}"
        for k, v in {
            "host": connection.settings_dict["HOST"],
            "port": connection.settings_dict["PORT"],
            "user": connection.settings_dict["USER"],
            "dbname": connection.settings_dict["NAME"],
        }.items()
        if v
    )


def _waits_for(conninfo: str, pid: int) -> int | None:
    """The backend whose transaction `pid` waits for, if any."""
    with psycopg.connect(conninfo, autocommit=True) as watcher:
        row = watcher.execute(
            "SELECT held.pid FROM pg_locks waiting JOIN pg_locks held"
            " ON held.locktype = 'transactionid' AND held.transactionid = waiting.transactionid"
            " AND held.granted WHERE waiting.pid = %s AND NOT waiting.granted",
            [pid],
        ).fetchone()
    return None if row is None else row[0]


def _cycle_params(worker: str, run: claim.ClaimedRun, limit: int) -> dict:
    return {
        **_claim_params(worker, limit),
        "terminal": list(TERMINAL_STATUSES),
        "ids": [run.id],
        "attempts": [run.attempt],
        "statuses": ["succeeded"],
        "retry_in": [0.0],
        "started": [None],
        "errors": [""],
        "outputs": [""],
        "exit_codes": [None],
        "http_statuses": [None],
        "outcomes": ["succeeded"],
    }


@pytest.mark.django_db(transaction=True)
def test_a_claim_counts_the_admissions_committed_after_its_snapshot() -> None:
    """Two claims on real connections: B's snapshot predates A's commit, so B's count of running
    runs misses A's run; the key row's `admitted`, which B reads when it locks the row after A
    committed, makes up for it. B's cycle is made to wait between its snapshot and the key row by
    its outcome write (a third transaction holds the run it records; a run of the key running in
    B's snapshot makes `keyed` read what the cycle records first). Without the difference, B
    admits its higher-priority run beside A's and three run under a limit of two."""
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=2)
    unkeyed = due(keyed_task(None, priority=9))
    running = due(keyed_task(key, priority=5))
    mine, _ = take(limit=2, worker="b")  # B's runs: it records the unkeyed one
    assert mine.id == unkeyed.pk
    low = due(keyed_task(key, priority=1))
    conninfo = _conninfo()
    with (
        psycopg.connect(conninfo) as holder,
        psycopg.connect(conninfo) as a,
        psycopg.connect(conninfo, autocommit=True) as b,
    ):
        rows = a.execute(claim.claim_sql(8), _claim_params("a", 8)).fetchall()  # stays open
        assert [row[1] for row in rows if row[0] == "claimed"] == [low.pk]
        high = due(keyed_task(key, priority=9))  # committed: in B's snapshot, not in A's
        holder.execute("SELECT 1 FROM tasks_run WHERE id = %s FOR UPDATE", [mine.id])
        with ThreadPoolExecutor(1) as pool:
            b_cycle = pool.submit(
                lambda: b.execute(claim.cycle_sql(8), _cycle_params("b", mine, 8)).fetchall()
            )
            for _ in range(500):  # until B waits to record its run (or has finished: a failure)
                if b_cycle.done() or _waiting_for_lock(conninfo, b.info.backend_pid):
                    break
                threading.Event().wait(0.01)
            assert not b_cycle.done(), "B's cycle did not wait for the run the holder locked"
            assert _waits_for(conninfo, b.info.backend_pid) == holder.info.backend_pid
            a.commit()
            holder.rollback()
            b_rows = b_cycle.result(timeout=30)
    assert [row for row in b_rows if row[0] == "claimed"] == []
    assert Run.objects.filter(concurrency_key_id=key.pk, status="running").count() == 2
    assert Run.objects.get(pk=running.pk).status == "running"
    assert Run.objects.get(pk=high.pk).wait_reason == (
        "waiting for concurrency key db (2 of 2 running)"
    )


@pytest.mark.django_db(transaction=True)
def test_a_claim_passes_over_a_key_another_claim_holds_without_waiting() -> None:
    """A claim that finds its candidates' key row locked by another claim in flight admits none
    of that key's runs and does not wait for that commit (`keyed`, SKIP LOCKED): it claims its
    other runs, says nothing held (the worker claims again soon), and the key's runs stay as
    they were, for the next claim; its answer says it passed a key over (the worker claims again
    after a short pause), and the next claim's, which takes the key's run, does not."""
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=10)
    task = keyed_task(key)
    first, second = due(task, ago=2), due(task, ago=1)
    unkeyed = due(keyed_task(None, priority=1))
    conninfo = _conninfo()
    with psycopg.connect(conninfo) as a, psycopg.connect(conninfo, autocommit=True) as b:
        rows = a.execute(claim.claim_sql(1), _claim_params("a", 1)).fetchall()  # stays open
        assert [row[1] for row in rows if row[0] == "claimed"] == [first.pk]
        b.execute("SET lock_timeout = '2s'")
        b_rows = b.execute(claim.claim_sql(8), _claim_params("b", 8)).fetchall()
        assert [row[1] for row in b_rows if row[0] == "claimed"] == [unkeyed.pk]
        assert [row[0] for row in b_rows if row[0] != "claimed"] == ["passed"]  # not held
        a.commit()
    waiting = Run.objects.get(pk=second.pk)
    assert (waiting.status, waiting.wait_reason) == ("scheduled", "")
    claimed = claim.claim_runs(worker="b", limit=8, prefetch_seconds=0, owner_cap=0)
    assert ([run.id for run in claimed], claimed.passed_over) == ([second.pk], False)
    assert ConcurrencyKey.objects.get(pk=key.pk).admitted == 2


@pytest.mark.django_db(transaction=True)
def test_a_cycle_writes_what_its_outcomes_add_up_to_before_it_locks_a_key_row() -> None:
    """A cycle completes the tasks whose last run it records (`completed`, with the counters,
    the notifications and the health writes) before `keyed` locks its candidates' key rows: a
    cycle whose completion waits for a task's row holds no key row, so another claim of the key
    admits its run instead of passing the key over. When the outcome CTEs ran at the end of the
    statement, the cycle held the key row through that wait and the other claim passed."""
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=10)
    once = due(keyed_task(None, priority=9))
    [mine] = take(limit=1, worker="a")  # A records it: its task's last run
    assert mine.id == once.pk
    task = keyed_task(key)
    first, second = due(task, ago=2), due(task, ago=1)
    conninfo = _conninfo()
    with (
        psycopg.connect(conninfo) as holder,
        psycopg.connect(conninfo, autocommit=True) as a,
        psycopg.connect(conninfo, autocommit=True) as b,
    ):
        holder.execute("SELECT 1 FROM tasks_task WHERE id = %s FOR UPDATE", [once.task_id])
        with ThreadPoolExecutor(1) as pool:
            # One candidate: A's scan locks `first`, the run it admits once it goes on.
            a_cycle = pool.submit(
                lambda: a.execute(claim.cycle_sql(1), _cycle_params("a", mine, 1)).fetchall()
            )
            try:
                for _ in range(500):  # until A waits to complete the task (or has finished)
                    if a_cycle.done() or _waiting_for_lock(conninfo, a.info.backend_pid):
                        break
                    threading.Event().wait(0.01)
                assert not a_cycle.done(), "A's cycle did not wait for the task the holder locked"
                assert _waits_for(conninfo, a.info.backend_pid) == holder.info.backend_pid
                b.execute("SET lock_timeout = '2s'")
                b_rows = b.execute(claim.claim_sql(8), _claim_params("b", 8)).fetchall()
            finally:
                holder.rollback()  # A goes on (the pool waits for it, even after a failure)
            a_rows = a_cycle.result(timeout=30)
    assert [row[1] for row in b_rows if row[0] == "claimed"] == [second.pk]
    assert [row[0] for row in b_rows if row[0] != "claimed"] == []  # not passed
    assert [row[1] for row in a_rows if row[0] == "recorded"] == [mine.id]
    assert [row[6] for row in a_rows if row[0] == "claimed"] == [first.pk]
    assert Task.objects.get(pk=once.task_id).status == "completed"
    assert ConcurrencyKey.objects.get(pk=key.pk).admitted == 2


def test_due_runs_of_a_full_key_the_claim_skipped_say_why_they_wait() -> None:
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=1)
    task = keyed_task(key)
    first = due(task, ago=5)
    assert [r.id for r in take(limit=1)] == [first.pk]
    later = [due(task, ago=1), due(task, ago=2)]  # due while the key is full: no candidates
    assert take() == []
    assert {Run.objects.get(pk=r.pk).status for r in later} == {"scheduled"}
    assert limits.hold_waiting_runs(limits.CONCURRENCY) == 2
    assert limits.hold_waiting_runs(limits.CONCURRENCY) == 0  # written once
    for run in later:
        run.refresh_from_db()
        assert (run.status, run.wait_reason) == (
            "waiting_for_resource",
            "waiting for concurrency key db (1 of 1 running)",
        )
    Run.objects.filter(pk=first.pk).update(status="succeeded", finished_at=datetime.now(UTC))
    [started] = take()
    assert started.id == later[1].pk  # the older one
    assert Run.objects.get(pk=started.id).wait_reason == ""


def test_runs_due_at_one_instant_are_admitted_up_to_the_limit_claim_after_claim() -> None:
    """Ties on (priority, execute_at), which the scan returns in no stated order: a batch admits
    exactly the room, and the next claims go on (they starved when ties were ranked by id)."""
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=2)
    at = datetime.now(UTC) - timedelta(seconds=1)
    runs = [RunFactory(task=keyed_task(key), scheduled_at=at) for _ in range(12)]
    Run.objects.filter(pk__in=[r.pk for r in runs]).update(concurrency_key_id=key.pk)
    for _ in range(6):
        claimed = take(limit=8)
        assert len(claimed) == 2
        assert Run.objects.filter(concurrency_key_id=key.pk, status="running").count() == 2
        Run.objects.filter(pk__in=[r.id for r in claimed]).update(
            status="succeeded", finished_at=datetime.now(UTC)
        )
    assert not Run.objects.filter(concurrency_key_id=key.pk).exclude(status="succeeded").exists()


def test_a_cycle_refills_the_slot_its_own_finish_frees() -> None:
    """The record-and-claim statement counts the run it records finished as no longer running:
    with the key full, the freed slot goes to the next run in the same statement."""
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=1)
    task = keyed_task(key)
    first, second = due(task, ago=2), due(task, ago=1)
    [held] = take(limit=1)
    assert held.id == first.pk
    outcome = claim.Outcome(
        run_id=first.pk,
        attempt=1,
        status="succeeded",
        attempt_outcome="succeeded",
        started_at=None,
    )
    recorded, claimed = claim.record_and_claim(
        worker="w", outcomes=[outcome], limit=4, prefetch_seconds=0, owner_cap=0
    )
    assert [r[0] for r in recorded] == [first.pk]
    assert [r.id for r in claimed] == [second.pk]


@pytest.mark.django_db(transaction=True)
def test_a_worker_held_by_a_full_key_is_told_so_and_woken_when_a_run_of_it_ends() -> None:
    """A full key's due runs, held back or skipped by the scan, answer the `held` row (the
    worker waits for a run to end instead of claiming again every few milliseconds), and the
    statement that ends a run of a full key NOTIFYs the workers it held; a key with room does
    not wake anyone."""
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=1)
    task = keyed_task(key)
    *_, oldest = [due(task, ago=i + 1) for i in range(3)]
    [running] = claim.claim_runs(worker="a", limit=1, prefetch_seconds=0, owner_cap=0)
    assert running.id == oldest.pk
    held = claim.claim_runs(worker="b", limit=4, prefetch_seconds=0, owner_cap=0)
    assert (list(held), held.held_back) == ([], True)
    roomy = ConcurrencyKey.objects.create(owner=UserFactory(), name="roomy", max_running=9)
    spare = due(keyed_task(roomy))
    [other] = claim.claim_runs(worker="c", limit=1, prefetch_seconds=0, owner_cap=0)
    assert other.id == spare.pk

    def finish(run: claim.ClaimedRun, worker: str) -> list[str]:
        params = connection.get_connection_params()
        with psycopg.connect(**params, autocommit=True) as listener:
            listener.execute("LISTEN scheduler_run_due")
            outcome = claim.Outcome(
                run_id=run.id,
                attempt=run.attempt,
                status="succeeded",
                attempt_outcome="succeeded",
                started_at=None,
            )
            claim.record_outcomes(worker=worker, outcomes=[outcome])
            return [n.channel for n in listener.notifies(timeout=0.5, stop_after=1)]

    assert finish(other, "c") == []  # its key had room: nobody waits for it
    assert finish(running, "a") == ["scheduler_run_due"]


def _nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def test_the_runs_ahead_of_a_batch_are_counted_once_per_key_by_the_keys_index() -> None:
    """The runs of a key ahead of a batch (`key_admission`) are counted once per key and claim,
    from run_key_claimable_idx: counted per candidate they were four sequential scans of
    tasks_run each, most of a keyed cycle's time (bench/NOTEBOOK.md, "Keyed runs at the unkeyed
    rate"). Every run here carries the one key, the case where the planner chose those scans."""
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="db", max_running=100)
    task = keyed_task(key)
    for i in range(40):
        due(task, ago=i + 1)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE tasks_run")
        cursor.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + claim.claim_sql(16), _claim_params("w", 16)
        )
        [[explained]] = cursor.fetchall()
    if isinstance(explained, str):
        explained = json.loads(explained)
    [admission] = [
        n for n in _nodes(explained[0]["Plan"]) if n.get("Subplan Name") == "CTE key_admission"
    ]
    scans = [n for n in _nodes(admission) if n.get("Relation Name") == "tasks_run"]
    assert len(scans) == 2  # the two ranges: a higher priority, the same one due earlier
    for scan in scans:
        assert scan.get("Index Name") == "run_key_claimable_idx", scan["Node Type"]
        assert scan["Actual Loops"] == 1
    assert Run.objects.filter(concurrency_key_id=key.pk, status="running").count() == 16
