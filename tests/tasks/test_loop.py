"""tasks.loop.run_loop, the loop every role runs (the worker with its own options)."""

from __future__ import annotations

import itertools
import threading
import time

from django.db import OperationalError

from tasks.loop import ERROR_PAUSES, error_pause, run_loop


def test_a_failing_pass_is_logged_reported_and_the_loop_goes_on(caplog) -> None:
    stop, calls, reported = threading.Event(), [], []

    def run_once() -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("one bad pass")
        stop.set()
        return False

    run_loop(run_once, stop=stop, sleep_seconds=lambda: 0.0, on_error=reported.append)

    assert len(calls) == 2
    assert [str(exc) for exc in reported] == ["one bad pass"]
    [record] = [r for r in caplog.records if r.name == "tasks.loop" and r.levelname == "ERROR"]
    assert record.exc_info is not None and "one bad pass" in str(record.exc_info[1])


def test_a_report_that_fails_does_not_end_the_loop() -> None:
    stop, calls = threading.Event(), []

    def run_once() -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("one bad pass")
        stop.set()
        return False

    def report(exc: Exception) -> None:
        raise ConnectionError("the counter could not be written")

    run_loop(run_once, stop=stop, sleep_seconds=lambda: 0.0, on_error=report)
    assert len(calls) == 2


def test_the_pause_after_failed_passes_doubles_up_to_its_cap() -> None:
    first, last = ERROR_PAUSES
    pauses = [error_pause(n) for n in range(1, 40)]
    assert pauses[:3] == [first, 2 * first, 4 * first]
    assert pauses == sorted(pauses) and pauses[-1] == last


def test_after_sleep_runs_after_idle_passes_only() -> None:
    stop, events = threading.Event(), []

    def run_once() -> bool:
        events.append("pass")
        if len(events) >= 5:
            stop.set()
        return len(events) == 1  # busy once (no sleep), then idle

    run_loop(
        run_once,
        stop=stop,
        sleep_seconds=lambda: 0.0,
        after_sleep=lambda: events.append("after_sleep"),
    )
    assert events == ["pass", "pass", "after_sleep", "pass", "after_sleep", "pass", "after_sleep"]


def test_once_runs_a_single_pass() -> None:
    calls = []
    run_loop(
        lambda: calls.append(1) or True,
        stop=threading.Event(),
        sleep_seconds=lambda: 0.0,
        once=True,
    )
    assert calls == [1]


def test_a_database_that_is_down_is_tried_again_at_the_first_pause() -> None:
    stop, started = threading.Event(), []

    def run_once() -> bool:
        started.append(time.monotonic())
        if len(started) <= 3:
            raise OperationalError("connection refused")
        stop.set()
        return False

    run_loop(run_once, stop=stop, sleep_seconds=lambda: 0.0)
    pauses = [b - a for a, b in itertools.pairwise(started)]
    assert all(pause < ERROR_PAUSES[0] * 1.5 for pause in pauses), pauses
