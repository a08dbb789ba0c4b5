"""Threads other apps run inside the worker process, beside its loop (the notifications app's
delivery thread). An app registers a starter from its AppConfig.ready, so the worker starts
and stops them without importing the app."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class Companion(Protocol):
    def stop(self) -> None: ...


# A starter starts its thread and returns it, or returns None when its settings turn it off.
Starter = Callable[[], Companion | None]

_starters: list[Starter] = []


def register(starter: Starter) -> None:
    """Start `starter`'s thread in every worker process from now on (once, however often
    registered)."""
    if starter not in _starters:
        _starters.append(starter)


def start_all() -> list[Companion]:
    """Start the registered threads; return those that started, for `stop_all`."""
    return [thread for thread in (starter() for starter in _starters) if thread is not None]


def stop_all(threads: list[Companion]) -> None:
    for thread in threads:
        thread.stop()
