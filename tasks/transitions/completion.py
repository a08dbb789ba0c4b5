"""Completing tasks: a task ends `completed` once nothing is left to plan or to run."""

from __future__ import annotations

from uuid import UUID

from django.db import connection

from scheduler_project.sql import queries

SQL = queries("tasks", "complete.sql")


def complete_finished_tasks(*, task_ids: list[UUID]) -> None:
    """Mark tasks `completed` once no occurrence remains to plan and none is unfinished.

    Call in the transaction that finished, skipped or withdrew the last run. One compare-and-swap
    UPDATE (`status = 'active'` and the NOT EXISTS read in the same statement): a task resumed,
    replanned or cancelled meanwhile is left as it is. The worker's outcome write completes
    tasks in its own statement (claim.sql, `completed`) with the same condition.
    """
    with connection.cursor() as cursor:
        cursor.execute(SQL["complete_finished_tasks"], [task_ids])
