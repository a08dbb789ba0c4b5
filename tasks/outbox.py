"""The transactional outbox: notification rows inserted in the transaction that records an event.

Callers (the worker's outcome write and overlap skips, the reviewer's rescue and starvation flag,
the scheduler's misfire handling) pass the cursor of their open transaction, so an outcome and its
notifications commit together or not at all: a process dying right after the commit loses
nothing, and a rolled-back outcome notifies nobody. The unique (run, attempt, event, channel) key
makes a replayed enqueue insert nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection

from scheduler_project.sql import queries

NOTIFICATION_CHANNEL = "scheduler_notification"

# (run id, task id, attempt or None for "the run's current attempt", event)
Event = tuple[UUID, UUID, int | None, str]

# One statement whatever the number of events, cheap when nobody subscribes: the SQL function
# notifications_enqueue (notifications/sql/functions.sql, where its text and reasoning live)
# joins the events to their tasks' `notify` lists and the owners' all-task channels, inserts with
# ON CONFLICT DO NOTHING and NOTIFYs the deliverers when it inserted anything. Being a PL/pgSQL
# function, its plan is cached per connection instead of re-planned on every batch.
SQL = queries("tasks", "outbox.sql")


def enqueue(cursor: Any | None, *, events: Sequence[Event]) -> int:
    """Insert the notification rows `events` call for; return how many were inserted.

    Run inside the caller's transaction (with its cursor, or Django's connection when None).
    Subscribers are the channels a task's `notify` names for the event and the owner's channels
    with the event in `all_tasks_events`. Exactly once per (run, attempt, event, channel), also
    when called again for the same events; NOTIFY wakes the deliverers on commit.
    """
    if not events:
        return 0
    params: dict[str, Any] = {
        "runs": [e[0] for e in events],
        "tasks": [e[1] for e in events],
        "attempts": [e[2] for e in events],
        "events": [e[3] for e in events],
        "window": settings.NOTIFICATIONS_RETRY_WINDOW_SECONDS,
        "channel": NOTIFICATION_CHANNEL,
    }
    if cursor is None:
        with connection.cursor() as own:
            own.execute(SQL["enqueue"], params)
            return int(own.fetchone()[0])
    cursor.execute(SQL["enqueue"], params)
    return int(cursor.fetchone()[0])


def rescue_events(rows: Iterable[tuple[UUID, str, UUID]]) -> list[Event]:
    """Events for runs the reviewer rescued, rows (run id, new status, task id): `stuck`, and
    `retries_exhausted` as well when the rescue spent the run's last attempt."""
    events: list[Event] = []
    for run_id, status, task_id in rows:
        events.append((run_id, task_id, None, "stuck"))
        if status == "failed":
            events.append((run_id, task_id, None, "retries_exhausted"))
    return events
