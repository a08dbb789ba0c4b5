"""The shared daemon loop: signals, prompt shutdown, DB hygiene, --once, surviving a failed pass."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable

from django.db import close_old_connections

from tasks.db import is_unavailable
from tasks.outages import DATABASE

logger = logging.getLogger(__name__)


def install_stop_signals(stop: threading.Event) -> None:
    """SIGTERM/SIGINT set `stop`; a second signal exits at once."""

    def handler(signum: int, frame: object) -> None:
        if stop.is_set():
            raise SystemExit(1)
        logger.info("signal %s: finishing current work, then exiting", signum)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


# The pause after a failed pass, doubling from the first to the last while passes keep failing.
ERROR_PAUSES = (1.0, 30.0)


def error_pause(failures: int) -> float:
    """Seconds to wait after the `failures`-th failed pass in a row."""
    first, last = ERROR_PAUSES
    return min(last, first * 2 ** min(failures - 1, 16))


def _report(on_error: Callable[[Exception], None], exc: Exception) -> None:
    try:
        on_error(exc)
    except Exception as failure:  # e.g. the database is what failed: the log has the error
        logger.warning("could not count the failed pass: %s", failure)
        close_old_connections()


def run_loop(
    run_once: Callable[[], bool],
    *,
    stop: threading.Event,
    sleep_seconds: Callable[[], float],
    wake: threading.Event | None = None,
    once: bool = False,
    hygiene_seconds: float = 0.0,
    after_sleep: Callable[[], None] | None = None,
    on_error: Callable[[Exception], None] | None = None,
) -> None:
    """Call `run_once` until stopped; it returns True when it did work (go again at once).

    An exception in a pass is logged with its traceback (a database that is down: once, by
    tasks/outages.py), handed to `on_error` (the roles count it for /metrics), and the loop
    goes on after a pause that doubles while passes keep failing
    (`error_pause`; not for a database that is down): one bad row, a bug met by one pass or a
    database restart never kills the process nor spins it in a hot loop. Stale connections are
    closed before a pass, at most every `hygiene_seconds` (with CONN_HEALTH_CHECKS each check
    costs a round trip on the next query). `after_sleep` runs after each idle wait, before the
    next pass.
    """
    wake = wake or threading.Event()
    hygiene_at = 0.0
    failures = 0  # passes failed in a row
    while not stop.is_set():
        wake.clear()
        if time.monotonic() >= hygiene_at:
            close_old_connections()
            hygiene_at = time.monotonic() + hygiene_seconds
        try:
            busy = run_once()
            failures = 0
        except Exception as exc:
            # A database that is down is tried again at the first pause, so that the process
            # carries on as soon as it is back; other errors that keep coming back off. Its
            # outage is logged once, not with a traceback per pass.
            unavailable = is_unavailable(exc)
            failures = 0 if unavailable else failures + 1
            pause = error_pause(max(failures, 1))
            if unavailable:
                DATABASE.failed(exc, what="pass")
            else:
                logger.exception("pass failed; next pass in %.0f s", pause)
            close_old_connections()
            if on_error is not None:
                _report(on_error, exc)
            busy = False
            stop.wait(pause)
        if once:
            return
        if not busy:
            try:
                pause = sleep_seconds()
            except Exception as exc:
                if is_unavailable(exc):
                    DATABASE.failed(exc, what="next wake-up")
                else:
                    logger.exception("could not compute the next wake-up")
                pause = 1.0
            # Sleep in short steps so SIGTERM is honoured promptly even without a wake-up.
            deadline = time.monotonic() + max(0.0, pause)
            while not stop.is_set() and not wake.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                wake.wait(min(remaining, 1.0))
            if after_sleep is not None:
                after_sleep()
