"""Cumulative run counters for /metrics: one upsert per batch of recorded outcomes or rescues."""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any
from uuid import UUID

from scheduler_project.sql import queries

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
