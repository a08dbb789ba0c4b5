"""Cumulative counters for /metrics: one upsert per batch of recorded outcomes or rescues, and
one per failed pass of a role's loop."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from typing import Any
from uuid import UUID

from django.db import connection

from scheduler_project.sql import queries
from tasks.db import is_unavailable

# Each process writes its own shard, so workers recording at once rarely wait on one row; the
# table stays tiny (shards x metrics x kinds x outcomes) and /metrics sums the shards.
SHARDS = 32

SQL = queries("tasks", "counters.sql")


def shard_of(process: str) -> int:
    return zlib.crc32(process.encode()) % SHARDS


def count_events(cursor: Any, *, process: str, events: Iterable[tuple[UUID, str, str]]) -> None:
    """Add `(task id, metric, outcome)` events to the counters, inside the caller's transaction.

    Counted in the transaction that records the outcomes, so a rolled-back batch counts nothing
    and a committed one counts exactly once, whichever process reads the counters.
    """
    rows = list(events)
    if not rows:
        return
    cursor.execute(
        SQL["count_events"],
        {
            "shard": shard_of(process),
            "task_ids": [task_id for task_id, _, _ in rows],
            "metrics": [metric for _, metric, _ in rows],
            "outcomes": [outcome for _, _, outcome in rows],
        },
    )


def count_skipped(cursor: Any, *, process: str, runs: Iterable[tuple[UUID, str]]) -> None:
    """Count skipped occurrences, `(task id, the run's skip_kind)`, by reason (events.SKIP_KINDS)
    for scheduler_runs_skipped_total, inside the transaction that skipped them."""
    count_events(
        cursor, process=process, events=[(task_id, "skipped", kind) for task_id, kind in runs]
    )


def loop_error_counter(*, role: str, process: str) -> Callable[[Exception], None]:
    """The loop's `on_error` for a role process: counts each failed pass, except those of a
    database that is down or not the primary (the database is the one to tell: /health and
    `scheduler_database_up` do, and the count could not be written anyway)."""

    def count(exc: Exception) -> None:
        if is_unavailable(exc):
            return
        with connection.cursor() as cursor:
            count_loop_error(cursor, role=role, process=process)

    return count


def count_loop_error(cursor: Any, *, role: str, process: str) -> None:
    """One more failed pass of `role`'s loop, in its own statement (any DB-API cursor)."""
    cursor.execute(SQL["count_loop_error"], {"role": role, "shard": shard_of(process)})
