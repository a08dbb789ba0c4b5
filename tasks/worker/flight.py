"""One claimed run as the worker holds it, and what its attempt came to."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tasks import retries
from tasks.transitions.claim import ClaimedRun, Outcome
from tasks.worker.executors import ExecutionResult
from tasks.worker.zombie_tracker import Activity

logger = logging.getLogger("tasks.worker")  # as before the package: logs filter on it


@dataclass
class InFlight:
    run: ClaimedRun
    claimed_mono: float
    start_mono: float
    claim_seq: int
    cancel: threading.Event = field(default_factory=threading.Event)
    started_mono: float | None = None
    finished_mono: float | None = None
    deadline_mono: float | None = None
    decided: bool = False  # an outcome was already produced (timeout, release, lost)
    activity: Activity | None = None  # an executable's processes and output (zombie check)
    stop_reason: str = ""  # why the worker itself cancelled it (a zombie), for its error

    def db_time(self, mono: float) -> datetime:
        """A monotonic instant on the database clock, anchored at the claim's clock_timestamp."""
        return self.run.claimed_at + timedelta(seconds=mono - self.claimed_mono)

    def outcome(self, result: ExecutionResult, *, release: bool = False) -> Outcome:
        """The outcome to record for this attempt: success, a retry after backoff, the final
        failure, a cancel, or a release back to the queue (shutdown); logged as it is decided."""
        run = self.run
        started = self.db_time(self.started_mono) if self.started_mono else None
        if release:
            status, outcome, retry_in = "scheduled", "released", 0.0
        elif result.ok:
            status, outcome, retry_in = "succeeded", "succeeded", 0.0
        elif result.cancelled:
            status, outcome, retry_in = "cancelled", "cancelled", 0.0
        else:
            outcome = "timed_out" if result.timed_out else "failed"
            if run.attempt < run.max_attempts and not result.final:
                status = "scheduled"
                retry_in = retries.backoff_seconds(
                    run.attempt, base=run.backoff_base, cap=run.backoff_cap
                )
            else:
                status, retry_in = "failed", 0.0
        decided = Outcome(
            run_id=run.id,
            attempt=run.attempt,
            status=status,
            attempt_outcome=outcome,
            started_at=started,
            error=self.stop_reason if result.cancelled and self.stop_reason else result.error,
            output=result.output,
            exit_code=result.exit_code,
            http_status=result.http_status,
            retry_in=retry_in,
        )
        duration = time.monotonic() - self.started_mono if self.started_mono else 0.0
        logger.info(
            "run finished run=%s task=%s attempt=%s outcome=%s status=%s duration=%.3f",
            run.id,
            run.task_id,
            run.attempt,
            outcome,
            status,
            duration,
            extra={
                "event": "run_finished",
                "run": str(run.id),
                "task": str(run.task_id),
                "attempt": run.attempt,
                "outcome": outcome,
                "status": status,
                "duration": round(duration, 3),
            },
        )
        return decided


def deadline_slack(kind: str) -> float:
    # Executables and HTTP calls enforce their own timeout; the worker's deadline is a backstop.
    return 0.0 if kind == "handler" else 5.0
