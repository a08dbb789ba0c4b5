"""Process heartbeat rows: how /health and the reviewer know which roles are alive."""

from __future__ import annotations

import os
import socket
import uuid
from typing import Any

from scheduler_project.sql import queries

SQL = queries("tasks", "processes.sql")


def process_name(role: str) -> str:
    """A name unique to this process start: host, pid and a random suffix (pids are reused)."""
    return f"{role}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def beat(
    cursor: Any,
    *,
    name: str,
    role: str,
    concurrency: int = 0,
    cpu_millis: int | None = None,
    memory_bytes: int | None = None,
) -> None:
    """Record that this process is alive, on the database clock. Works on any DB-API cursor.
    A worker records its capacity too (None: no limit), for the reviewer's "fits no worker"."""
    cursor.execute(SQL["beat"], [name, role, socket.gethostname(), os.getpid(), concurrency,
                                 cpu_millis, memory_bytes])  # fmt: skip


def mark_stopped(cursor: Any, *, name: str) -> None:
    cursor.execute(SQL["mark_stopped"], [name])
