"""The worker's watch thread: heartbeats, LISTEN wake-ups, and stopping runs it no longer holds.

It reaches the worker through the `HeldRuns` protocol and the worker's wake-up event only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol
from uuid import UUID

import psycopg
from django.conf import settings

from scheduler_project.postgresql.hung import abandon_if_hung
from tasks.counters import count_loop_error
from tasks.db import RUN_CANCEL_CHANNEL, RUN_DUE_CHANNEL, connect, is_unavailable
from tasks.outages import DATABASE
from tasks.processes import beat, mark_stopped
from tasks.transitions import claim, zombie
from tasks.worker.zombie_tracker import Activity, RunKey, Tracker

logger = logging.getLogger(__name__)


class HeldRuns(Protocol):
    """The runs a worker holds, as the watch thread sees them (thread-safe)."""

    def claim_mark(self) -> int:
        """A mark that orders claims: runs claimed after it are not held "before" it."""
        ...

    def held_before(self, mark: int) -> set[UUID]:
        """Ids of runs claimed up to `mark` and still held (no outcome decided)."""
        ...

    def unrecorded(self) -> set[UUID]:
        """Ids of runs claimed here whose outcome is not recorded yet: the runs to renew."""
        ...

    def lose(self, run_ids: set[UUID], *, reason: str) -> None:
        """Stop the payloads of runs no longer held; their results will be dropped."""
        ...

    def executing(self) -> dict[RunKey, Activity]:
        """The executables running now, by (run id, attempt), for the zombie check."""
        ...

    def stop_run(self, run_id: UUID, *, reason: str) -> None:
        """Cancel a held run; its outcome is recorded as `cancelled` with `reason`."""
        ...


class Watch(threading.Thread):
    """Renews the heartbeat of every run `runs` holds and this process's row, once per interval,
    on its own connection; LISTENs for due runs (sets `wake`) and cancellations."""

    def __init__(
        self,
        *,
        name: str,
        concurrency: int,
        runs: HeldRuns,
        wake: threading.Event,
        offers: tuple[int | None, int | None] = (None, None),
        sandbox: Callable[[], tuple[str, str]] = lambda: ("", ""),
    ) -> None:
        super().__init__(name="watch", daemon=True)
        self.process = name
        self.concurrency = concurrency
        self.offers = offers  # (millicores, bytes) the worker offers; None: no limit
        # How the worker can run executables now: asked at every beat, so a sandbox installed
        # (or removed) while it runs is noticed and reported without a restart.
        self.sandbox = sandbox
        self.runs = runs
        self.wake = wake
        self.stopping = threading.Event()
        self.interval = settings.TASKS_HEARTBEAT_SECONDS
        # Stop payloads well before the reviewer would rescue them, so two copies never run.
        self.give_up_after = settings.REVIEWERS_RESCUE_AFTER_SECONDS * 0.7
        self.hung_after = settings.TASKS_HUNG_STATEMENT_SECONDS
        self.last_beat = time.monotonic()
        self.conn: psycopg.Connection | None = None
        self.zombies = Tracker(after=settings.TASKS_ZOMBIE_AFTER_SECONDS)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=5)
        if self.conn is not None and not self.conn.closed:
            self.conn.close()
        try:
            with connect() as conn:
                mark_stopped(conn.cursor(), name=self.process)
        except psycopg.Error:
            logger.warning("could not mark process %s stopped", self.process)

    def run(self) -> None:
        next_beat = 0.0
        while not self.stopping.is_set():
            try:
                # A heartbeat hung on an orphaned primary is given up (uncancelled) and written
                # again on a new connection, which tries that host last (postgresql/hung.py).
                with abandon_if_hung(lambda: self.conn, self.hung_after, what="worker heartbeat"):
                    if self.conn is None or self.conn.closed:
                        self.conn = connect()
                        self.conn.execute(f"LISTEN {RUN_DUE_CHANNEL}")
                        self.conn.execute(f"LISTEN {RUN_CANCEL_CHANNEL}")
                        self.wake.set()  # notifications may have been missed meanwhile
                    if time.monotonic() >= next_beat:
                        self._beat()
                        next_beat = time.monotonic() + self.interval
                timeout = max(0.0, min(next_beat - time.monotonic(), 0.5))
                for note in self.conn.notifies(timeout=timeout):
                    if note.channel == RUN_DUE_CHANNEL:
                        self.wake.set()
                    elif note.channel == RUN_CANCEL_CHANNEL:
                        next_beat = 0.0  # check which runs are still ours right away
                        break
            except psycopg.Error as exc:
                if is_unavailable(exc):
                    DATABASE.failed(exc, what="worker watch")
                else:
                    logger.warning("watch connection failed: %s", exc)
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
                self._give_up_if_cut_off()
                self.stopping.wait(0.5)
            except Exception:
                # A bug met by one pass must not end the thread: heartbeats would stop while
                # the worker runs on, and the reviewer would hand its runs to another worker.
                logger.exception("watch pass failed; retrying shortly")
                self._count_failed_pass()
                self._give_up_if_cut_off()
                self.stopping.wait(1.0)

    def _count_failed_pass(self) -> None:
        try:
            if self.conn is not None and not self.conn.closed:
                count_loop_error(self.conn.cursor(), role="worker", process=self.process)
        except psycopg.Error as exc:
            logger.warning("could not count the failed watch pass: %s", exc)

    def _beat(self) -> None:
        found = self.sandbox()
        mark = self.runs.claim_mark()
        known = self.runs.unrecorded()
        assert self.conn is not None
        with self.conn.transaction():
            cursor = self.conn.cursor()
            held = claim.renew_heartbeats(cursor, worker=self.process, run_ids=known)
            beat(
                cursor,
                name=self.process,
                role="worker",
                concurrency=self.concurrency,
                cpu_millis=self.offers[0],
                memory_bytes=self.offers[1],
                sandbox=found,
            )
        self.last_beat = time.monotonic()
        lost = self.runs.held_before(mark) - held
        if lost:
            self.runs.lose(lost, reason="cancelled or taken back by the reviewer")
        self._check_zombies()

    def _check_zombies(self) -> None:
        """Flag the executables that went quiet (no CPU, no output), unflag those that stirred,
        and cancel the flagged ones whose task says `on_zombie: cancel`."""
        executing = self.runs.executing()
        quiet, stirred = self.zombies.check(executing)
        if not quiet and not stirred:
            return
        assert self.conn is not None
        try:
            with self.conn.transaction():
                cursor = self.conn.cursor()
                flagged = zombie.flag(
                    cursor, worker=self.process, quiet=[(*key, idle) for key, idle in quiet]
                )
                zombie.unflag(cursor, worker=self.process, runs=stirred)
        except psycopg.Error:
            self.zombies.undo(quiet, stirred)  # noticed again on the next beat
            raise
        idle = {key[0]: seconds for key, seconds in quiet}
        for run_id, task_id, attempt, on_zombie in flagged:
            seconds = idle.get(run_id, 0.0)
            activity = executing.get((run_id, attempt))
            means = activity.quiet_means if activity is not None else "no activity"
            logger.warning(
                "run=%s task=%s attempt=%s is a zombie: %s for %.0f s (on_zombie: %s)",
                *(run_id, task_id, attempt, means, seconds, on_zombie),
                extra={"event": "run_zombie", "run": str(run_id)},
            )
            if on_zombie == "cancel":
                reason = f"cancelled as a zombie: {means} for {seconds:.0f} s (on_zombie: cancel)"
                self.runs.stop_run(run_id, reason=reason)

    def _give_up_if_cut_off(self) -> None:
        if time.monotonic() - self.last_beat > self.give_up_after:
            held = self.runs.held_before(self.runs.claim_mark())
            if held:
                self.runs.lose(held, reason="database unreachable; heartbeat lost")
