"""Rendering one Notification into the Message every transport sends (webhook body, mail, Slack)."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from notifications.models import Notification
from notifications.transports.base import Message
from tasks.models import Attempt

ERROR_MAX_CHARS = 2000
HEADLINES = {
    "succeeded": "succeeded",
    "failed": "failed, will retry",
    "retries_exhausted": "failed: retries exhausted",
    "missed": "missed an occurrence",
    "stuck": "has a stuck run",
    "zombie": "has a zombie run (no CPU time, no output)",
    "late": "is late: a run has not started",
    "too_fast": "ran too fast",
    "too_slow": "is running too long",
    "failing": "is failing",
    "overdue": "is overdue: no run succeeded",
    "recovered": "recovered",
    "skipped": "skipped an occurrence",
    "workflow_succeeded": "succeeded",
    "workflow_failed": "failed",
    "workflow_overdue": "is overdue: no workflow run succeeded",
}


def _seconds(value: float) -> str:
    return f"{value:g} s"


def expectation(event: str, task: Any, run: Any, attempt: Attempt | None) -> dict | None:
    """What the task's `expect` said and what happened instead, for an alert event (None for
    others): the message's `expectation` member and its Expected/Happened lines."""
    expect = task.expect or {}
    duration = expect.get("duration") or {}
    started = attempt.started_at if attempt is not None else getattr(run, "started_at", None)
    finished = attempt.finished_at if attempt is not None else getattr(run, "finished_at", None)
    if event == "late":
        expected = (
            f"to start within {_seconds(expect.get('start_within', 0))} of its scheduled time"
        )
        happened = f"the run scheduled at {run.scheduled_at.isoformat()} had not started"
    elif event == "too_fast":
        took = (finished - started).total_seconds() if started and finished else 0.0
        expected = f"a run to take at least {_seconds(duration.get('min', 0))}"
        happened = f"this run succeeded in {took:.3f} s"
    elif event == "too_slow":
        expected = f"a run to finish within {_seconds(duration.get('max', 0))}"
        since = started.isoformat() if started else "?"
        happened = f"this run has been running since {since}"
    elif event == "failing":
        streak = expect.get("failure_streak", 1)
        expected = f"fewer than {streak} failed runs in a row"
        happened = f"{streak} or more runs in a row failed for good, this one the latest"
    elif event == "overdue":
        expected = f"a successful run at least every {_seconds(expect.get('success_within', 0))}"
        happened = "no run succeeded for that long" if run else "no run at all for that long"
    elif event == "recovered":
        expected = "the task's expectations to hold again"
        happened = "this run succeeded: the task is up again"
    elif event == "skipped":
        expected = f"the occurrence at {run.scheduled_at.isoformat()} to run"
        happened = run.error or "it was skipped"
        return {"reason": run.skip_kind or "other", "expected": expected, "happened": happened}
    else:
        return None
    return {"expect": expect, "expected": expected, "happened": happened}


def build_message(
    notification: Notification, *, attempt: Attempt | None, public_url: str
) -> Message:
    """The Message for `notification` (channel, run and task loaded). `attempt` is the attempt
    the event is about, for its error; the run's own fields describe it as it is now. An alert
    about the task alone (no run: `overdue` before any run) has `run` null; a workflow run's
    event is workflow_message's, a workflow's own workflow_overdue_message's.

    `url` in the webhook body is the JSON API's (for programs); the links a person clicks (the
    mail's and Slack's) are the admin's pages, which a browser session opens."""
    if notification.workflow_run is not None:
        return workflow_message(notification, public_url=public_url)
    if notification.workflow is not None:
        return workflow_overdue_message(notification, public_url=public_url)
    run, task = notification.run, notification.task
    assert task is not None  # a notification names a task or a workflow run (its CHECK)
    base = public_url.rstrip("/")
    task_data: dict[str, Any] = {
        "id": str(task.id),
        "name": task.name,
        "kind": task.kind,
        "url": f"{base}/api/v1/tasks/{task.id}",
        "admin_url": base + reverse("admin:tasks_task_change", args=[task.id]),
    }
    run_data = None if run is None else _run_data(notification, run, attempt, base)
    page = (run_data or task_data)["admin_url"]
    error = (run_data or {}).get("error") or ""
    label = task.name or str(task.id)
    subject = f"Task {label} {HEADLINES.get(notification.event, notification.event)}"
    lines = [subject, "", f"Task:    {label} ({task.id})"]
    if run is None:
        lines.append(f"Run:     none (event: {notification.event})")
    else:
        lines += [
            f"Run:     {run.id} scheduled at {run.scheduled_at.isoformat()}",
            f"Status:  {run.status} (event: {notification.event})",
            f"Attempt: {notification.attempt} of {run.max_attempts}",
        ]
    if notification.event == "zombie" and run is not None and run.zombie_since is not None:
        lines.append(f"Quiet since: {run.zombie_since.isoformat()}")
    judged = expectation(notification.event, task, run, attempt)
    if judged is not None:
        lines += [f"Expected: {judged['expected']}", f"Happened: {judged['happened']}"]
    if error:
        lines += ["", "Error:", error]
    lines += ["", *([run_data["admin_url"]] if run_data else []), task_data["admin_url"]]
    return Message(
        delivery_id=str(notification.id),
        event=notification.event,
        created_at=notification.created_at,
        subject=subject,
        text="\n".join(lines) + "\n",
        body={
            "id": str(notification.id),
            "event": notification.event,
            "task": task_data,
            "run": run_data,
            "created_at": notification.created_at,
            **({"expectation": judged} if judged is not None else {}),
        },
        task=task_data,
        run=run_data or {},
        run_url=page,
    )


def _run_data(notification: Notification, run: Any, attempt: Attempt | None, base: str) -> dict:
    error = (attempt.error if attempt is not None else "") or run.error
    data: dict[str, Any] = {
        "id": str(run.id),
        "scheduled_at": run.scheduled_at,
        "status": run.status,
        "attempt": notification.attempt,
        "max_attempts": run.max_attempts,
        "started_at": attempt.started_at if attempt is not None else run.started_at,
        "finished_at": attempt.finished_at if attempt is not None else run.finished_at,
        "outcome": attempt.outcome if attempt is not None else None,
        "error": error[:ERROR_MAX_CHARS],
        "exit_code": attempt.exit_code if attempt is not None else run.exit_code,
        "http_status": attempt.http_status if attempt is not None else run.http_status,
        "url": f"{base}/api/v1/runs/{run.id}",
        "admin_url": base + reverse("admin:tasks_run_change", args=[run.id]),
    }
    if notification.event == "zombie":  # when the run went quiet (null once it stirred again)
        data["zombie_since"] = run.zombie_since
    return data


def workflow_message(notification: Notification, *, public_url: str) -> Message:
    """The Message for a workflow run's end (`workflow_succeeded`, `workflow_failed`; the
    workflow run and its workflow loaded): the webhook body's `workflow` and `workflow_run`
    say which, `task` and `run` are null; each failed step is named with its error."""
    workflow_run = notification.workflow_run
    assert workflow_run is not None
    workflow = workflow_run.workflow
    base = public_url.rstrip("/")
    workflow_data: dict[str, Any] = {
        "id": str(workflow.id),
        "name": workflow.name,
        "url": f"{base}/api/v1/workflows/{workflow.id}",
        "admin_url": base + reverse("admin:tasks_workflow_change", args=[workflow.id]),
    }
    failed = [
        {"id": step.step_id, "run": str(step.run_id), "error": step.run.error[:ERROR_MAX_CHARS]}
        for step in workflow_run.steps.select_related("run").order_by("step_id")
        if step.run is not None and step.run.status == "failed"
    ]
    run_data: dict[str, Any] = {
        "id": str(workflow_run.id),
        "status": workflow_run.status,
        "started_at": workflow_run.started_at,
        "finished_at": workflow_run.finished_at,
        "failed_steps": failed,
        "url": f"{base}/api/v1/workflow-runs/{workflow_run.id}",
        "admin_url": base + reverse("admin:tasks_workflowrun_change", args=[workflow_run.id]),
    }
    label = workflow.name or str(workflow.id)
    subject = f"Workflow {label} {HEADLINES.get(notification.event, notification.event)}"
    lines = [
        subject,
        "",
        f"Workflow:     {label} ({workflow.id})",
        f"Workflow run: {workflow_run.id} started at {workflow_run.started_at.isoformat()}",
        f"Status:       {workflow_run.status} (event: {notification.event})",
    ]
    for step in failed:
        lines += ["", f"Step {step['id']} failed:", step["error"]]
    lines += ["", run_data["admin_url"], workflow_data["admin_url"]]
    return Message(
        delivery_id=str(notification.id),
        event=notification.event,
        created_at=notification.created_at,
        subject=subject,
        text="\n".join(lines) + "\n",
        body={
            "id": str(notification.id),
            "event": notification.event,
            "workflow": workflow_data,
            "workflow_run": run_data,
            "task": None,
            "run": None,
            "created_at": notification.created_at,
        },
        task=workflow_data,
        run=run_data,
        run_url=run_data["admin_url"],
    )


def workflow_overdue_message(notification: Notification, *, public_url: str) -> Message:
    """The Message for a workflow's `workflow_overdue` (the workflow loaded): the webhook body's
    `workflow` says which and what it expected; `workflow_run`, `task` and `run` are null."""
    workflow = notification.workflow
    assert workflow is not None
    base = public_url.rstrip("/")
    within = (workflow.expect or {}).get("success_within", 0)
    workflow_data: dict[str, Any] = {
        "id": str(workflow.id),
        "name": workflow.name,
        "expect": workflow.expect,
        "health": workflow.health,
        "overdue_from": workflow.overdue_from,
        "url": f"{base}/api/v1/workflows/{workflow.id}",
        "admin_url": base + reverse("admin:tasks_workflow_change", args=[workflow.id]),
    }
    label = workflow.name or str(workflow.id)
    subject = f"Workflow {label} {HEADLINES[notification.event]}"
    since = workflow.overdue_from.isoformat() if workflow.overdue_from else "?"
    lines = [
        subject,
        "",
        f"Workflow: {label} ({workflow.id})",
        f"Expected: a workflow run to succeed at least every {_seconds(within)}",
        f"Happened: none succeeded since {since}",
        "",
        workflow_data["admin_url"],
    ]
    return Message(
        delivery_id=str(notification.id),
        event=notification.event,
        created_at=notification.created_at,
        subject=subject,
        text="\n".join(lines) + "\n",
        body={
            "id": str(notification.id),
            "event": notification.event,
            "workflow": workflow_data,
            "workflow_run": None,
            "task": None,
            "run": None,
            "created_at": notification.created_at,
        },
        task=workflow_data,
        run={},
        run_url=workflow_data["admin_url"],
    )
