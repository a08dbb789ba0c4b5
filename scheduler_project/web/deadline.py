"""A request's deadline: no request starts its database work after it (docs/operations.md,
"Admission control").

Admission control sheds a request that waited past the queue budget before it is served, but one
admitted just under the budget can still answer late when its process is starved of CPU: its
thread waits for a core before it reaches its first statement. So each admitted request gets a
deadline, `SCHEDULER_REQUEST_DEADLINE_SECONDS` after its bytes arrived (the gunicorn worker's
stamp, scheduler_project/gunicorn_worker.py), and if its first database statement would start
after it, `DeadlineExceeded` is raised instead; the admission middleware answers that 503 with
Retry-After. Nothing has been read or written then, so the answer is honest and a retry is safe.

Only the first statement is held to it: once a request has started its work it finishes, so a
request that is slow by nature (a batch of a thousand tasks, an admin page over a big history)
is not turned away half-way or forever. Checked on every database alias, through Django's
execute wrappers (the prepared cursor of tasks/db.py runs them too). A statement already running
is not cut short either: a `statement_timeout` per request would cost a round trip per request,
and the late answers measured were the process's queue for a core, not PostgreSQL
(bench/NOTEBOOK.md).
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
    """A Django execute wrapper that refuses a request's first statement after `at`
    (time.monotonic())."""

    def __init__(self, at: float) -> None:
        self.at = at
        self.exceeded = False
        self.started = False

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        if self.started or sql.lstrip().upper().startswith(_ALWAYS):
            return execute(sql, params, many, context)
        late = time.monotonic() - self.at
        if late > 0:
            self.exceeded = True
            raise DeadlineExceeded(f"the request's deadline passed {late:.3f} s before its work")
        self.started = True
        return execute(sql, params, many, context)


@contextlib.contextmanager
def enforced(deadline: Deadline) -> Iterator[Deadline]:
    """Every database alias of this thread refuses a first statement past `deadline` meanwhile."""
    with contextlib.ExitStack() as stack:
        for alias in connections:
            stack.enter_context(connections[alias].execute_wrapper(deadline))
        yield deadline
