"""Changes to single runs: a user's cancel and retry, and stopping a running run (also done
by a task's cancel and by the overlap policy `cancel_previous`)."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from tasks import audit
from tasks.db import RUN_CANCEL_CHANNEL, RUN_DUE_CHANNEL, notify
from tasks.exceptions import Conflict
from tasks.models import CLAIMABLE_STATUSES, ENDED, Attempt, Run, Task
from tasks.transitions.completion import complete_finished_tasks


def cancel_running(*, run: Run, now: datetime, reason: str) -> None:
    """Record a running run `cancelled` and tell its worker to kill the payload.

    Call inside a transaction (the attempt row and the NOTIFY commit with the cancel). The
    compare-and-swap on (status, attempt) means the worker's own outcome write, fenced on
    the same columns, can no longer land: whichever commits first wins, never both.
    """
    changed = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING, attempt=run.attempt).update(
        status=Run.Status.CANCELLED, finished_at=now, error=reason
    )
    if changed:
        Attempt.objects.create(
            run=run,
            number=run.attempt,
            worker=run.worker,
            started_at=run.started_at,
            finished_at=now,
            outcome=Attempt.Outcome.CANCELLED,
            error=reason,
        )
        notify(RUN_CANCEL_CHANNEL, str(run.pk))


def cancel_run(*, run: Run, now: datetime) -> Run:
    """Cancel a scheduled run, or stop a running one; Conflict when it already finished.

    The run's row is locked first (FOR UPDATE), so a concurrent cancel or retry waits and then
    sees the new status; a worker claiming it meanwhile (SKIP LOCKED) passes it by, and one that
    claimed it earlier loses its fenced outcome write (see cancel_running).
    """
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        was = run.status
        if run.status in CLAIMABLE_STATUSES:
            run.status = Run.Status.CANCELLED
            run.finished_at = now
            run.error = "cancelled on request"
            run.save(update_fields=["status", "finished_at", "error"])
        elif run.status == Run.Status.RUNNING:
            cancel_running(run=run, now=now, reason="cancelled on request")
        else:
            raise Conflict(f"the run already finished ({run.status})")
        audit.record(_entry("cancel_run", run, was, Run.Status.CANCELLED))
        complete_finished_tasks(task_ids=[run.task_id])
    run.refresh_from_db()
    return run


def retry_run(*, run: Run, now: datetime) -> Run:
    """Schedule a failed or cancelled run again now, with a fresh set of attempts.

    Attempt numbers keep counting up (the history stays unique per number); the run gets the
    task's `max_attempts` more attempts from here. The run's row lock (FOR UPDATE) serialises it
    with a concurrent cancel or retry: the second one sees the new status and gets Conflict.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status not in (Run.Status.FAILED, Run.Status.CANCELLED):
            raise Conflict(f"only failed or cancelled runs can be retried, not {run.status}")
        task = Task.objects.get(pk=run.task_id)
        if task.status == Task.Status.CANCELLED:
            # A cancelled task has no further runs (docs/api.md, DELETE); reviving one would run it.
            raise Conflict("the task is cancelled")
        audit.record(_entry("retry", run, run.status, Run.Status.SCHEDULED))
        run.status = Run.Status.SCHEDULED
        run.execute_at = now
        run.finished_at = None
        run.worker = ""
        run.heartbeat_at = None
        run.error = ""
        run.max_attempts = run.attempt + task.max_attempts
        # The task's requests and keys as they are now: the claim then judges the retry by
        # the keys' current state, as any run made now.
        for name, value in task.requests.items():
            setattr(run, name, value)
        run.wait_kind = run.wait_reason = ""
        run.save(
            update_fields=[
                "status",
                "execute_at",
                "finished_at",
                "worker",
                "heartbeat_at",
                "error",
                "max_attempts",
                *task.requests,
                "wait_kind",
                "wait_reason",
            ]
        )
        if task.status in ENDED:  # the run is unfinished again: the task has not ended
            Task.objects.filter(pk=task.pk).update(status=Task.Status.ACTIVE)
        notify(RUN_DUE_CHANNEL)
    return run


def _entry(action: str, run: Run, was: str, status: str) -> audit.Entry:
    return audit.entry(action, "run", run, {"task": str(run.task_id), "status": [was, status]})
