"""The benchmark's job body: one fixed-width line per start, per process file."""

from __future__ import annotations

import os
import threading
import time
from typing import IO, Any

from tasks.handlers import HandlerContext, register

LINE_WIDTH = 120
_lock = threading.Lock()
_out: IO[str] | None = None


def _file() -> IO[str]:
    global _out
    if _out is None:
        folder = os.environ["BENCH_RUN_DIR"]
        _out = open(os.path.join(folder, f"{os.getpid()}.log"), "a", buffering=1)
    return _out


@register("bench")
def bench(context: HandlerContext, **args: Any) -> None:
    """Append `KEY SCHEDULED START`; nothing else touches the database."""
    start = time.time()
    line = f"{context.idempotency_key} {context.scheduled_at.timestamp():.6f} {start:.6f}"
    with _lock:
        _file().write(line.ljust(LINE_WIDTH - 1) + "\n")


def read_lines(folder: str) -> list[tuple[str, float, float]]:
    """(key, scheduled, start) of every line written in `folder`."""
    rows = []
    for name in os.listdir(folder):
        if not name.endswith(".log"):
            continue
        with open(os.path.join(folder, name)) as handle:
            for line in handle:
                if not line.endswith("\n"):
                    continue  # still being written: the harness reads while bodies run
                key, scheduled, start = line.split()
                rows.append((key, float(scheduled), float(start)))
    return rows
