"""Overlap policies, applied by the worker to the runs it has just claimed (docs/schedules.md)."""

from __future__ import annotations

from uuid import UUID

from django.db import connection, transaction

from scheduler_project.sql import queries
from tasks import counters, events, outbox
from tasks.db import db_now
from tasks.models import Run
from tasks.transitions.claim import ClaimedRun
from tasks.transitions.run_actions import cancel_running

SQL = queries("tasks", "overlap.sql")
OVERLAP_SKIPPED = "skipped: the previous run was still running (overlap policy)"
SUPERSEDED = "cancelled: a newer run started (overlap policy cancel_previous)"


def resolve_overlaps(*, worker: str, claimed: list[ClaimedRun]) -> list[ClaimedRun]:
    """Apply each task's overlap policy to freshly claimed runs; return the runs to execute.

    `skip`: a run whose task has another run in flight (elsewhere, or earlier in this very
    batch, as after a backlog) is recorded `skipped` instead of run.
    `cancel_previous`: the task's other runs in flight are cancelled (their workers are told);
    older runs of the task claimed in this batch never start and are recorded `cancelled`.
    Tasks with the default `allow` cost nothing here: the common path makes no query.

    One transaction. The runs set aside are this worker's own fresh claims (fenced on
    `worker` and `status = 'running'`); other workers' runs are cancelled by compare-and-swap
    (cancel_running), so a run that finished meanwhile keeps its outcome. Two workers claiming
    runs of the same `skip` task at once may both see the other's run in flight and both skip:
    the policy errs towards not overlapping.
    """
    policed = [run for run in claimed if run.overlap != "allow"]
    if not policed:
        return claimed
    by_task: dict[UUID, list[ClaimedRun]] = {}
    for run in sorted(policed, key=lambda r: r.scheduled_at):
        by_task.setdefault(run.task_id, []).append(run)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            SQL["others_running"],
            {"tasks": list(by_task), "mine": [r.id for r in claimed]},
        )
        others = cursor.fetchall()
        busy = {task_id for _, task_id, _ in others}
        skipped: list[UUID] = []
        superseded: list[UUID] = []
        for task_id, runs in by_task.items():
            if runs[0].overlap == "skip":
                # The first runs unless another is in flight; the rest overlap with it.
                skipped += [r.id for r in (runs if task_id in busy else runs[1:])]
            else:
                superseded += [r.id for r in runs[:-1]]  # only the newest of the batch runs
        if skipped:
            cursor.execute(
                SQL["set_aside"],
                {
                    "ids": skipped,
                    "worker": worker,
                    "status": "skipped",
                    "error": OVERLAP_SKIPPED,
                    "skip_kind": "overlap",
                },
            )
            # Outbox: `missed` and `skipped` for each occurrence skipped, and the count of
            # skips by reason, in the same transaction.
            rows = [(r, t, None) for r, t in cursor.fetchall()]
            outbox.enqueue(cursor, events=events.skipped_events(rows) + events.skip_events(rows))
            counters.count_skipped(
                cursor, process=worker, runs=[(t, "overlap") for _, t, _ in rows]
            )
        if superseded:
            cursor.execute(
                SQL["set_aside"],
                {
                    "ids": superseded,
                    "worker": worker,
                    "status": "cancelled",
                    "error": SUPERSEDED,
                    "skip_kind": "",
                },
            )
        cancel_tasks = {task_id for task_id, runs in by_task.items() if runs[0].overlap != "skip"}
        now = db_now()
        for run_id, task_id, _attempt in others:
            if task_id in cancel_tasks:
                previous = Run.objects.get(pk=run_id)
                cancel_running(run=previous, now=now, reason=SUPERSEDED)
    dropped = set(skipped) | set(superseded)
    return [run for run in claimed if run.id not in dropped]
