"""Base for the long-running role commands: --once, signals, process heartbeat, the loop."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DEFAULT_DB_ALIAS, connection, connections

from scheduler_project.postgresql.hung import abandon_if_hung
from tasks.counters import loop_error_counter
from tasks.db import Listener
from tasks.loop import install_stop_signals, run_loop
from tasks.processes import beat, mark_stopped, process_name

logger = logging.getLogger(__name__)


class DaemonCommand(BaseCommand):
    """Subclasses set `role` and implement `run_once()` (True = did work) and `sleep_seconds()`."""

    role = ""
    listen_channels: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--once", action="store_true", help="one pass, then exit")

    def handle(self, *args: Any, **options: Any) -> None:
        self.name = process_name(self.role)
        self.stop = threading.Event()
        self.wake = threading.Event()
        self.next_beat = 0.0
        install_stop_signals(self.stop)
        listener = Listener(self.listen_channels, self.wake) if self.listen_channels else None
        if listener and not options["once"]:
            listener.start()
        logger.info("%s started as %s", self.role, self.name)
        try:
            run_loop(
                self._pass,
                stop=self.stop,
                sleep_seconds=self.sleep_seconds,
                wake=self.wake,
                once=options["once"],
                on_error=loop_error_counter(role=self.role, process=self.name),
            )
        finally:
            if listener:
                listener.stop()
            with connection.cursor() as cursor:
                mark_stopped(cursor, name=self.name)
            logger.info("%s %s stopped", self.role, self.name)

    def _pass(self) -> bool:
        if time.monotonic() >= self.next_beat:
            wrapper = connections[DEFAULT_DB_ALIAS]
            # Idempotent: a beat hung on an orphaned primary is given up and sent again.
            with (
                abandon_if_hung(
                    lambda: wrapper.connection,
                    settings.TASKS_HUNG_STATEMENT_SECONDS,
                    what=f"{self.role} heartbeat",
                ),
                connection.cursor() as cursor,
            ):
                beat(cursor, name=self.name, role=self.role)
            self.next_beat = time.monotonic() + settings.TASKS_HEARTBEAT_SECONDS
        return self.run_once()

    def run_once(self) -> bool:
        raise NotImplementedError

    def sleep_seconds(self) -> float:
        return min(settings.TASKS_HEARTBEAT_SECONDS, 1.0)
