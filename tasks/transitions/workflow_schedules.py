"""Workflow schedules: the scheduler's pass that starts one workflow run per occurrence of a
workflow's schedule, with the misfire and overlap policies a task's schedule has
(docs/workflows.md, "Schedules"). Which occurrences are due is tasks/occurrences.py's, as for
tasks; this module starts or skips them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction

from tasks import occurrences
from tasks.exclusions import CalendarData
from tasks.models import Workflow, WorkflowRun
from tasks.transitions.creation import first_fire_at
from tasks.transitions.workflows import cancel_workflow_run, start_workflow_run

logger = logging.getLogger(__name__)

# A workflow whose schedule cannot be evaluated is tried again this many seconds later.
RETRY_SECONDS = 60
OVERLAP_SKIPPED = "skipped: the previous workflow run was still running (overlap policy)"
# The validated task bodies of a workflow's steps, for its owner, at `now`; or why they are
# refused (tasks/api/workflows.py step_bodies: a channel a step notifies was deleted, say).
StepBodies = Callable[[Workflow, datetime], tuple[list[dict], str]]


@dataclass(frozen=True)
class WorkflowPlanResult:
    started: int = 0
    skipped: int = 0


def first_run_at(schedule: dict | None, *, now: datetime) -> datetime | None:
    """A workflow's `next_run_at` for a schedule set now (created or changed): its first
    occurrence at or after `now` (a one-time schedule's `run_at` even if past); None for none."""
    return None if schedule is None else first_fire_at(schedule, now=now)


def start_due_workflows(
    *, now: datetime, step_bodies: StepBodies, batch: int = 100
) -> WorkflowPlanResult:
    """One scheduler pass over workflows: each whose `next_run_at` is due is locked with SKIP
    LOCKED, its due occurrences computed as a task's are (misfire policy, exclusions,
    max_runs), each started as a workflow run or recorded as a `skipped` one, and its
    `next_run_at` advanced, all in one transaction: a crash leaves both or neither.

    Any number of schedulers may run this at once: a workflow's row is planned by one of them
    per pass, and the unique (workflow, scheduled_at) index makes an occurrence start once
    even when a pass is replayed or a PATCH sets `next_run_at` back on one already started.
    `cancel_previous` cancels the workflow runs it supersedes after the commit (a cancel locks
    step runs a worker may hold, which is not done under a workflow's lock).
    """
    superseded: list[WorkflowRun] = []
    started = skipped = 0
    with transaction.atomic():
        due = list(
            Workflow.objects.select_for_update(skip_locked=True)
            .select_related("owner")
            .filter(next_run_at__lte=now)
            .order_by("next_run_at")[:batch]
        )
        calendars = occurrences.load_calendars([w.schedule for w in due if w.schedule])
        for workflow in due:
            previous: list[WorkflowRun] = []  # its runs to cancel, once its starts stand
            try:
                with transaction.atomic():  # a savepoint: one workflow's error spares the rest
                    counts = _start_due(workflow, now, calendars, step_bodies, previous)
            except Exception:
                # Pushed back rather than retried in a hot loop (first in next_run_at order, it
                # would hold up every workflow behind it); a PATCH of its schedule resets it.
                logger.exception(
                    "starting workflow=%s failed; next attempt in %ss", workflow.pk, RETRY_SECONDS
                )
                Workflow.objects.filter(pk=workflow.pk).update(
                    next_run_at=now + timedelta(seconds=RETRY_SECONDS)
                )
                continue
            started += counts[0]
            skipped += counts[1]
            superseded += previous
    for workflow_run in superseded:
        cancel_workflow_run(workflow_run=workflow_run, now=now)
    return WorkflowPlanResult(started=started, skipped=skipped)


def _start_due(
    workflow: Workflow,
    now: datetime,
    calendars: dict[str, CalendarData],
    step_bodies: StepBodies,
    superseded: list[WorkflowRun],
) -> tuple[int, int]:
    """Start or skip each due occurrence of a locked workflow and advance its `next_run_at`;
    returns how many it started and skipped."""
    if workflow.schedule is None or workflow.next_run_at is None:
        return 0, 0
    plan = occurrences.due_occurrences(
        workflow.schedule,
        next_at=workflow.next_run_at,
        planned=workflow.runs_started,
        now=now,
        horizon=now,
        calendars=calendars,
    )
    started = skipped = 0
    for occurrence in plan.occurrences:
        outcome = _start_occurrence(workflow, occurrence, now, step_bodies, superseded)
        started += outcome == WorkflowRun.Status.RUNNING
        skipped += outcome == WorkflowRun.Status.SKIPPED
    Workflow.objects.filter(pk=workflow.pk).update(
        next_run_at=plan.next_at, runs_started=plan.planned
    )
    return started, skipped


def _start_occurrence(
    workflow: Workflow,
    occurrence: occurrences.Occurrence,
    now: datetime,
    step_bodies: StepBodies,
    superseded: list[WorkflowRun],
) -> str | None:
    """Start the workflow run of one occurrence, or record it `skipped` with its reason;
    returns which, or None when the occurrence already has its workflow run."""
    reason = occurrence.reason if occurrence.status == WorkflowRun.Status.SKIPPED else ""
    overlap = workflow.schedule.get("overlap", "allow") if workflow.schedule else "allow"
    running: list[WorkflowRun] = []
    if not reason and overlap != "allow":
        running = list(workflow.runs.filter(status=WorkflowRun.Status.RUNNING))
        if running and overlap == "skip":
            reason = OVERLAP_SKIPPED
    bodies: list[dict] = []
    if not reason:
        bodies, refused = step_bodies(workflow, now)
        reason = f"not started: {refused}" if refused else ""
    try:
        with transaction.atomic():  # a savepoint: a conflict leaves the pass going
            if reason:
                WorkflowRun.objects.create(
                    workflow=workflow,
                    owner=workflow.owner,
                    status=WorkflowRun.Status.SKIPPED,
                    started_at=now,
                    finished_at=now,
                    scheduled_at=occurrence.at,
                    reason=reason,
                )
                return WorkflowRun.Status.SKIPPED
            start_workflow_run(
                workflow=workflow, step_bodies=bodies, now=now, scheduled_at=occurrence.at
            )
    except IntegrityError:
        logger.info("workflow=%s occurrence %s already started", workflow.pk, occurrence.at)
        return None
    if overlap == "cancel_previous":
        superseded.extend(running)
    return WorkflowRun.Status.RUNNING


def next_start_at() -> datetime | None:
    """The earliest occurrence of any workflow not started yet (the scheduler sleeps until)."""
    return (
        Workflow.objects.filter(next_run_at__isnull=False)
        .order_by("next_run_at")
        .values_list("next_run_at", flat=True)
        .first()
    )
