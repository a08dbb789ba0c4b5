"""An executable workflow step reads its upstream steps' outputs from the file
SCHEDULER_CONTEXT_FILE names (its payload's `context`, as the release wrote it); an executable
of no workflow gets no such file."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import UTC, datetime

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from tasks.transitions.claim import ClaimedRun
from tasks.worker import executors

SCRIPT = (
    b"#!/bin/sh\n"
    b'if [ -n "$SCHEDULER_CONTEXT_FILE" ]; then cat "$SCHEDULER_CONTEXT_FILE"; else echo none; fi\n'
)


def claimed(executable: str, payload: dict) -> ClaimedRun:
    now = datetime.now(UTC)
    return ClaimedRun(
        id=uuid.uuid4(),
        task_id=uuid.uuid4(),
        scheduled_at=now,
        execute_at=now,
        attempt=1,
        max_attempts=1,
        kind="executable",
        payload=payload,
        executable=executable,
        timeout=10.0,
        backoff_base=2.0,
        backoff_cap=60.0,
        claimed_at=now,
        overlap="allow",
        priority=5,
        cpu_millis=0,
        memory_bytes=0,
    )


def test_an_executable_step_reads_its_context_and_passes_json_on(settings, tmp_path) -> None:
    settings.MEDIA_ROOT = str(tmp_path)
    settings.SCHEDULER_SANDBOX_ALLOW_RLIMIT_ONLY = True
    name = default_storage.save("context-step.sh", ContentFile(SCRIPT))
    context = {"steps": {"extract": {"output": {"rows": 3}}, "check": {"output": "ok"}}}
    result = executors.execute(
        claimed(name, {"args": [], "context": context}), cancel=threading.Event(), timeout=10
    )
    assert result.ok, result.error
    assert json.loads(result.output) == context
    plain = executors.execute(claimed(name, {"args": []}), cancel=threading.Event(), timeout=10)
    assert plain.ok and plain.output.strip() == "none"
