"""Warnings in a create response: the task is valid and stored, but will not run as things are.

Today one: an executable task while no live worker can run executables (no sandbox, e.g.
bubblewrap missing). Its runs wait (they spend no attempt) until a worker can; the warning says
so at once instead of leaving the user to find a waiting run.
"""

from __future__ import annotations

import orjson
from django.conf import settings
from django.db import connection
from rest_framework import serializers

from tasks.api.renderers import RawJSON
from tasks.api.serializers import TaskOutputSerializer
from tasks.models import Task
from tasks.processes import executables_unavailable, worker_sandboxes


class TaskCreatedSerializer(TaskOutputSerializer):
    """The created task, as every read returns it, plus `warnings` when there are any."""

    warnings = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        read_only=True,
        help_text="Present only when the task cannot run as things are (it is created all the "
        'same): e.g. "no live worker can run executables: bubblewrap (bwrap) is not installed'
        '...". Its runs wait, spending no attempt, until a worker can run them.',
    )

    class Meta(TaskOutputSerializer.Meta):
        fields = [*TaskOutputSerializer.Meta.fields, "warnings"]


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
