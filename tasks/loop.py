"""The shared daemon loop: signals, prompt shutdown, DB hygiene, --once, per-unit error handling."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable

from django.db import close_old_connections

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


def run_loop(
    run_once: Callable[[], bool],
    *,
    stop: threading.Event,
    sleep_seconds: Callable[[], float],
    wake: threading.Event | None = None,
    once: bool = False,
    hygiene_seconds: float = 0.0,
    after_sleep: Callable[[], None] | None = None,
    retry_errors: bool = True,
) -> None:
    """Call `run_once` until stopped; it returns True when it did work (go again at once).

    Exceptions are logged per unit and the loop carries on after a short pause, so one bad row
    or a database restart never kills the process nor spins it in a hot loop; with
    `retry_errors=False` they end the loop instead (the caller's state may be inconsistent).
    Stale connections are closed before a pass, at most every `hygiene_seconds` (with
    CONN_HEALTH_CHECKS each check costs a round trip on the next query). `after_sleep` runs
    after each idle wait, before the next pass.
    """
    wake = wake or threading.Event()
    hygiene_at = 0.0
    while not stop.is_set():
        wake.clear()
        if time.monotonic() >= hygiene_at:
            close_old_connections()
            hygiene_at = time.monotonic() + hygiene_seconds
        try:
            busy = run_once()
        except Exception:
            if not retry_errors:
                raise
            logger.exception("pass failed; retrying shortly")
            close_old_connections()
            busy = False
            stop.wait(1.0)
        if once:
            return
        if not busy:
            try:
                pause = sleep_seconds()
            except Exception:
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
