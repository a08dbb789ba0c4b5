"""tasks.loop.run_loop, the loop every role runs (the worker with its own options)."""

from __future__ import annotations

import threading

import pytest

from tasks.loop import run_loop


def test_a_failing_pass_is_retried_by_default() -> None:
    stop, calls = threading.Event(), []

    def run_once() -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("one bad pass")
        stop.set()
        return False

    run_loop(run_once, stop=stop, sleep_seconds=lambda: 0.0)
    assert len(calls) == 2


def test_a_failing_pass_ends_the_loop_when_errors_are_not_retried() -> None:
    def run_once() -> bool:
        raise RuntimeError("the worker's state may be inconsistent")

    with pytest.raises(RuntimeError):
        run_loop(run_once, stop=threading.Event(), sleep_seconds=lambda: 0.0, retry_errors=False)


def test_after_sleep_runs_after_idle_passes_only() -> None:
    stop, events = threading.Event(), []

    def run_once() -> bool:
        events.append("pass")
        if len(events) >= 5:
            stop.set()
        return len(events) == 1  # busy once (no sleep), then idle

    run_loop(run_once, stop=stop, sleep_seconds=lambda: 0.0,
             after_sleep=lambda: events.append("after_sleep"))  # fmt: skip
    assert events == ["pass", "pass", "after_sleep", "pass", "after_sleep", "pass", "after_sleep"]


def test_once_runs_a_single_pass() -> None:
    calls = []
    run_loop(lambda: calls.append(1) or True, stop=threading.Event(),
             sleep_seconds=lambda: 0.0, once=True)  # fmt: skip
    assert calls == [1]
