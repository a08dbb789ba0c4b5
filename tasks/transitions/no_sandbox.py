"""The reviewer's view of executables: while no live worker can run them (no sandbox: bubblewrap
missing), their due runs wait with the reason the workers give, and no attempt is spent; once a
worker can, they are scheduled again. Statements in tasks/sql/no_sandbox.sql."""

from __future__ import annotations

from django.db import connection, transaction

from scheduler_project.sql import queries
from tasks.db import RUN_DUE_CHANNEL, notify
from tasks.processes import NO_SANDBOX_PREFIX, executables_unavailable, worker_sandboxes

SQL = queries("tasks", "no_sandbox.sql")
HOLD_BATCH = 1000  # runs marked per pass
STARVED_PREFIX = "not started within the start SLA"  # rescue.sql flag_starved's reason


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
            params: dict[str, str | int] = {
                "prefix": NO_SANDBOX_PREFIX,
                "reason": reason,
                "starved": STARVED_PREFIX,
                "batch": HOLD_BATCH,
            }
            cursor.execute(SQL["hold"], params)
            return len(cursor.fetchall()), 0, reason
        cursor.execute(SQL["release"], {"prefix": NO_SANDBOX_PREFIX})
        released = len(cursor.fetchall())
        if released:
            notify(RUN_DUE_CHANNEL)
        return 0, released, ""
