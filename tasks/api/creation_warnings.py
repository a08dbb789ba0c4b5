"""Warnings in a create response: the task is valid and stored, but will not run as things are.

For an executable task: no live worker can run executables (no sandbox, e.g. bubblewrap
missing): its runs wait, spending no attempt, until a worker can; and an uploaded file without a
shebang, which every run would refuse to execute. Said at once, instead of leaving the user to
find a waiting or failed run.
"""

from __future__ import annotations

import orjson
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import connection

from scheduler_project.web.renderers import RawJSON
from tasks.models import Task
from tasks.processes import executables_unavailable, worker_sandboxes
from tasks.worker.sandbox import interpreter_refusal


def task_warnings(task: Task, upload: UploadedFile | None = None) -> list[str]:
    """Why `task` cannot run now, one sentence each ([] when nothing stands in its way);
    `upload` is the file the request brought, if any."""
    if task.kind != Task.Kind.EXECUTABLE:
        return []
    found = []
    if upload is not None:
        upload.seek(0)
        head = upload.read(4)
        upload.seek(0)
        refused = interpreter_refusal(head)
        if refused:
            found.append(f"{refused}; every run of this file will fail")
    with connection.cursor() as cursor:
        workers = worker_sandboxes(
            cursor, dead_after_seconds=settings.REVIEWERS_PROCESS_DEAD_AFTER_SECONDS
        )
    reason = executables_unavailable(workers)
    if reason:
        found.append(f"{reason}; its runs wait until a worker can run them")
    return found


def with_warnings(body: RawJSON, warnings: list[str]) -> RawJSON:
    """`body` (a JSON object) with a `warnings` member appended, when there are any."""
    if not warnings:
        return body
    text = body.text.rstrip()
    return RawJSON(f'{text[:-1]}, "warnings": {orjson.dumps(warnings).decode()}}}')
