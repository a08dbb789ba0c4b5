"""Per-minute queue samples for the admin dashboard's last-hour charts (tasks.QueueSample)."""

from __future__ import annotations

from django.db import connection

from scheduler_project.sql import queries

# One statement (reviewers/sql/samples.sql): safe with several reviewers.
SQL = queries("reviewers", "samples.sql")


def record_queue_sample() -> bool:
    """Write the sample of the minute that just ended; True if this call wrote it.

    Safe with several reviewers: exactly one row per minute, whoever comes first.
    """
    with connection.cursor() as cursor:
        cursor.execute(SQL["record_queue_sample"])
        return cursor.rowcount == 1
