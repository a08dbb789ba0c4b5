"""Each task's recent runs for the console's strips, for a whole page of tasks in one query
(tasks/sql/console.sql `strips`): the list shows fifty strips without fifty queries."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from uuid import UUID

from scheduler_project.sql import queries
from tasks.models import Run

SQL = queries("tasks", "console.sql")

LIST_STRIP = 10  # squares per task on the task list
PAGE_STRIP = 30  # squares on a task's own page


def recent_runs(task_ids: list[UUID], *, now: datetime, count: int) -> dict[UUID, list[Run]]:
    """The latest `count` runs of each task (its history at `now`, as tasks/history.py defines
    it), newest first; a task without runs maps to []."""
    found: dict[UUID, list[Run]] = defaultdict(list)
    if not task_ids:
        return found
    params = {"task_ids": list(task_ids), "now": now, "count": count}
    for run in Run.objects.raw(SQL["strips"], params):
        found[run.task_id].append(run)
    return found
