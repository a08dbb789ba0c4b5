"""Holding rescues after the reviewer's own view of the database was interrupted.

A stale heartbeat means a dead worker only if the database took writes all along: after a
failover, or any outage, every worker's heartbeats stopped at once and resume only as each
worker reaches the new primary. A reviewer that could not complete its passes for a while (its
statements failed, or hung and were given up) waits one full rescue window, counted from its
first pass after the gap, before rescuing again: the workers get as long to beat again as a
single dead worker gets. A reviewer that starts within a rescue window of its server's start
(a restarted primary) waits for the rest of that window. A truly dead worker's runs are rescued
at most one rescue window later than otherwise, and only after an outage.
"""

from __future__ import annotations

import logging
import time

from django.db import connection

logger = logging.getLogger(__name__)

# A pass starting this much later than the interval after the end of the last completed one
# means the reviewer was cut off (failed or hung passes, a database restart, a failover).
GAP_SECONDS = 2.0


class RescueHold:
    def __init__(self, *, window: float, interval: float) -> None:
        self.window = window
        self.interval = interval
        self.last_ok: float | None = None  # monotonic end of the last completed pass
        self.until = 0.0

    def pass_started(self, now: float) -> None:
        if self.last_ok is None:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT extract(epoch FROM clock_timestamp() - pg_postmaster_start_time())"
                )
                up = float(cursor.fetchone()[0])
            if up < self.window:
                self._hold(now + self.window - up, f"the database started {up:.1f} s ago")
        elif now - self.last_ok > self.interval + GAP_SECONDS:
            self._hold(now + self.window, f"no pass completed for {now - self.last_ok:.1f} s")

    def pass_completed(self, ended: float) -> None:
        self.last_ok = ended

    def holding(self, now: float) -> bool:
        return now < self.until

    def _hold(self, until: float, why: str) -> None:
        if until > self.until:
            self.until = until
            logger.warning(
                "rescues held for %.1f s: %s (heartbeats get a full window to resume)",
                until - time.monotonic(),
                why,
                extra={"event": "rescues_held"},
            )
