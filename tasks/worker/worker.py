"""The worker: claim due runs, execute them on a thread pool, record outcomes in batches.

Threads and what they touch:
- the main thread claims and records (Django's connection of that thread);
- executor threads only run payloads, start each on its `execute_at` and hand the result back;
- the watch thread renews heartbeats, LISTENs for wake-ups and cancellations (its own connection)
  and stops payloads of runs this worker no longer holds.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from queue import Empty, SimpleQueue
from uuid import UUID

from django.conf import settings
from django.db import (
    DEFAULT_DB_ALIAS,
    DatabaseError,
    close_old_connections,
    connection,
    connections,
)

from scheduler_project.postgresql.hung import abandon_if_hung
from tasks.counters import loop_error_counter
from tasks.db import DatabaseClock, forget_prepared, is_unavailable
from tasks.loop import run_loop
from tasks.outages import DATABASE
from tasks.processes import process_name
from tasks.transitions import claim, overlap
from tasks.worker import companions as companion_threads
from tasks.worker.executors import ExecutionResult, execute
from tasks.worker.flight import InFlight, deadline_slack
from tasks.worker.sandbox import capability
from tasks.worker.watch import Watch
from tasks.worker.zombie_tracker import Activity, RunKey

logger = logging.getLogger("tasks.worker")  # as before the package: logs filter on it
RECLAIM_PAUSE_SECONDS = 0.02  # well inside the claim-ahead window (TASKS_PREFETCH_SECONDS)
# After a claim that passed over a key another claim held: that claim commits within
# milliseconds. At most PASSED_RECLAIMS such pauses in a row, then the usual one: a key row held
# longer (a change of its limit in an open transaction) never makes a worker spin.
PASSED_PAUSE_SECONDS = 0.002
PASSED_RECLAIMS = 5
# The claim floor (claim.claim_floor): found again this often; its margin before the earliest
# claimable run, or before now, covers runs committed a little after they were due.
FLOOR_SECONDS = 1.0
FLOOR_MARGIN_SECONDS = 10.0
# The prepared statements are planned again when a table they read has grown or shrunk this many
# times over since they were planned (plans_sized); sizes under PLAN_PAGES_MIN pages count as
# that many (a table of a few pages is read whole by any plan). Not 2: a queue filled in two
# batches was planned again after the first, on half its size, where a scan of the whole table
# still looked cheapest, and not again after the second.
PLAN_PAGES_FACTOR = 1.25
PLAN_PAGES_MIN = 8


class Worker:
    def __init__(
        self,
        *,
        concurrency: int,
        name: str | None = None,
        executor: Callable[..., ExecutionResult] = execute,
        cpu_millis: int | None = None,
        memory_bytes: int | None = None,
    ) -> None:
        self.concurrency = concurrency
        # What this worker offers (runworker --cpu/--memory); None: no limit but its slots.
        self.offers = (cpu_millis, memory_bytes)
        # The last claim left due runs waiting for free capacity.
        self.held_back = False
        # Monotonic instant the first run that rate limits held at the last claim may start.
        self.rate_wake: float | None = None
        self.short = False  # the last claim took fewer runs than it had slots for
        self.passes = 0  # claims in a row that passed over a key another claim held
        self.claim_sent = 0.0  # monotonic time the last claim was sent
        self.execute = executor  # executors.execute, or k8s_executor.execute (runworker --executor)
        self.name = name or process_name("worker")
        self.prefetch = settings.TASKS_PREFETCH_SECONDS
        self.clock = DatabaseClock()  # claims ahead start on the database's time
        self.poll = settings.TASKS_POLL_INTERVAL_SECONDS
        self.owner_cap = settings.TASKS_OWNER_MAX_RUNNING
        # Runs held beyond the executing slots: they start the moment a slot frees instead of
        # after the next claim's round trip, and let one commit record a larger batch. How many
        # follows how long runs take (see `capacity`).
        self.max_ahead = max(0, settings.TASKS_CLAIM_AHEAD)
        self.ahead_wait = settings.TASKS_CLAIM_AHEAD_WAIT_SECONDS
        self.run_seconds: float | None = None  # moving average of recent runs' durations
        self.inflight: dict[UUID, InFlight] = {}
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.results: SimpleQueue[tuple[InFlight, ExecutionResult]] = SimpleQueue()
        self.pending: list[claim.Outcome] = []
        self.claim_seq = 0
        self.pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="executor")
        # (mode, "") while this worker can run executables, ("", why not) while it cannot:
        # found now and again at every heartbeat (check_sandbox, on the watch thread).
        self.sandbox: tuple[str, str] = self.find_sandbox()
        self.watch = Watch(
            name=self.name,
            concurrency=concurrency,
            runs=self,
            wake=self.wake,
            offers=self.offers,
            sandbox=self.check_sandbox,
        )
        self.finished_count = 0
        # Where claims start reading the claimable runs, and (monotonic) when it was found.
        self.floor = claim.NO_FLOOR
        self.floor_found = float("-inf")
        # The pages of the tables the prepared statements read, when they were planned.
        self.planned_pages: tuple[int, ...] | None = None

    @property
    def capacity(self) -> int:
        """Executing slots plus the runs held ahead: as many as would start within
        `ahead_wait` at the recent runs' pace, up to `max_ahead`. Until a run has finished
        here the worker does not know that pace, and claims only what it can start."""
        if self.max_ahead == 0 or self.run_seconds is None:
            return self.concurrency
        fits = self.concurrency * self.ahead_wait / max(self.run_seconds, 1e-6)
        return self.concurrency + min(self.max_ahead, int(fits))

    def _observe(self, seconds: float) -> None:
        if self.run_seconds is None:
            self.run_seconds = seconds
        else:  # about the last 10 runs
            self.run_seconds += 0.1 * (seconds - self.run_seconds)

    # --- the loop -------------------------------------------------------------------------
    def serve(self, stop: threading.Event, *, once: bool = False) -> None:
        """Run until `stop` is set; then stop claiming, drain, release what is left, return."""
        companions = [] if once else companion_threads.start_all()  # e.g. notifications
        self.watch.start()
        try:
            run_loop(
                self.run_once,
                stop=stop,
                sleep_seconds=self._sleep_seconds,
                wake=self.wake,
                once=once,
                # At most once a second: database errors close the connection right away anyway.
                hygiene_seconds=1.0,
                after_sleep=self._coalesce,
                # An unexpected error in a pass is logged and counted, and the loop goes on.
                # Runs the pass had taken out of `inflight` and `pending` (claimed, or finished
                # and not recorded) are no longer heartbeated: the reviewer rescues them.
                on_error=loop_error_counter(role="worker", process=self.name),
            )
            if once:
                self._drain(grace=settings.TASKS_DEFAULT_TIMEOUT_SECONDS, release_waiting=False)
            else:
                self._drain(grace=settings.TASKS_SHUTDOWN_GRACE_SECONDS)
        finally:
            companion_threads.stop_all(companions)
            self.watch.stop()
            self.pool.shutdown(wait=False, cancel_futures=True)

    def _coalesce(self) -> None:
        """Woken by a finished run while others are still executing: wait a moment for them, so
        one commit records them all (group commit) instead of one commit each. A wake-up for
        anything else (a run became due) is not delayed."""
        window = settings.TASKS_COALESCE_SECONDS
        if window <= 0 or self.results.empty():
            return
        deadline = time.monotonic() + window
        while time.monotonic() < deadline:
            with self.lock:
                started = sum(1 for f in self.inflight.values() if f.started_mono is not None)
            if self.results.qsize() >= started:
                return
            self.wake.clear()
            self.wake.wait(max(0.0, deadline - time.monotonic()))

    def run_once(self) -> bool:
        """Record finished runs and claim into the freed slots, in one transaction.

        Returns True when it did work (the loop goes again at once).
        """
        self._collect()
        self._enforce_deadlines()
        free = max(0, self.capacity - len(self.inflight))
        if not self.pending and free == 0:
            return False
        batch, self.pending = self.pending, []
        sent = time.monotonic()
        try:
            with self._bounded("record/claim"):
                recorded, claimed = self._record_and_claim(batch, free)
        except DatabaseError as exc:
            if is_unavailable(exc):
                DATABASE.failed(exc, what="record/claim")
            else:
                logger.warning("record/claim failed (%s); retrying", exc)
            connection.close()  # reconnect on the next attempt (e.g. after a database restart)
            self.clock.forget()
            self.pending = batch + self.pending
            time.sleep(0.5)
            return False
        answered = time.monotonic()
        # The instant the database clock read the claim time, as tightly as the clock knows it.
        anchor = self.clock.instant(claimed[0].claimed_at, answered) if claimed else answered
        self._note_recorded(batch, recorded)
        self.held_back, self.claim_sent = getattr(claimed, "held_back", False), sent
        self.passes = self.passes + 1 if getattr(claimed, "passed_over", False) else 0
        rate_wait = getattr(claimed, "rate_wait", None)
        # Counted from the answer, so the worker never wakes before the window frees.
        self.rate_wake = None if rate_wait is None else time.monotonic() + rate_wait
        asked = len(claimed)
        self.short = free > 0 and asked < free
        try:
            with self._bounded("overlap check"):
                claimed = overlap.resolve_overlaps(worker=self.name, claimed=claimed)
        except DatabaseError as exc:
            # Never heard of by the watch thread, these runs go stale: the reviewer requeues them.
            logger.warning("overlap check of %d claimed runs failed (%s)", len(claimed), exc)
            connection.close()
            return False
        for run in claimed:
            self._dispatch(run, anchor=anchor)
        return bool(batch) or (free > 0 and asked == free)

    def _bounded(self, what: str) -> contextlib.AbstractContextManager[None]:
        """A statement of the main thread hung past TASKS_HUNG_STATEMENT_SECONDS (a commit on
        an orphaned primary) fails as a lost connection, uncancelled; the outcomes stay pending
        and go to a new connection, where the fence makes the retry safe (postgresql/hung.py)."""
        wrapper = connections[DEFAULT_DB_ALIAS]  # this thread's; the watchdog reads it later
        return abandon_if_hung(
            lambda: wrapper.connection, settings.TASKS_HUNG_STATEMENT_SECONDS, what=f"worker {what}"
        )

    def _record_and_claim(
        self, batch: list[claim.Outcome], free: int
    ) -> tuple[list[tuple], list[claim.ClaimedRun]]:
        """One statement: record `batch`, claim up to `free` runs (k8s_worker admits instead)."""
        return claim.record_and_claim(
            worker=self.name,
            outcomes=batch,
            limit=free,
            prefetch_seconds=self.prefetch,
            owner_cap=self.owner_cap,
            capacity=self.budget(),
            floor=self.claim_floor() if free > 0 else claim.NO_FLOOR,
        )

    def claim_floor(self) -> claim.Floor:
        """The claims' floor (claim.claim_floor), found again once FLOOR_SECONDS have passed.
        While a transaction holds an old snapshot the claimable index keeps an entry for every
        run claimed since; a claim that reads from the floor skips them."""
        if time.monotonic() - self.floor_found >= FLOOR_SECONDS:
            self.plans_sized()
            self.floor = claim.claim_floor(self.budget(), margin_seconds=FLOOR_MARGIN_SECONDS)
            self.floor_found = time.monotonic()
        return self.floor

    def plans_sized(self) -> None:
        """Plan the prepared statements again once a table they read has grown or shrunk by a
        quarter since they were planned (checked with the floor, about once a second).
        runworker keeps one generic plan per statement (force_generic_plan) on a connection it
        keeps: a plan made while tasks_run was nearly empty (a worker started on a new or
        emptied queue) read it whole for every outcome recorded, and was never made again
        (bench/NOTEBOOK.md, "Start lateness behind the commit before the day's changes"). A
        worker on a table that keeps its size plans each statement once, as before; one on a
        growing table a few times more."""
        pages = claim.table_pages()
        if self.planned_pages is not None and not any(
            _resized(then, now) for then, now in zip(self.planned_pages, pages, strict=True)
        ):
            return
        if self.planned_pages is not None:
            logger.info("tables resized (pages %s -> %s): planned again", self.planned_pages, pages)
            forget_prepared()
        self.planned_pages = pages

    def budget(self) -> claim.Capacity:
        """What this worker offers, and what its runs in flight (started or held ahead) leave.
        Exact: only this worker's main thread claims against it, one claim at a time, and runs
        it has recorded are already out of `inflight`. Without a sandbox it offers no
        executable run a place."""
        able = bool(self.sandbox[0])
        if self.offers == (None, None):
            return replace(claim.NO_LIMIT, executables=able)
        cpu, memory = (claim.UNLIMITED if v is None else v for v in self.offers)
        with self.lock:
            runs = [f.run for f in self.inflight.values()]
        used_cpu, used_memory = sum(r.cpu_millis for r in runs), sum(r.memory_bytes for r in runs)
        return claim.Capacity(cpu, memory, cpu - used_cpu, memory - used_memory, able)

    def find_sandbox(self) -> tuple[str, str]:
        """How this worker can run executables now: (mode, "") or ("", why not)."""
        return capability(allow_rlimit_only=settings.SCHEDULER_SANDBOX_ALLOW_RLIMIT_ONLY)

    def check_sandbox(self) -> tuple[str, str]:
        """Look for the sandbox again (each heartbeat): a change is logged, and a sandbox that
        appeared wakes the claim loop for the executable runs that waited for it."""
        found = self.find_sandbox()
        if found != self.sandbox:
            if found[0]:
                logger.info("executables can run now (sandbox: %s)", found[0])
                self.wake.set()
            else:
                logger.warning("executables cannot run here: %s", found[1])
        self.sandbox = found
        return found

    def _sleep_seconds(self) -> float:
        wait = self.poll
        if len(self.inflight) < self.capacity:
            # Held back (capacity, or the per-owner cap): the due runs wait for a run to end
            # (the wake event, or the poll), not for a clock that says they are due: that
            # would spin. Runs due after the claim's prefetch window still wake us on time.
            # Due runs a rate limit held wait for the instant it named (rate_wake), not for a
            # clock that says they are due either.
            held = self.held_back or self.rate_wake is not None
            later = self.prefetch - (time.monotonic() - self.claim_sent) if held else None
            try:
                with self._bounded("next-due query"):
                    since = self.claim_floor().since
                    until = claim.seconds_until_next_due(
                        self.budget(), later_than=later, since=since, clock=self.clock
                    )
            except DatabaseError:
                connection.close()
                self.clock.forget()
                until = None
            if until is not None:
                # A run already within the claim's window that the last claim left although it
                # had slots free is one it could not take (another worker's lock, the per-owner
                # cap): claim again after a short pause, not at once (that spun: ~1,000
                # claims a second while a capped owner had a run due).
                soonest = RECLAIM_PAUSE_SECONDS if self.short else 0.0
                if self.short and 0 < self.passes <= PASSED_RECLAIMS:
                    soonest = PASSED_PAUSE_SECONDS
                wait = min(wait, max(soonest, until - self.prefetch))
            if self.rate_wake is not None:
                wait = min(wait, max(RECLAIM_PAUSE_SECONDS, self.rate_wake - time.monotonic()))
        deadlines = [f.deadline_mono for f in self.inflight.values() if f.deadline_mono]
        if deadlines:
            wait = min(wait, max(0.0, min(deadlines) - time.monotonic()))
        return wait

    # --- executing ------------------------------------------------------------------------
    def _dispatch(self, run: claim.ClaimedRun, *, anchor: float) -> None:
        # `anchor` is the monotonic instant taken for the claim's database timestamp: never
        # before the true one (DatabaseClock), at the latest the answer's arrival. The start
        # timer counts from it, so a run never starts early, and the recorded started_at is
        # never before the claim nor after the outcome's clock_timestamp(). Anchored at the
        # send instead, it read late by whatever the statement spent before its
        # clock_timestamp() (a reconnect, a key row's lock wait), later than the finish for a
        # short run.
        delay = max(0.0, (run.execute_at - run.claimed_at).total_seconds())
        self.claim_seq += 1
        flight = InFlight(
            run=run,
            claimed_mono=anchor,
            start_mono=anchor + delay,
            claim_seq=self.claim_seq,
        )
        with self.lock:
            self.inflight[run.id] = flight
        self.pool.submit(self._execute, flight)

    def _execute(self, flight: InFlight) -> None:
        # Prefetched runs are claimed a little early and started on the dot.
        wait = flight.start_mono - time.monotonic()
        if wait > 0:
            flight.cancel.wait(wait)
        started = time.monotonic()
        with self.lock:
            # Starting and a shutdown's release of the runs not started (_drain) decide under
            # one lock: a run given back to the queue is never also started here.
            cancelled = flight.cancel.is_set()
            if not cancelled:
                flight.started_mono = started
        if cancelled:
            self.results.put((flight, ExecutionResult(ok=False, cancelled=True, error="cancelled")))
            self.wake.set()
            return
        timeout = flight.run.timeout or settings.TASKS_DEFAULT_TIMEOUT_SECONDS
        flight.deadline_mono = started + timeout + deadline_slack(flight.run.kind)
        # One structured line per start; the fields become JSON keys in production.
        run = flight.run
        logger.info(
            "run started run=%s task=%s attempt=%s kind=%s",
            run.id,
            run.task_id,
            run.attempt,
            run.kind,
            extra={
                "event": "run_started",
                "run": str(run.id),
                "task": str(run.task_id),
                "attempt": run.attempt,
                "kind": run.kind,
            },
        )
        if run.kind == "executable":
            flight.activity = Activity()
        try:
            result = self.execute(
                flight.run, cancel=flight.cancel, timeout=timeout, activity=flight.activity
            )
        finally:
            flight.finished_mono = time.monotonic()
            close_old_connections()
        self.results.put((flight, result))
        self.wake.set()

    def _enforce_deadlines(self) -> None:
        """A handler cannot be killed; past its deadline its attempt is recorded as timed out."""
        now = time.monotonic()
        with self.lock:
            late = [f for f in self.inflight.values() if not f.decided and f.deadline_mono]
        for flight in late:
            if flight.deadline_mono is not None and now >= flight.deadline_mono:
                flight.cancel.set()
                self._decide(flight, ExecutionResult(ok=False, timed_out=True, error="timed out"))

    # --- recording ------------------------------------------------------------------------
    def _collect(self) -> None:
        """Turn results handed back by executor threads into pending outcomes."""
        while True:
            try:
                flight, result = self.results.get_nowait()
            except Empty:
                return
            with self.lock:
                self.inflight.pop(flight.run.id, None)
            if flight.started_mono is not None and flight.finished_mono is not None:
                self._observe(flight.finished_mono - flight.started_mono)
            if not flight.decided:
                if result.no_sandbox:  # lost since the claim: give the run back, unspent
                    self.sandbox = ("", result.error)
                self._decide(flight, result, release=result.no_sandbox)

    def _record(self) -> bool:
        """Record pending outcomes alone (shutdown path); True if there was anything."""
        self._collect()
        if not self.pending:
            return False
        batch, self.pending = self.pending, []
        try:
            with self._bounded("outcome write"):
                recorded = claim.record_outcomes(worker=self.name, outcomes=batch)
        except DatabaseError as exc:
            if is_unavailable(exc):
                DATABASE.failed(exc, what="outcome write")
            else:
                logger.warning("recording %d outcomes failed (%s); will retry", len(batch), exc)
            connection.close()
            self.pending = batch + self.pending
            time.sleep(0.2)
            return True
        self._note_recorded(batch, recorded)
        return True

    def _note_recorded(self, batch: list[claim.Outcome], recorded: list[tuple]) -> None:
        self.finished_count += len(recorded)
        if len(recorded) < len(batch):
            kept = {run_id for run_id, _, _ in recorded}
            for outcome in batch:
                if outcome.run_id not in kept:
                    logger.warning(
                        "late result dropped run=%s attempt=%s: the run was cancelled or "
                        "rescued meanwhile",
                        outcome.run_id,
                        outcome.attempt,
                    )

    def _decide(self, flight: InFlight, result: ExecutionResult, *, release: bool = False) -> None:
        flight.decided = True
        self.pending.append(flight.outcome(result, release=release))

    def lose(self, run_ids: set[UUID], *, reason: str) -> None:
        """Stop the payloads of runs this worker no longer holds; their results will be dropped."""
        with self.lock:
            lost = [self.inflight[r] for r in run_ids if r in self.inflight]
        for flight in lost:
            flight.cancel.set()
            flight.decided = True
            logger.warning("run=%s stopped: %s", flight.run.id, reason)
        self.wake.set()

    # --- what the watch thread sees (watch.HeldRuns) ---------------------------------------
    def claim_mark(self) -> int:
        return self.claim_seq

    def held_before(self, mark: int) -> set[UUID]:
        with self.lock:
            return {r for r, f in self.inflight.items() if f.claim_seq <= mark and not f.decided}

    def unrecorded(self) -> set[UUID]:
        """Runs claimed here whose outcome is not recorded yet: executing, waiting to start, or
        finished with the outcome pending (kept across a database outage and sent again)."""
        pending = list(self.pending)  # appended to by the main thread only; a copy is safe
        with self.lock:
            return set(self.inflight) | {outcome.run_id for outcome in pending}

    def executing(self) -> dict[RunKey, Activity]:
        """The executables running now, by (run id, attempt), for the watch's zombie check."""
        with self.lock:
            return {
                (r, f.run.attempt): f.activity
                for r, f in self.inflight.items()
                if f.activity is not None and not f.decided
            }

    def stop_run(self, run_id: UUID, *, reason: str) -> None:
        """Cancel a run this worker holds (its outcome is recorded as `cancelled`, `reason`)."""
        with self.lock:
            flight = self.inflight.get(run_id)
        if flight is not None and not flight.decided:
            flight.stop_reason = reason
            flight.cancel.set()

    # --- shutdown -------------------------------------------------------------------------
    def _drain(self, *, grace: float, release_waiting: bool = True) -> None:
        """Let running payloads finish up to `grace`, then release the rest back to the queue."""
        deadline = time.monotonic() + grace
        waiting = []
        if release_waiting:
            with self.lock:  # see _execute: none of these starts once cancelled here
                waiting = [f for f in self.inflight.values() if f.started_mono is None]
                for flight in waiting:
                    flight.cancel.set()
        for flight in waiting:  # claimed early but not started: give back at once
            self._decide(flight, ExecutionResult(ok=False), release=True)
        while self.inflight and time.monotonic() < deadline:
            self.wake.clear()
            self._record()
            self._enforce_deadlines()
            if self.inflight:
                self.wake.wait(min(0.2, max(0.0, deadline - time.monotonic())))
        self._record()
        with self.lock:
            left = [f for f in self.inflight.values() if not f.decided]
        for flight in left:
            flight.cancel.set()
            self._decide(flight, ExecutionResult(ok=False), release=True)
        for _ in range(20):
            self._record()
            if not self.pending:
                break


def _resized(then: float, now: float) -> bool:
    """Whether a table of `then` pages is now `now` pages: PLAN_PAGES_FACTOR times over either
    way, sizes under PLAN_PAGES_MIN counted as that."""
    then, now = max(then, PLAN_PAGES_MIN), max(now, PLAN_PAGES_MIN)
    return max(then, now) >= PLAN_PAGES_FACTOR * min(then, now)
