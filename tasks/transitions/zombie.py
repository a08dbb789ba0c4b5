"""Flag and unflag zombie runs (tasks/worker/zombie_tracker.py finds them): the worker's watch
thread, on its own connection, in one transaction with the `zombie` notifications (the outbox).
Statements in tasks/sql/zombie.sql."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from scheduler_project.sql import queries
from tasks import events, outbox

SQL = queries("tasks", "zombie.sql")


def flag(cursor: Any, *, worker: str, quiet: list[tuple[UUID, int, float]]) -> list[tuple]:
    """Flag (run id, attempt, seconds quiet) runs and queue their `zombie` notifications;
    returns (run id, task id, attempt, on_zombie) of those newly flagged."""
    if not quiet:
        return []
    cursor.execute(
        SQL["flag"],
        {
            "ids": [q[0] for q in quiet],
            "attempts": [q[1] for q in quiet],
            "idle": [q[2] for q in quiet],
            "worker": worker,
        },
    )
    flagged = cursor.fetchall()
    outbox.enqueue(cursor, events=events.zombie_events(row[:3] for row in flagged))
    return flagged


def unflag(cursor: Any, *, worker: str, runs: list[tuple[UUID, int]]) -> None:
    """Clear the flag of (run id, attempt) runs that used CPU or wrote output again."""
    if runs:
        ids, attempts = zip(*runs, strict=True)
        cursor.execute(
            SQL["unflag"], {"ids": list(ids), "attempts": list(attempts), "worker": worker}
        )
