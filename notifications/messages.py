"""Rendering one Notification into the Message every transport sends (webhook body, mail, Slack)."""

from __future__ import annotations

from typing import Any

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
}


def build_message(
    notification: Notification, *, attempt: Attempt | None, public_url: str
) -> Message:
    """The Message for `notification` (channel, run and task loaded). `attempt` is the attempt
    the event is about, for its error; the run's own fields describe it as it is now."""
    run, task = notification.run, notification.task
    base = public_url.rstrip("/")
    run_url = f"{base}/api/v1/runs/{run.id}"
    error = (attempt.error if attempt is not None else "") or run.error
    task_data: dict[str, Any] = {
        "id": str(task.id),
        "name": task.name,
        "kind": task.kind,
        "url": f"{base}/api/v1/tasks/{task.id}",
    }
    run_data: dict[str, Any] = {
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
        "url": run_url,
    }
    if notification.event == "zombie":  # when the run went quiet (null once it stirred again)
        run_data["zombie_since"] = run.zombie_since
    label = task.name or str(task.id)
    subject = f"Task {label} {HEADLINES.get(notification.event, notification.event)}"
    lines = [
        subject,
        "",
        f"Task:    {label} ({task.id})",
        f"Run:     {run.id} scheduled at {run.scheduled_at.isoformat()}",
        f"Status:  {run.status} (event: {notification.event})",
        f"Attempt: {notification.attempt} of {run.max_attempts}",
    ]
    if notification.event == "zombie" and run.zombie_since is not None:
        lines.append(f"Quiet since: {run.zombie_since.isoformat()}")
    if error:
        lines += ["", "Error:", error[:ERROR_MAX_CHARS]]
    lines += ["", run_url]
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
        },
        task=task_data,
        run=run_data,
        run_url=run_url,
    )
