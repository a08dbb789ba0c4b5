"""The reviewer's expectation checks: a task's `late`, `too_slow` and `overdue`, and a
workflow's `overdue` (tasks/sql/expect.sql), raised from the database as their moment passes,
once between any number of reviewers."""

from __future__ import annotations

import os
from uuid import UUID

from django.db import connection, transaction

from scheduler_project.sql import queries
from tasks import counters, outbox
from tasks.events import Event

SQL = queries("tasks", "expect.sql")
CHECKS = ("late", "too_slow", "overdue")
# A task none of whose runs is late moves its `late` cursor this often (expect.sql): each pass
# then reads at most this many seconds of its runs, and its row is not written every pass.
CURSOR_EVERY_SECONDS = 60.0


def review_expectations() -> list[Event]:
    """Run the checks in one transaction; queue their alerts (outbox) and count them (/metrics,
    `scheduler_alerts_total`) in it. Returns the alerts raised."""
    raised: list[Event] = []
    with transaction.atomic(), connection.cursor() as cursor:
        for check in CHECKS:
            cursor.execute(SQL[check], {"cursor_every": CURSOR_EVERY_SECONDS})
            raised += [(run_id, task_id, attempt, check) for run_id, task_id, attempt in cursor]
        outbox.enqueue(cursor, events=raised)
        counters.count_events(
            cursor,
            process=f"reviewer:{os.getpid()}",
            events=[(task_id, "alert", event) for _, task_id, _, event in raised],
        )
    return raised


def review_workflow_expectations() -> list[tuple[UUID, str]]:
    """Judge the workflows that expect a success (`expect.success_within`): each turned
    `overdue` for a new lapse gets its `workflow_overdue` notifications queued in the same
    transaction (the notifications app's trigger on the row), each with a success since (or no
    expectation left) is `ok` again. Idempotent: a lapse is alerted once between any number of
    reviewers and passes (SKIP LOCKED, then checked against the locked row). Returns (workflow
    id, health) of the workflows it changed."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(SQL["workflow_overdue"])
        return [(workflow_id, health) for workflow_id, health in cursor]
