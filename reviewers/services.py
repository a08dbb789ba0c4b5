"""The reviewer's work: rescue runs of dead workers, flag starved runs. Each is one statement."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from uuid import UUID

from django.db import connection, transaction

from notifications import outbox
from tasks import counters

logger = logging.getLogger(__name__)

_RESCUE_SQL = """
WITH stale AS (
    SELECT id, worker FROM tasks_run
     WHERE status = 'running'
       AND heartbeat_at < clock_timestamp() - make_interval(secs => %(after)s)
     ORDER BY heartbeat_at
     LIMIT %(batch)s
     FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE tasks_run r
       SET status = CASE WHEN r.attempt < r.max_attempts THEN 'scheduled' ELSE 'failed' END,
           execute_at = CASE WHEN r.attempt < r.max_attempts THEN clock_timestamp()
                             ELSE r.execute_at END,
           finished_at = CASE WHEN r.attempt < r.max_attempts THEN NULL
                              ELSE clock_timestamp() END,
           error = 'worker ' || r.worker || ' stopped heart-beating; run rescued',
           heartbeat_at = NULL,
           worker = CASE WHEN r.attempt < r.max_attempts THEN '' ELSE r.worker END
      FROM stale
     WHERE r.id = stale.id
    RETURNING r.id, r.attempt, r.status, r.started_at, r.error, r.task_id,
              stale.worker AS old_worker
), recorded AS (
    INSERT INTO tasks_attempt (run_id, number, worker, started_at, finished_at, outcome, error)
    SELECT id, attempt, old_worker, started_at, clock_timestamp(), 'rescued', error FROM moved
    ON CONFLICT (run_id, number) DO NOTHING
    RETURNING run_id
)
SELECT id, status, task_id FROM moved
"""

_STARVED_SQL = """
UPDATE tasks_run SET status = 'waiting_for_resource'
 WHERE status = 'scheduled' AND execute_at < clock_timestamp() - make_interval(secs => %(sla)s)
RETURNING id, task_id, attempt
"""


@dataclass(frozen=True)
class RescueResult:
    rescued: int
    failed: int


def rescue_stuck_runs(*, after_seconds: float, batch: int = 500) -> RescueResult:
    """Return runs whose heartbeat is older than `after_seconds` to the queue (or to `failed`
    when their attempts are spent), recording the rescue as that attempt's outcome.

    Row locks with SKIP LOCKED plus the `status = 'running'` predicate make this a compare-and-
    swap: two reviewers never rescue the same run, and a worker's fenced outcome write racing this
    either lands first (the run is no longer running) or is dropped (attempt/worker changed).
    """
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_RESCUE_SQL, {"after": after_seconds, "batch": batch})
        rows = cursor.fetchall()
        # Outbox (issue 5): `stuck` (and `retries_exhausted` when spent) commit with the rescue.
        outbox.enqueue(cursor, events=outbox.rescue_events(rows))
        # /metrics counters: a rescue is an attempt's outcome, and a final `failed` when spent.
        counters.count_events(cursor, process=f"reviewer:{os.getpid()}", events=_counted(rows))
        if any(status == "scheduled" for _, status, _ in rows):
            cursor.execute("SELECT pg_notify('scheduler_run_due', '')")
        failed_tasks = [task_id for _, status, task_id in rows if status == "failed"]
        if failed_tasks:
            from tasks.queue import complete_finished_tasks

            complete_finished_tasks(task_ids=failed_tasks)
    failed = sum(1 for _, status, _ in rows if status == "failed")
    return RescueResult(rescued=len(rows) - failed, failed=failed)


def _counted(rows: Iterable[tuple[UUID, str, UUID]]) -> Iterator[tuple[UUID, str, str]]:
    for _, status, task_id in rows:
        yield task_id, "attempt", "rescued"
        if status == "failed":
            yield task_id, "finished", "failed"


def flag_starved_runs(*, sla_seconds: float) -> int:
    """Mark due runs not started within the SLA `waiting_for_resource` (still claimable)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_STARVED_SQL, {"sla": sla_seconds})
        # Outbox (issue 5): a `stuck` notification per flagged run, in the same transaction.
        rows = cursor.fetchall()
        outbox.enqueue(cursor, events=[(run, task, n, "stuck") for run, task, n in rows])
        return len(rows)
