"""Workflows: starting a workflow run (a task and a run per step, the steps with `after` held),
cancelling one, retrying one, and the reviewer's sweep for what a crash left unresolved.
Releasing steps and ending workflow runs is the database's, in the transaction that records a
step's final outcome (tasks/sql/workflows.sql)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection, transaction

from scheduler_project.sql import queries
from tasks.admission import upstream
from tasks.db import RUN_DUE_CHANNEL, notify
from tasks.exceptions import Conflict
from tasks.models import (
    CLAIMABLE_STATUSES,
    ENDED,
    Run,
    Task,
    Workflow,
    WorkflowRun,
    WorkflowStep,
)
from tasks.transitions.creation import create_tasks
from tasks.transitions.run_actions import cancel_running

SQL = queries("tasks", "workflows.sql")


def start_workflow_run(
    *,
    workflow: Workflow,
    step_bodies: list[dict[str, Any]],
    now: datetime,
    scheduled_at: datetime | None = None,
) -> WorkflowRun:
    """Start a run of `workflow`: one one-time task and its run per step (`step_bodies`: each
    step's validated task body, in the workflow's order), a WorkflowStep per step, and the steps
    with `after` held (`upstream`) until their upstream steps end.

    One transaction: the held runs are held before any worker can see them (the runs' NOTIFY
    is delivered at commit). The unique (workflow run, step id) index makes each step's run
    once per workflow run. `scheduled_at`: the occurrence of the workflow's schedule it starts
    (None: on demand); the unique (workflow, scheduled_at) index makes that once per occurrence.
    """
    steps = workflow.steps
    with transaction.atomic():
        workflow_run = WorkflowRun.objects.create(
            workflow=workflow, owner=workflow.owner, started_at=now, scheduled_at=scheduled_at
        )
        tasks = create_tasks(owner=workflow.owner, items=step_bodies, now=now)
        runs = {run.task_id: run for run in Run.objects.filter(task__in=tasks)}
        downstream: dict[str, list[str]] = {step["id"]: [] for step in steps}
        for step in steps:
            for name in step.get("after") or []:
                downstream[name].append(step["id"])
        rows = [
            WorkflowStep(
                workflow_run=workflow_run,
                step_id=step["id"],
                run=runs[task.pk],
                after=step.get("after") or [],
                run_on=step.get("on") or "success",
                downstream=downstream[step["id"]],
                waiting=len(step.get("after") or []),
            )
            for step, task in zip(steps, tasks, strict=True)
        ]
        WorkflowStep.objects.bulk_create(rows)
        # One UPDATE per distinct `after` (a fan-out's children share one).
        held: dict[str, list[Any]] = {}
        for row in rows:
            if row.after and row.run is not None:
                reason = upstream.WORDS.format(steps=", ".join(row.after))
                held.setdefault(reason, []).append(row.run.pk)
        for reason, run_ids in held.items():
            Run.objects.filter(pk__in=run_ids).update(
                status=Run.Status.WAITING_FOR_RESOURCE,
                wait_kind=upstream.KIND,
                wait_reason=reason,
                execute_at=upstream.HELD_UNTIL,
            )
    return workflow_run


def cancel_workflow_run(*, workflow_run: WorkflowRun, now: datetime) -> WorkflowRun:
    """Cancel a running workflow run: it ends `cancelled` with its held steps, then its scheduled
    step runs are cancelled and its running ones stopped as a run's cancel stops them; nothing
    more is released. Cancelling an ended one changes nothing.

    Two transactions, in the lock order of a step's end (its run's row, then the workflow
    run's): the first locks the workflow run and cancels it with the held steps (no worker
    locks those); the second cancels the other step runs, each by compare-and-swap, holding no
    workflow run lock (the trigger sees it ended and takes none). A crash between the two lets
    the steps already released run to their end, and releases nothing after them.
    """
    with transaction.atomic():
        workflow_run = WorkflowRun.objects.select_for_update().get(pk=workflow_run.pk)
        if workflow_run.status != WorkflowRun.Status.RUNNING:
            return workflow_run
        workflow_run.status = WorkflowRun.Status.CANCELLED
        workflow_run.finished_at = now
        workflow_run.save(update_fields=["status", "finished_at"])
        step_runs = Run.objects.filter(workflow_step__workflow_run=workflow_run)
        step_runs.filter(status=Run.Status.WAITING_FOR_RESOURCE, wait_kind=upstream.KIND).update(
            status=Run.Status.CANCELLED,
            finished_at=now,
            error="workflow run cancelled",
            wait_kind="",
            wait_reason="",
        )
    with transaction.atomic():
        pending = step_runs.filter(status__in=(*CLAIMABLE_STATUSES, Run.Status.RUNNING))
        for run in pending.order_by("id"):
            if run.status == Run.Status.RUNNING:
                cancel_running(run=run, now=now, reason="workflow run cancelled")
            else:
                Run.objects.filter(pk=run.pk, status=run.status).update(
                    status=Run.Status.CANCELLED,
                    finished_at=now,
                    error="workflow run cancelled",
                    wait_kind="",
                    wait_reason="",
                )
    return workflow_run


def retry_workflow_run(*, workflow_run: WorkflowRun, now: datetime) -> WorkflowRun:
    """Run a failed or cancelled workflow run's failed, cancelled and skipped steps again; its
    succeeded steps keep their runs and outputs and do not run again. Conflict otherwise.

    Each such step's run is reset, with a fresh set of attempts as a run's retry gives it: held
    again (`upstream`) when it has `after`, else scheduled now; then the workflow run is
    resolved at once, so a step whose upstream steps all succeeded starts now (with their
    outputs) and a condition still unmet is skipped again. The workflow run's row is locked
    first (a cancel or retry meanwhile waits, then sees the new status).
    """
    with transaction.atomic():
        workflow_run = WorkflowRun.objects.select_for_update().get(pk=workflow_run.pk)
        if workflow_run.status not in (WorkflowRun.Status.FAILED, WorkflowRun.Status.CANCELLED):
            raise Conflict(
                f"only failed or cancelled workflow runs can be retried, not {workflow_run.status}"
            )
        rows = (
            WorkflowStep.objects.select_related("run")
            .select_for_update(of=("run",))
            .filter(
                workflow_run=workflow_run,
                run__status__in=(Run.Status.FAILED, Run.Status.CANCELLED, Run.Status.SKIPPED),
            )
            .order_by("run_id")
        )
        steps = [(row, row.run) for row in rows if row.run is not None]
        tasks = {t.pk: t for t in Task.objects.filter(pk__in=[run.task_id for _, run in steps])}
        for row, run in steps:
            if tasks[run.task_id].status == Task.Status.CANCELLED:
                raise Conflict(f"the task of step {row.step_id} is cancelled")
        workflow_run.status = WorkflowRun.Status.RUNNING
        workflow_run.finished_at = None
        workflow_run.save(update_fields=["status", "finished_at"])
        for row, run in steps:
            task = tasks[run.task_id]
            held = bool(row.after)
            Run.objects.filter(pk=run.pk).update(
                status=Run.Status.WAITING_FOR_RESOURCE if held else Run.Status.SCHEDULED,
                wait_kind=upstream.KIND if held else "",
                wait_reason=upstream.WORDS.format(steps=", ".join(row.after)) if held else "",
                execute_at=upstream.HELD_UNTIL if held else now,
                finished_at=None,
                worker="",
                heartbeat_at=None,
                error="",
                skip_kind="",
                max_attempts=run.attempt + task.max_attempts,
                cpu_millis=task.cpu_millis,
                memory_bytes=task.memory_bytes,
            )
        Task.objects.filter(pk__in=list(tasks), status__in=ENDED).update(status=Task.Status.ACTIVE)
        with connection.cursor() as cursor:
            cursor.execute(SQL["resolve_workflow_run"], {"id": workflow_run.pk})
        notify(RUN_DUE_CHANNEL)
    workflow_run.refresh_from_db()
    return workflow_run


def resolve_workflow_runs(*, limit: int = 100) -> int:
    """The reviewer's sweep: resolve the running workflow runs whose steps have all ended or
    that hold a step whose upstream steps have all ended (left by a crash, or by a step run
    ended with the trigger disabled). Idempotent, and SKIP LOCKED: two reviewers share them,
    and a workflow run a step's end is resolving is left to it. Returns how many it resolved."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(SQL["unresolved_workflow_runs"], {"limit": limit})
        found = [row[0] for row in cursor.fetchall()]
        for workflow_run_id in found:
            cursor.execute(SQL["resolve_workflow_run"], {"id": workflow_run_id})
    return len(found)
