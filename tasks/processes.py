"""Process heartbeat rows: how /health and the reviewer know which roles are alive."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any

from scheduler_project.sql import queries
from tasks.admission import sandbox

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
    sandbox: tuple[str, str] = ("", ""),
) -> None:
    """Record that this process is alive, on the database clock. Works on any DB-API cursor.
    A worker records its capacity too (None: no limit), for the reviewer's "fits no worker",
    and its `sandbox`: (mode, "") when it can run executables, ("", why not) when it cannot."""
    cursor.execute(
        SQL["beat"],
        [
            name,
            role,
            socket.gethostname(),
            os.getpid(),
            concurrency,
            cpu_millis,
            memory_bytes,
            *sandbox,
        ],
    )


def mark_stopped(cursor: Any, *, name: str) -> None:
    cursor.execute(SQL["mark_stopped"], [name])


@dataclass(frozen=True)
class WorkerSandbox:
    """A live worker and how it runs executables (`mode` "": it cannot, `error` says why)."""

    name: str
    host: str
    pid: int
    mode: str
    error: str


def worker_sandboxes(cursor: Any, *, dead_after_seconds: float) -> list[WorkerSandbox]:
    """The live workers (seen within `dead_after_seconds`) and their sandboxes, by name."""
    cursor.execute(SQL["worker_sandboxes"], [dead_after_seconds])
    return [WorkerSandbox(*row) for row in cursor.fetchall()]


def executables_unavailable(workers: list[WorkerSandbox]) -> str:
    """Why no live worker can run an executable now ("" when one can)."""
    if any(w.mode for w in workers):
        return ""
    if not workers:
        return sandbox.WORDS.format(why="no worker is running")
    reasons = sorted({w.error or "no sandbox reported" for w in workers})
    return sandbox.WORDS.format(why="; ".join(reasons))
