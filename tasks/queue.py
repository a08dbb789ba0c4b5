"""The worker's hot path in plain SQL: claim runs, renew heartbeats, record outcomes (fenced).

Plain SQL because these statements run thousands of times a second and each must be exactly one
round trip; DESIGN.md section 4 is the contract they implement.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection, transaction

from notifications import outbox
from tasks import counters
from tasks.models import TERMINAL_STATUSES

_CLAIM_SQL = """
WITH picked AS (
    SELECT r.id FROM tasks_run r
     WHERE r.status IN ('scheduled', 'waiting_for_resource')
       AND r.execute_at <= clock_timestamp() + make_interval(secs => %(prefetch)s)
       AND (%(owner_cap)s <= 0 OR (
            SELECT count(*) FROM tasks_run o
             WHERE o.owner_id = r.owner_id AND o.status = 'running') < %(owner_cap)s)
     ORDER BY r.priority DESC, r.execute_at
     LIMIT %(limit)s
     FOR UPDATE SKIP LOCKED
)
UPDATE tasks_run r
   SET status = 'running', attempt = r.attempt + 1, worker = %(worker)s,
       started_at = greatest(clock_timestamp(), r.execute_at), heartbeat_at = clock_timestamp()
  FROM picked, tasks_task t
 WHERE r.id = picked.id AND t.id = r.task_id
RETURNING r.id, r.task_id, r.scheduled_at, r.execute_at, r.attempt, r.max_attempts,
          t.kind, t.payload, t.executable, t.timeout, t.retry_backoff_base, t.retry_backoff_cap,
          clock_timestamp(), coalesce(t.schedule->>'overlap', 'allow')
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

    @property
    def idempotency_key(self) -> str:
        return f"{self.task_id}:{self.scheduled_at.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}"


def claim_runs(
    *, worker: str, limit: int, prefetch_seconds: float, owner_cap: int
) -> list[ClaimedRun]:
    """Claim up to `limit` claimable runs due within `prefetch_seconds`, highest priority first.

    One short transaction; SKIP LOCKED lets any number of workers claim concurrently without
    waiting on each other and without ever claiming the same run twice.
    """
    if limit <= 0:
        return []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            _CLAIM_SQL,
            {
                "worker": worker,
                "limit": limit,
                "prefetch": prefetch_seconds,
                "owner_cap": owner_cap,
            },
        )
        rows = cursor.fetchall()
    claimed = [ClaimedRun(*row) for row in rows]
    for run in claimed:
        if isinstance(run.payload, str):  # Django's psycopg setup leaves jsonb undecoded
            run.payload = json.loads(run.payload)
    claimed.sort(key=lambda run: run.execute_at)
    return claimed


_OTHERS_RUNNING_SQL = """
SELECT id, task_id, attempt FROM tasks_run
 WHERE task_id = ANY(%(tasks)s) AND status = 'running' AND NOT (id = ANY(%(mine)s))
"""

_SKIP_SQL = """
UPDATE tasks_run SET status = 'skipped', attempt = attempt - 1, finished_at = clock_timestamp(),
       error = 'skipped: the previous run was still running (overlap policy)'
 WHERE id = ANY(%(ids)s) AND status = 'running' AND worker = %(worker)s
"""


def resolve_overlaps(*, worker: str, claimed: list[ClaimedRun]) -> list[ClaimedRun]:
    """Apply each task's overlap policy to freshly claimed runs; return the runs to execute.

    `skip`: a run whose task has another run in flight is recorded `skipped` instead of run.
    `cancel_previous`: the task's other runs in flight are cancelled (their workers are told).
    Tasks with the default `allow` cost nothing here: the common path makes no query.
    """
    policed = [run for run in claimed if run.overlap != "allow"]
    if not policed:
        return claimed
    from tasks.models import Run
    from tasks.run_services import cancel_running

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            _OTHERS_RUNNING_SQL,
            {"tasks": [r.task_id for r in policed], "mine": [r.id for r in claimed]},
        )
        others = cursor.fetchall()
        busy = {task_id for _, task_id, _ in others}
        skipped = [r.id for r in policed if r.overlap == "skip" and r.task_id in busy]
        if skipped:
            cursor.execute(_SKIP_SQL, {"ids": skipped, "worker": worker})
        cancel_tasks = {r.task_id for r in policed if r.overlap == "cancel_previous"}
        now = _db_now(cursor)
        for run_id, task_id, _attempt in others:
            if task_id in cancel_tasks:
                previous = Run.objects.get(pk=run_id)
                cancel_running(run=previous, now=now, reason="cancelled: a newer run started "
                               "(overlap policy cancel_previous)")  # fmt: skip
    return [run for run in claimed if run.id not in set(skipped)]


def _db_now(cursor: Any) -> datetime:
    cursor.execute("SELECT clock_timestamp()")
    return cursor.fetchone()[0]


def seconds_until_next_due() -> float | None:
    """Seconds (database clock) until the earliest claimable run is due; None when none is."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT extract(epoch FROM min(execute_at) - clock_timestamp())::float8 FROM tasks_run"
            " WHERE status IN ('scheduled', 'waiting_for_resource')"
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


_FINISH_SQL = """
WITH v AS (
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
    RETURNING r.id, r.task_id, r.status
), recorded AS (
    INSERT INTO tasks_attempt (run_id, number, worker, started_at, finished_at, outcome, error,
                               exit_code, http_status)
    SELECT v.id, v.attempt, %(worker)s, v.started_at, clock_timestamp(), v.outcome, v.error,
           v.exit_code, v.http_status
      FROM v JOIN done ON done.id = v.id
    RETURNING run_id
)
SELECT done.id, done.task_id, done.status FROM done
"""


def record_outcomes(*, worker: str, outcomes: list[Outcome]) -> list[tuple[UUID, UUID, str]]:
    """Record outcomes in one statement; returns (run id, task id, status) of those recorded.

    Fenced: a run is only updated while it is still `running` under this worker and attempt. A
    run the reviewer took back, or a user cancelled, is left alone and its late result dropped.
    The attempt rows are inserted by the same statement, so the outcome and its history commit
    together or not at all.
    """
    if not outcomes:
        return []
    params = {
        "worker": worker,
        "terminal": list(TERMINAL_STATUSES),
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
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_FINISH_SQL, params)
            recorded = cursor.fetchall()
            # Outbox (issue 5): notification rows commit with the outcome, one statement a batch.
            outbox.enqueue(cursor, events=outbox.outcome_events(recorded, outcomes))
            # /metrics counters (issue 6): one upsert per batch, committed with the outcomes.
            counters.count_events(
                cursor,
                process=worker,
                events=counters.outcome_events(
                    recorded, {o.run_id: o.attempt_outcome for o in outcomes}
                ),
            )
        finished_tasks = [task_id for _, task_id, status in recorded if status in TERMINAL_STATUSES]
        if finished_tasks:
            complete_finished_tasks(task_ids=finished_tasks)
        if any(status == "scheduled" for _, _, status in recorded):
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_notify('scheduler_run_due', '')")
    return recorded


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


def renew_heartbeats(cursor: Any, *, worker: str) -> set[UUID]:
    """Renew the heartbeat of every run this worker holds; return the ids still held.

    One statement per worker process, however many runs it holds. A run missing from the
    answer was cancelled or taken back by the reviewer: the worker must stop its payload.
    """
    cursor.execute(
        "UPDATE tasks_run SET heartbeat_at = clock_timestamp()"
        " WHERE worker = %s AND status = 'running' RETURNING id",
        [worker],
    )
    return {row[0] for row in cursor.fetchall()}
