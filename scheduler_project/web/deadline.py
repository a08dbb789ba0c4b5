"""A request's deadline: no database statement starts after it (docs/operations.md, "Admission
control").

Admission control sheds a request that waited past the queue budget before it is served, but one
admitted just under the budget can still answer late when its process is starved of CPU: its
threads take turns for a core between statements. So each admitted request gets a deadline,
`SCHEDULER_REQUEST_DEADLINE_SECONDS` after its connection entered its process's queue (the
gunicorn worker's stamp, scheduler_project/gunicorn_worker.py), and a statement about to start
after it raises `DeadlineExceeded` instead; the admission middleware answers that 503 with
Retry-After. A create that ran out of time is rolled back with its transaction, so a 503 never
hides a task that was made.

Checked before each statement, on every database alias, through Django's execute wrappers (the
prepared cursor of tasks/db.py runs them too). A statement already running is not cut short: a
`statement_timeout` per request would cost a round trip per request, and the late answers
measured were the process's queue for a core, not PostgreSQL (bench/NOTEBOOK.md).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from django.db import connections

# Ending a transaction that is already failing must not fail too: atomic's savepoint statements
# and rollbacks always run.
_ALWAYS = ("SAVEPOINT", "RELEASE", "ROLLBACK")


class DeadlineExceeded(Exception):
    """The request's deadline passed before a database statement started."""


class Deadline:
    """A Django execute wrapper that refuses statements after `at` (time.monotonic())."""

    def __init__(self, at: float) -> None:
        self.at = at
        self.exceeded = False

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        if time.monotonic() > self.at and not sql.lstrip().upper().startswith(_ALWAYS):
            self.exceeded = True
            raise DeadlineExceeded(
                f"the request's deadline passed {time.monotonic() - self.at:.3f} s ago"
            )
        return execute(sql, params, many, context)


@contextlib.contextmanager
def enforced(deadline: Deadline) -> Iterator[Deadline]:
    """Every database alias of this thread refuses statements past `deadline` meanwhile."""
    with contextlib.ExitStack() as stack:
        for alias in connections:
            stack.enter_context(connections[alias].execute_wrapper(deadline))
        yield deadline
