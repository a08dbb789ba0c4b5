"""Process heartbeat rows: how /health and the reviewer know which roles are alive."""

from __future__ import annotations

import os
import socket
import uuid
from typing import Any

_UPSERT_SQL = """
INSERT INTO tasks_process (name, role, host, pid, concurrency, started_at, last_seen_at)
VALUES (%s, %s, %s, %s, %s, clock_timestamp(), clock_timestamp())
ON CONFLICT (name) DO UPDATE SET last_seen_at = clock_timestamp(), stopped_at = NULL
"""


def process_name(role: str) -> str:
    """A name unique to this process start: host, pid and a random suffix (pids are reused)."""
    return f"{role}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def beat(cursor: Any, *, name: str, role: str, concurrency: int = 0) -> None:
    """Record that this process is alive, on the database clock. Works on any DB-API cursor."""
    cursor.execute(_UPSERT_SQL, [name, role, socket.gethostname(), os.getpid(), concurrency])


def mark_stopped(cursor: Any, *, name: str) -> None:
    cursor.execute(
        "UPDATE tasks_process SET stopped_at = clock_timestamp() WHERE name = %s", [name]
    )
