"""`manage.py runreviewer`: rescue runs of dead workers, flag starved runs, finish workflow runs
a crash left, prune old history."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from reviewers import retention, samples
from reviewers.outage import RescueHold
from scheduler_project.postgresql.hung import abandon_if_hung
from tasks.daemon import DaemonCommand
from tasks.transitions.expectations import review_expectations, review_workflow_expectations
from tasks.transitions.limits import CONCURRENCY, RATE, hold_waiting_runs
from tasks.transitions.no_sandbox import hold_or_release_executables
from tasks.transitions.rescue import (
    RescueResult,
    flag_starved_runs,
    mark_unplaceable_runs,
    rescue_stuck_runs,
)
from tasks.transitions.workflows import resolve_workflow_runs

logger = logging.getLogger(__name__)

# Dashboard samples are written for the minute just ended; trying every few seconds is enough.
SAMPLE_EVERY_SECONDS = 5.0


class Command(DaemonCommand):
    help = "Run a reviewer: rescues stuck runs and prunes history; several may run at once."
    role = "reviewer"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.next_sample = 0.0  # monotonic times of the next sample and the next prune pass
        self.next_prune = 0.0
        self.hold = RescueHold(
            window=settings.REVIEWERS_RESCUE_AFTER_SECONDS,
            interval=settings.REVIEWERS_INTERVAL_SECONDS,
        )

    def run_once(self) -> bool:
        started = time.monotonic()
        wrapper = connections[DEFAULT_DB_ALIAS]
        # A statement hung on an orphaned primary is given up (postgresql/hung.py); the pass
        # fails and the next one reaches the new primary, where rescues are held (outage.py).
        with abandon_if_hung(
            lambda: wrapper.connection,
            settings.TASKS_HUNG_STATEMENT_SECONDS,
            what="reviewer pass",
        ):
            self.review(started)
        now = time.monotonic()
        self.hold.pass_completed(now)
        more = False
        if now >= self.next_sample:
            self.next_sample = now + SAMPLE_EVERY_SECONDS
            samples.record_queue_sample()
        if now >= self.next_prune:
            more = self.prune()
        self.hold.pass_completed(time.monotonic())  # a long prune batch is no outage
        return more

    def review(self, started: float) -> None:
        self.hold.pass_started(started)
        if self.hold.holding(started):
            rescue = RescueResult(rescued=0, failed=0)
        else:
            rescue = rescue_stuck_runs(after_seconds=settings.REVIEWERS_RESCUE_AFTER_SECONDS)
        # Before the start SLA: a run its key holds back says so rather than "not started".
        if keyed := hold_waiting_runs(CONCURRENCY):
            logger.info("runs waiting for their concurrency key=%d", keyed)
        if limited := hold_waiting_runs(RATE):
            logger.info("runs waiting for their rate limit=%d", limited)
        starved = flag_starved_runs(sla_seconds=settings.TASKS_START_SLA_SECONDS)
        # Every pass too: `late` is due start_within after the run's time, not a pass later.
        for run_id, task_id, _, event in review_expectations():
            logger.info("task=%s run=%s %s", task_id, run_id, event)
        for workflow_id, health in review_workflow_expectations():
            logger.info("workflow=%s %s", workflow_id, health)
        # Every pass (REVIEWERS_INTERVAL_SECONDS, 1 s): a run no live worker can hold shows
        # why within a pass of being due, or of the last big enough worker stopping.
        for run_id, reason in mark_unplaceable_runs(
            dead_after_seconds=settings.REVIEWERS_PROCESS_DEAD_AFTER_SECONDS
        ):
            logger.info("run=%s %s", run_id, reason or "fits a live worker again")
        held, released, why = hold_or_release_executables(
            dead_after_seconds=settings.REVIEWERS_PROCESS_DEAD_AFTER_SECONDS
        )
        if held or released:
            logger.info("executable runs waiting=%d scheduled again=%d %s", held, released, why)
        # A step's end resolves its workflow run in the same transaction; this finishes what
        # that could not (a run ended with triggers off, a restore): none found otherwise.
        if resolved := resolve_workflow_runs():
            logger.info("workflow runs resolved=%d", resolved)
        if rescue.rescued or rescue.failed or starved:
            logger.info(
                "rescued=%d failed=%d waiting_for_resource=%d",
                rescue.rescued,
                rescue.failed,
                starved,
            )

    def prune(self) -> bool:
        """One batch per status; True (go again without sleeping) while batches come back full."""
        batch = settings.REVIEWERS_PRUNE_BATCH_SIZE
        pruned = retention.prune_finished_runs(
            retention_days=settings.REVIEWERS_RETENTION_DAYS_BY_STATUS, batch=batch
        )
        more = any(count >= batch for count in pruned.values())
        if not more:
            processes = retention.prune_stopped_processes(
                older_than_days=settings.REVIEWERS_PROCESS_RETENTION_DAYS
            )
            old_samples = retention.prune_queue_samples(
                older_than_days=settings.REVIEWERS_SAMPLE_RETENTION_DAYS
            )
        else:
            processes = old_samples = 0
        audited = retention.prune_audit_entries(
            older_than_days=settings.REVIEWERS_AUDIT_RETENTION_DAYS, batch=batch
        )
        more = more or audited >= batch
        if not more:
            self.next_prune = time.monotonic() + settings.REVIEWERS_PRUNE_INTERVAL_SECONDS
        if any(pruned.values()) or processes or old_samples or audited:
            counts = " ".join(f"{status}={count}" for status, count in pruned.items())
            logger.info(
                "pruned %s processes=%d samples=%d audit=%d",
                counts,
                processes,
                old_samples,
                audited,
            )
        return more

    def sleep_seconds(self) -> float:
        return settings.REVIEWERS_INTERVAL_SECONDS
