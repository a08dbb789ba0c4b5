"""The worker's watch thread: heartbeats, LISTEN wake-ups, and stopping runs it no longer holds."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

import psycopg
from django.conf import settings

from tasks.db import RUN_CANCEL_CHANNEL, RUN_DUE_CHANNEL, connect
from tasks.processes import beat, mark_stopped
from tasks.transitions import claim

if TYPE_CHECKING:
    from tasks.worker import Worker

logger = logging.getLogger(__name__)


class Watch(threading.Thread):
    def __init__(self, worker: Worker) -> None:
        super().__init__(name="watch", daemon=True)
        self.worker = worker
        self.stopping = threading.Event()
        self.interval = settings.TASKS_HEARTBEAT_SECONDS
        # Stop payloads well before the reviewer would rescue them, so two copies never run.
        self.give_up_after = settings.REVIEWERS_RESCUE_AFTER_SECONDS * 0.7
        self.last_beat = time.monotonic()
        self.conn: psycopg.Connection | None = None

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=5)
        if self.conn is not None and not self.conn.closed:
            self.conn.close()
        try:
            with connect() as conn:
                mark_stopped(conn.cursor(), name=self.worker.name)
        except psycopg.Error:
            logger.warning("could not mark process %s stopped", self.worker.name)

    def run(self) -> None:
        next_beat = 0.0
        while not self.stopping.is_set():
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = connect()
                    self.conn.execute(f"LISTEN {RUN_DUE_CHANNEL}")
                    self.conn.execute(f"LISTEN {RUN_CANCEL_CHANNEL}")
                    self.worker.wake.set()  # notifications may have been missed meanwhile
                if time.monotonic() >= next_beat:
                    self._beat()
                    next_beat = time.monotonic() + self.interval
                timeout = max(0.0, min(next_beat - time.monotonic(), 0.5))
                for note in self.conn.notifies(timeout=timeout):
                    if note.channel == RUN_DUE_CHANNEL:
                        self.worker.wake.set()
                    elif note.channel == RUN_CANCEL_CHANNEL:
                        next_beat = 0.0  # check which runs are still ours right away
                        break
            except psycopg.Error as exc:
                logger.warning("watch connection failed: %s", exc)
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
                self._give_up_if_cut_off()
                self.stopping.wait(0.5)

    def _beat(self) -> None:
        seq = self.worker.claim_seq
        known = self.worker.unrecorded()
        assert self.conn is not None
        with self.conn.transaction():
            cursor = self.conn.cursor()
            held = claim.renew_heartbeats(cursor, worker=self.worker.name, run_ids=known)
            beat(cursor, name=self.worker.name, role="worker", concurrency=self.worker.concurrency)
        self.last_beat = time.monotonic()
        lost = self.worker.held_before(seq) - held
        if lost:
            self.worker.lose(lost, reason="cancelled or taken back by the reviewer")

    def _give_up_if_cut_off(self) -> None:
        if time.monotonic() - self.last_beat > self.give_up_after:
            held = self.worker.held_before(self.worker.claim_seq)
            if held:
                self.worker.lose(held, reason="database unreachable; heartbeat lost")
