"""The transactional outbox: notification rows inserted in the transaction that records an event.

Callers (the worker's outcome write and overlap skips, the reviewer's rescue and starvation flag,
the scheduler's misfire handling) pass the cursor of their open transaction, so an outcome and its
notifications commit together or not at all: a process dying right after the commit loses
nothing, and a rolled-back outcome notifies nobody. The unique (run, attempt, event, channel) key
makes a replayed enqueue insert nothing.

This module is the tasks app's only way to the notifications app, which knows tasks and not the
other way round (the events it carries are `tasks.events`): `enqueue` calls the SQL function
`notifications_enqueue` that the notifications app installs, and `validate_notify` checks a
task's `notify` list with the check that app registers from its AppConfig.ready.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from scheduler_project.sql import queries
from tasks.events import EVENTS, Event

NOTIFICATION_CHANNEL = "scheduler_notification"

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
    unknown = sorted({e[3] for e in events} - set(EVENTS))
    if unknown:
        raise ValueError(f"not outbox events: {unknown}")
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


NotifyValidator = Callable[..., list[dict]]
_notify_validator: NotifyValidator | None = None


def register_notify_validator(validator: NotifyValidator) -> None:
    """Install the check of a task's `notify` entries: `validator(entries, owner=..., team=...)`
    returns them canonical or raises DRF's ValidationError (the notifications app registers
    it)."""
    global _notify_validator
    _notify_validator = validator


def validate_notify(entries: list[dict], *, owner: Any, team: Any = None) -> list[dict]:
    """A task's `notify` entries checked by the registered validator (channels of `owner`, or
    of the task's `team`)."""
    if _notify_validator is None:
        raise ImproperlyConfigured("no app registered a validator of `notify` entries")
    return _notify_validator(entries, owner=owner, team=team)
