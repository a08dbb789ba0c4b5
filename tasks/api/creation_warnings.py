"""Warnings in a create response: the task is valid and stored, but will not run as things are.

Today one: an executable task while no live worker can run executables (no sandbox, e.g.
bubblewrap missing). Its runs wait (they spend no attempt) until a worker can; the warning says
so at once instead of leaving the user to find a waiting run.
"""

from __future__ import annotations

import orjson
from django.conf import settings
from django.db import connection

from tasks.api.renderers import RawJSON
from tasks.models import Task
from tasks.processes import executables_unavailable, worker_sandboxes


def task_warnings(task: Task) -> list[str]:
    """Why `task` cannot run now, one sentence each ([] when nothing stands in its way)."""
    if task.kind != Task.Kind.EXECUTABLE:
        return []
    with connection.cursor() as cursor:
        workers = worker_sandboxes(
            cursor, dead_after_seconds=settings.REVIEWERS_PROCESS_DEAD_AFTER_SECONDS
        )
    reason = executables_unavailable(workers)
    return [f"{reason}; its runs wait until a worker can run them"] if reason else []


def with_warnings(body: RawJSON, warnings: list[str]) -> RawJSON:
    """`body` (a JSON object) with a `warnings` member appended, when there are any."""
    if not warnings:
        return body
    text = body.text.rstrip()
    return RawJSON(f'{text[:-1]}, "warnings": {orjson.dumps(warnings).decode()}}}')
