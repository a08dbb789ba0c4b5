"""The worker's hot path in plain SQL: claim runs, renew heartbeats, record outcomes (fenced).

Plain SQL because these statements run thousands of times a second and each must be exactly one
round trip; DESIGN.md section 4 is the contract they implement.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection, transaction

from notifications import outbox
from tasks import counters
from tasks.db import prepared_cursor
from tasks.ids import idempotency_key
from tasks.models import TERMINAL_STATUSES

_CLAIM_CTES = """
capped AS (
    -- Running runs per owner (from run_running_idx, a small set), once per claim.
    SELECT owner_id, count(*) AS running FROM tasks_run
     WHERE status = 'running' AND %(owner_cap)s > 0
     GROUP BY owner_id
), candidates AS (
    -- One index range scan of run_claimable_idx (priority DESC, execute_at) per priority, 9
    -- down to 0 (run_priority_range): each reads due runs only, in execute_at order, and the
    -- outer LIMIT stops as soon as the batch is full. A single ORDER BY priority DESC,
    -- execute_at scan would instead either sort every due run (backlog-sized work per claim) or
    -- walk past the future runs of higher priorities, and which of the two PostgreSQL picks
    -- depends on its statistics: with millions of finished runs in the table it picked the sort.
    -- statement_timestamp(), not clock_timestamp(): a volatile bound cannot be an index bound.
    SELECT r.id, r.owner_id, r.priority, r.execute_at
      FROM generate_series(9, 0, -1) AS p(priority)
     CROSS JOIN LATERAL (
           SELECT r.id, r.owner_id, r.priority, r.execute_at FROM tasks_run r
            WHERE r.status IN ('scheduled', 'waiting_for_resource')
              AND r.priority = p.priority
              AND r.execute_at <= statement_timestamp() + make_interval(secs => %(prefetch)s)
              AND r.owner_id NOT IN (SELECT owner_id FROM capped WHERE running >= %(owner_cap)s)
            ORDER BY r.execute_at
            LIMIT {candidates}
              FOR UPDATE OF r SKIP LOCKED) AS r
     LIMIT {candidates}
), picked AS (
    -- The per-owner cap also holds within this batch: an owner's n-th candidate is taken only
    -- while its running runs plus n stay within the cap.
    SELECT id FROM (
        SELECT c.id, c.priority, c.execute_at, coalesce(k.running, 0) AS running,
               row_number() OVER (PARTITION BY c.owner_id
                                  ORDER BY c.priority DESC, c.execute_at) AS nth
          FROM candidates c LEFT JOIN capped k ON k.owner_id = c.owner_id
    ) ranked
     WHERE %(owner_cap)s <= 0 OR running + nth <= %(owner_cap)s
     ORDER BY priority DESC, execute_at
     LIMIT %(limit)s
), claimed AS (
    UPDATE tasks_run r
       SET status = 'running', attempt = r.attempt + 1, worker = %(worker)s,
           started_at = greatest(clock_timestamp(), r.execute_at),
           heartbeat_at = clock_timestamp()
      FROM picked, tasks_task t
     WHERE r.id = picked.id AND t.id = r.task_id
    RETURNING r.id, r.task_id, r.scheduled_at, r.execute_at, r.attempt, r.max_attempts,
              t.kind, t.payload, t.executable, t.timeout, t.retry_backoff_base,
              t.retry_backoff_cap, clock_timestamp() AS claimed_at,
              coalesce(t.schedule->>'overlap', 'allow') AS overlap, r.priority
)"""

_CLAIM_SQL = f"""
WITH {_CLAIM_CTES}
SELECT id, task_id, scheduled_at, execute_at, attempt, max_attempts, kind, payload, executable,
       timeout, retry_backoff_base, retry_backoff_cap, claimed_at, overlap, priority
  FROM claimed
"""


@dataclass
class ClaimedRun:
    id: UUID
    task_id: UUID
    scheduled_at: datetime
    execute_at: datetime
    attempt: int
    max_attempts: int
    kind: str
    payload: dict
    executable: str
    timeout: float | None
    backoff_base: float
    backoff_cap: float
    claimed_at: datetime  # database clock at claim time
    overlap: str = "allow"
    priority: int = 0

    @property
    def idempotency_key(self) -> str:
        return idempotency_key(self.task_id, self.scheduled_at)


def claim_runs(
    *, worker: str, limit: int, prefetch_seconds: float, owner_cap: int
) -> list[ClaimedRun]:
    """Claim up to `limit` claimable runs due within `prefetch_seconds`, highest priority first.

    One short transaction; SKIP LOCKED lets any number of workers claim concurrently without
    waiting on each other and without ever claiming the same run twice.
    """
    if limit <= 0:
        return []
    with prepared_cursor() as cursor:  # one statement: its own transaction in autocommit
        return _claim(cursor, worker=worker, limit=limit, prefetch=prefetch_seconds, cap=owner_cap)


def _claim(cursor: Any, *, worker: str, limit: int, prefetch: float, cap: int) -> list[ClaimedRun]:
    params = {"worker": worker, "limit": limit, "prefetch": prefetch, "owner_cap": cap}
    cursor.execute(claim_sql(_candidates(limit, cap)), params)
    return _claimed_runs(cursor.fetchall())


def _candidates(limit: int, cap: int) -> int:
    # With a cap, look at twice the batch so one owner's runs do not crowd out everyone else's.
    wanted = limit * 2 if cap > 0 else limit
    # Rounded up to a power of two: the LIMIT is written into the statement (see claim_sql), and
    # a handful of sizes keeps the number of prepared statements per connection small.
    return 1 << (wanted - 1).bit_length()


@functools.cache
def claim_sql(candidates: int) -> str:
    """The claim statement for batches of up to `candidates` candidates.

    The candidates' LIMIT is a literal, not a parameter. With `LIMIT $n` PostgreSQL costs the
    statement's generic plan (prepared once per connection, see db.prepared_cursor) as if a
    tenth of the due runs were wanted, finds it dearer than a plan for the actual values, and
    plans the statement again on every execution: a third of the database's time for the
    worker's cycle with 10 million finished runs in the table (docs/benchmarks.md)."""
    return _CLAIM_SQL.replace("{candidates}", str(int(candidates)))


@functools.cache
def cycle_sql(candidates: int) -> str:
    return _CYCLE_SQL.replace("{candidates}", str(int(candidates)))


def _claimed_runs(rows: list[tuple]) -> list[ClaimedRun]:
    claimed = [ClaimedRun(*row) for row in rows]
    for run in claimed:
        if isinstance(run.payload, str):  # Django's psycopg setup leaves jsonb undecoded
            run.payload = json.loads(run.payload)
    if not claimed:
        return claimed
    # One claim time for the batch, the earliest: each row's clock_timestamp() differs by
    # microseconds, in no particular order, and start times are counted from it (worker.py).
    at = min(run.claimed_at for run in claimed)
    for run in claimed:
        run.claimed_at = at
    # Start order: runs already due first, highest priority first; runs claimed ahead of their
    # time by when they are due.
    claimed.sort(key=lambda r: (max(r.execute_at, at), -r.priority, r.execute_at))
    return claimed


def record_and_claim(
    *, worker: str, outcomes: list[Outcome], limit: int, prefetch_seconds: float, owner_cap: int
) -> tuple[list[tuple[UUID, UUID, str]], list[ClaimedRun]]:
    """Record finished runs and claim runs for the freed slots: one statement, one commit.

    The worker's steady state is "some runs finished, as many slots free". One statement in
    autocommit is one round trip and one WAL flush per cycle, however large the batch. Atomic:
    if it fails nothing is recorded and nothing claimed, and the caller keeps its outcomes.
    """
    if not outcomes:
        return [], claim_runs(
            worker=worker, limit=limit, prefetch_seconds=prefetch_seconds, owner_cap=owner_cap
        )
    if limit <= 0:
        return record_outcomes(worker=worker, outcomes=outcomes), []
    params = _finish_params(worker, outcomes)
    params.update(limit=limit, prefetch=prefetch_seconds, owner_cap=owner_cap)
    # No transaction block: in autocommit the single statement is its own transaction.
    with prepared_cursor() as cursor:
        cursor.execute(cycle_sql(_candidates(limit, owner_cap)), params)
        rows = cursor.fetchall()
    recorded = [(row[1], row[2], row[3]) for row in rows if row[0] == "recorded"]
    claimed = _claimed_runs([row[1:3] + row[6:] for row in rows if row[0] == "claimed"])
    return recorded, claimed


_OTHERS_RUNNING_SQL = """
SELECT id, task_id, attempt FROM tasks_run
 WHERE task_id = ANY(%(tasks)s) AND status = 'running' AND NOT (id = ANY(%(mine)s))
"""

_SET_ASIDE_SQL = """
UPDATE tasks_run SET status = %(status)s, attempt = attempt - 1, finished_at = clock_timestamp(),
       error = %(error)s
 WHERE id = ANY(%(ids)s) AND status = 'running' AND worker = %(worker)s
RETURNING id, task_id
"""


def resolve_overlaps(*, worker: str, claimed: list[ClaimedRun]) -> list[ClaimedRun]:
    """Apply each task's overlap policy to freshly claimed runs; return the runs to execute.

    `skip`: a run whose task has another run in flight (elsewhere, or earlier in this very
    batch, as after a backlog) is recorded `skipped` instead of run.
    `cancel_previous`: the task's other runs in flight are cancelled (their workers are told);
    older runs of the task claimed in this batch never start and are recorded `cancelled`.
    Tasks with the default `allow` cost nothing here: the common path makes no query.
    """
    policed = [run for run in claimed if run.overlap != "allow"]
    if not policed:
        return claimed
    from tasks.models import Run
    from tasks.run_services import cancel_running

    by_task: dict[UUID, list[ClaimedRun]] = {}
    for run in sorted(policed, key=lambda r: r.scheduled_at):
        by_task.setdefault(run.task_id, []).append(run)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            _OTHERS_RUNNING_SQL,
            {"tasks": list(by_task), "mine": [r.id for r in claimed]},
        )
        others = cursor.fetchall()
        busy = {task_id for _, task_id, _ in others}
        skipped: list[UUID] = []
        superseded: list[UUID] = []
        for task_id, runs in by_task.items():
            if runs[0].overlap == "skip":
                # The first runs unless another is in flight; the rest overlap with it.
                skipped += [r.id for r in (runs if task_id in busy else runs[1:])]
            else:
                superseded += [r.id for r in runs[:-1]]  # only the newest of the batch runs
        if skipped:
            cursor.execute(
                _SET_ASIDE_SQL,
                {"ids": skipped, "worker": worker, "status": "skipped",
                 "error": "skipped: the previous run was still running (overlap policy)"},
            )  # fmt: skip
            # Outbox (issue 5): `missed` for each occurrence skipped, in the same transaction.
            outbox.enqueue(cursor, events=[(r, t, None, "missed") for r, t in cursor.fetchall()])
        if superseded:
            cursor.execute(
                _SET_ASIDE_SQL,
                {"ids": superseded, "worker": worker, "status": "cancelled",
                 "error": "cancelled: a newer run started (overlap policy cancel_previous)"},
            )  # fmt: skip
        cancel_tasks = {task_id for task_id, runs in by_task.items() if runs[0].overlap != "skip"}
        now = _db_now(cursor)
        for run_id, task_id, _attempt in others:
            if task_id in cancel_tasks:
                previous = Run.objects.get(pk=run_id)
                cancel_running(run=previous, now=now, reason="cancelled: a newer run started "
                               "(overlap policy cancel_previous)")  # fmt: skip
    dropped = set(skipped) | set(superseded)
    return [run for run in claimed if run.id not in dropped]


def _db_now(cursor: Any) -> datetime:
    cursor.execute("SELECT clock_timestamp()")
    return cursor.fetchone()[0]


# The earliest claimable execute_at: the first entry of run_claimable_idx for each priority (ten
# index probes, however many runs are queued).
EARLIEST_CLAIMABLE_SQL = """
SELECT min(first.execute_at) FROM generate_series(0, 9) AS p(priority)
 CROSS JOIN LATERAL (
       SELECT execute_at FROM tasks_run
        WHERE status IN ('scheduled', 'waiting_for_resource') AND priority = p.priority
        ORDER BY execute_at LIMIT 1) AS first
"""


def seconds_until_next_due() -> float | None:
    """Seconds (database clock) until the earliest claimable run is due; None when none is."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT extract(epoch FROM ({EARLIEST_CLAIMABLE_SQL}) - clock_timestamp())::float8"
        )
        return cursor.fetchone()[0]


@dataclass(frozen=True)
class Outcome:
    """What one attempt of a claimed run came to; `retry_in` is set when it will be retried."""

    run_id: UUID
    attempt: int
    status: str  # succeeded | failed | scheduled (retry) | cancelled
    attempt_outcome: str  # Attempt.Outcome value
    started_at: datetime | None
    error: str = ""
    output: str = ""
    exit_code: int | None = None
    http_status: int | None = None
    retry_in: float = 0.0


# The outcome write, as CTEs that a claim can follow in the same statement (see _CYCLE_SQL).
_FINISH_CTES = """
v AS (
    SELECT * FROM unnest(%(ids)s::uuid[], %(attempts)s::int[], %(statuses)s::text[],
                         %(retry_in)s::float8[], %(started)s::timestamptz[], %(errors)s::text[],
                         %(outputs)s::text[], %(exit_codes)s::int[], %(http_statuses)s::int[],
                         %(outcomes)s::text[])
           AS v(id, attempt, status, retry_in, started_at, error, output, exit_code, http_status,
                outcome)
), done AS (
    UPDATE tasks_run r
       SET status = v.status,
           finished_at = CASE WHEN v.status = ANY(%(terminal)s) THEN clock_timestamp() END,
           execute_at = CASE WHEN v.status = 'scheduled'
                             THEN clock_timestamp() + make_interval(secs => v.retry_in)
                             ELSE r.execute_at END,
           worker = CASE WHEN v.status = 'scheduled' THEN '' ELSE r.worker END,
           heartbeat_at = CASE WHEN v.status = 'scheduled' THEN NULL ELSE r.heartbeat_at END,
           started_at = coalesce(v.started_at, r.started_at),
           error = v.error, output = v.output, exit_code = v.exit_code,
           http_status = v.http_status
      FROM v
     WHERE r.id = v.id AND r.status = 'running' AND r.attempt = v.attempt AND r.worker = %(worker)s
    RETURNING r.id, r.task_id, r.status, v.attempt, v.outcome
), recorded AS (
    INSERT INTO tasks_attempt (run_id, number, worker, started_at, finished_at, outcome, error,
                               exit_code, http_status)
    SELECT v.id, v.attempt, %(worker)s, v.started_at, clock_timestamp(), v.outcome, v.error,
           v.exit_code, v.http_status
      FROM v JOIN done ON done.id = v.id
    RETURNING run_id
), completed AS (
    -- A task whose last occurrence just finished is complete: nothing left to plan or to run.
    -- The snapshot still shows this batch's runs as running, hence the exclusion.
    UPDATE tasks_task t SET status = 'completed', updated_at = clock_timestamp()
     WHERE t.id IN (SELECT task_id FROM done WHERE status = ANY(%(terminal)s))
       AND t.status = 'active' AND t.next_run_at IS NULL
       AND NOT EXISTS (
           SELECT 1 FROM tasks_run o
            WHERE o.task_id = t.id AND o.status IN ('scheduled', 'running', 'waiting_for_resource')
              AND o.id NOT IN (SELECT id FROM done WHERE status = ANY(%(terminal)s)))
), counted AS (
    -- /metrics counters (tasks/counters.py): per-process shard, one upsert per batch.
    INSERT INTO tasks_runcounter (metric, kind, outcome, shard, value)
    SELECT c.metric, t.kind, c.outcome, %(shard)s, count(*)
      FROM (SELECT task_id, 'attempt' AS metric, outcome FROM done
            UNION ALL
            SELECT task_id, 'finished', status FROM done WHERE status = ANY(%(terminal)s)) c
      JOIN tasks_task t ON t.id = c.task_id
     GROUP BY c.metric, t.kind, c.outcome
     ORDER BY c.metric, t.kind, c.outcome
    ON CONFLICT (metric, kind, outcome, shard)
    DO UPDATE SET value = tasks_runcounter.value + EXCLUDED.value
), events AS (
    -- The transactional outbox (notifications/outbox.py): succeeded; a failed attempt that will
    -- be retried -> failed; the last attempt failed -> retries_exhausted.
    -- Only tasks that could notify at all reach notifications_enqueue: calling it costs more
    -- than the rest of the statement (PL/pgSQL plans its query on every call).
    SELECT d.id, d.task_id, d.attempt,
           CASE WHEN d.status = 'succeeded' THEN 'succeeded'
                WHEN d.status = 'failed' THEN 'retries_exhausted'
                WHEN d.status = 'scheduled' AND d.outcome IN ('failed', 'timed_out') THEN 'failed'
           END AS event
      FROM done d JOIN tasks_task t ON t.id = d.task_id
     WHERE (jsonb_typeof(t.notify) = 'array' AND t.notify <> '[]'::jsonb)
        OR EXISTS (SELECT 1 FROM notifications_channel c
                    WHERE c.owner_id = t.owner_id AND c.all_tasks_events <> '{}')
), notified AS (
    SELECT notifications_enqueue(array_agg(id), array_agg(task_id), array_agg(attempt),
                                 array_agg(event), %(window)s, %(channel)s) AS queued
      FROM events WHERE event IS NOT NULL HAVING count(*) > 0
), woke AS (
    -- Retries due now wake sleeping workers on commit.
    SELECT pg_notify('scheduler_run_due', '') FROM done WHERE status = 'scheduled' LIMIT 1
)"""

# Referencing the SELECT-only CTEs makes PostgreSQL evaluate them (it skips unreferenced ones).
_FINISH_SQL = f"""
WITH {_FINISH_CTES}
SELECT done.id, done.task_id, done.status, (SELECT count(*) FROM woke),
       (SELECT queued FROM notified)
  FROM done
"""

# One round trip per worker cycle: record the finished batch and claim the freed slots. The two
# UPDATEs touch disjoint rows (the finished runs are `running`, the claim takes `scheduled` ones),
# and in autocommit the statement is its own transaction: one commit per cycle.
_CYCLE_SQL = f"""
WITH {_FINISH_CTES}, {_CLAIM_CTES}
SELECT 'recorded', done.id, done.task_id, done.status, (SELECT count(*) FROM woke),
       (SELECT queued FROM notified), NULL::timestamptz, NULL::timestamptz, NULL::int,
       NULL::int, NULL::text, NULL::jsonb, NULL::text, NULL::float8, NULL::float8,
       NULL::float8, NULL::timestamptz, NULL::text, NULL::smallint
  FROM done
UNION ALL
SELECT 'claimed', id, task_id, NULL, NULL, NULL, scheduled_at, execute_at, attempt, max_attempts,
       kind, payload, executable, timeout, retry_backoff_base, retry_backoff_cap, claimed_at,
       overlap, priority
  FROM claimed
"""


def record_outcomes(*, worker: str, outcomes: list[Outcome]) -> list[tuple[UUID, UUID, str]]:
    """Record a batch of outcomes; returns (run id, task id, status) of those recorded.

    Fenced: a run is only updated while it is still `running` under this worker and attempt. A
    run the reviewer took back, or a user cancelled, is left alone and its late result dropped.
    One statement updates the runs, inserts their attempt rows, completes finished tasks, adds
    to the /metrics counters, queues the notifications (outbox) and wakes workers for retries:
    all of it commits together or not at all.
    """
    if not outcomes:
        return []
    with prepared_cursor() as cursor:  # one statement: its own transaction in autocommit
        return _record(cursor, worker=worker, outcomes=outcomes)


def _finish_params(worker: str, outcomes: list[Outcome]) -> dict[str, Any]:
    from django.conf import settings

    return {
        "worker": worker,
        "terminal": list(TERMINAL_STATUSES),
        "shard": counters.shard_of(worker),
        "window": settings.NOTIFICATIONS_RETRY_WINDOW_SECONDS,
        "channel": outbox.NOTIFICATION_CHANNEL,
        "ids": [o.run_id for o in outcomes],
        "attempts": [o.attempt for o in outcomes],
        "statuses": [o.status for o in outcomes],
        "retry_in": [o.retry_in for o in outcomes],
        "started": [o.started_at for o in outcomes],
        "errors": [o.error for o in outcomes],
        "outputs": [o.output for o in outcomes],
        "exit_codes": [o.exit_code for o in outcomes],
        "http_statuses": [o.http_status for o in outcomes],
        "outcomes": [o.attempt_outcome for o in outcomes],
    }


def _record(cursor: Any, *, worker: str, outcomes: list[Outcome]) -> list[tuple[UUID, UUID, str]]:
    cursor.execute(_FINISH_SQL, _finish_params(worker, outcomes))
    return [(row[0], row[1], row[2]) for row in cursor.fetchall()]


def complete_finished_tasks(*, task_ids: list[UUID]) -> None:
    """Mark tasks `completed` once no occurrence remains to plan and none is unfinished."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE tasks_task t SET status = 'completed', updated_at = clock_timestamp()
             WHERE t.id = ANY(%s) AND t.status = 'active' AND t.next_run_at IS NULL
               AND NOT EXISTS (SELECT 1 FROM tasks_run r WHERE r.task_id = t.id
                                  AND r.status IN ('scheduled', 'running', 'waiting_for_resource'))
            """,
            [task_ids],
        )


def renew_heartbeats(cursor: Any, *, worker: str, run_ids: Iterable[UUID]) -> set[UUID]:
    """Renew the heartbeat of the runs this worker knows it holds; return the ids still held.

    One statement per worker process, however many runs it holds. A run missing from the
    answer was cancelled or taken back by the reviewer: the worker must stop its payload.
    Only the runs named are renewed: a claim that committed while its answer was lost (the
    primary died between the two) is held in the database by a worker that never heard of it,
    and must go stale, so the reviewer returns it to the queue.
    """
    cursor.execute(
        "UPDATE tasks_run SET heartbeat_at = clock_timestamp()"
        " WHERE id = ANY(%s) AND worker = %s AND status = 'running' RETURNING id",
        [list(run_ids), worker],
    )
    return {row[0] for row in cursor.fetchall()}
