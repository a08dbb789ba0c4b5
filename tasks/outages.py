"""A database outage logged once per process when it begins and once when it ends.

While PostgreSQL is down every loop pass, LISTEN reconnect, heartbeat and API request fails the
same way; a line (or a traceback) for each told nothing new after the first: one 20 s stop gave
about 670 WARNING and ERROR lines. Every part of a process reports here instead: the first
failure is logged with its error, the rest are counted, and the first connection made after it
logs that the database is back, how long it was gone and how many failures that was.

A process-wide state, not one per thread: the scheduler's loop, its listener and a worker's
watch thread see one database. A server that accepts connections but refuses the work (a
read-only standby during a failover) may log a pair of lines per reconnect while that lasts.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.db import DEFAULT_DB_ALIAS
from django.db.backends.signals import connection_created

logger = logging.getLogger(__name__)


class OutageLog:
    """The outage state of one process; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: float | None = None  # monotonic time of the first failure
        self._failures = 0

    @property
    def down(self) -> bool:
        return self._since is not None

    def failed(self, exc: BaseException, *, what: str) -> None:
        """`what` (a loop pass, a listener, a request) met the database unavailable."""
        with self._lock:
            self._failures += 1
            if self._since is not None:
                return
            self._since = time.monotonic()
        logger.warning(
            "database unavailable (%s: %s: %s); nothing more is logged until it is back",
            what,
            type(exc).__name__,
            str(exc).strip(),
        )

    def recovered(self, *, what: str) -> None:
        """`what` reached the database again (connected, or completed a pass)."""
        if self._since is None:  # the common case, without the lock
            return
        with self._lock:
            if self._since is None:
                return
            seconds, failures = time.monotonic() - self._since, self._failures
            self._since, self._failures = None, 0
        logger.warning(
            "database available again (%s) after %.1f s; failures meanwhile: %d",
            what,
            seconds,
            failures,
        )


DATABASE = OutageLog()


def _connected(sender: Any, connection: Any, **kwargs: Any) -> None:
    if connection.alias == DEFAULT_DB_ALIAS:
        DATABASE.recovered(what="connected")


connection_created.connect(_connected, dispatch_uid="tasks.outages")
