"""Helpers shared by the task tests."""

from __future__ import annotations

import glob
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tasks.models import Run, Task
from tests.factories import RunFactory


def running_run(task: Task, **fields: Any) -> Run:
    """A run in flight: the check constraint wants worker, started_at and heartbeat_at set."""
    now = datetime.now(UTC)
    values = {
        "status": "running",
        "attempt": 1,
        "worker": "w-1",
        "started_at": now,
        "heartbeat_at": now,
    }
    return RunFactory(task=task, **(values | fields))


def finished_run(task: Task, status: str, **fields: Any) -> Run:
    """A run that ended with `status` after one attempt."""
    now = datetime.now(UTC)
    values = {"status": status, "attempt": 1, "started_at": now, "finished_at": now}
    return RunFactory(task=task, **(values | fields))


def alive_with(marker: str) -> list[int]:
    """Pids on the host whose command line contains `marker`."""
    found = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            if marker.encode() in Path(cmdline).read_bytes():
                found.append(int(cmdline.split("/")[2]))
        except OSError:
            pass
    return found
