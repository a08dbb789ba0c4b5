"""The reviewer's view of executables: while no live worker can run them (no sandbox: bubblewrap
missing), their due runs wait with the reason the workers give, and no attempt is spent; once a
worker can, they are scheduled again. Statements in tasks/sql/no_sandbox.sql."""

from __future__ import annotations

from django.db import connection, transaction

from scheduler_project.sql import queries
from tasks.db import RUN_DUE_CHANNEL, notify
from tasks.processes import executables_unavailable, worker_sandboxes

SQL = queries("tasks", "no_sandbox.sql")
HOLD_BATCH = 1000  # runs marked per pass


def hold_or_release_executables(*, dead_after_seconds: float) -> tuple[int, int, str]:
    """(runs marked waiting, runs scheduled again, why executables cannot run or "").

    Only while some worker is alive: with none, nothing is claimed anyway and /health says so;
    the first worker to beat decides.
    """
    with transaction.atomic(), connection.cursor() as cursor:
        workers = worker_sandboxes(cursor, dead_after_seconds=dead_after_seconds)
        if not workers:
            return 0, 0, ""
        reason = executables_unavailable(workers)
        if reason:
            cursor.execute(SQL["hold"], {"reason": reason, "batch": HOLD_BATCH})
            return len(cursor.fetchall()), 0, reason
        cursor.execute(SQL["release"])
        released = len(cursor.fetchall())
        if released:
            notify(RUN_DUE_CHANNEL)
        return 0, released, ""
