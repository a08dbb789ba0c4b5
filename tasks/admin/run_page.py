"""A run's own page: why it ended as it did, above its fields, and its retry and cancel buttons.

The summary comes first: status, duration, the error in full (a traceback as the worker kept
it), then the attempts, the output, the task and its schedule; the run's internal fields
(resources used, keys, heartbeat) follow as the admin lists them.


Each button posts to `<run id>/retry/` or `<run id>/cancel/`, which finds the run through the
admin's scoped queryset (another user's run is a 404), calls the same transition as the API and
the list action, records it in the run's history (LogEntry) and comes back to the page with
the outcome, or the refusal (the API's 409) as an error message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.urls import path, reverse
from django.utils import timezone

import tasks.admin.display as display
from tasks import schedule_describe
from tasks.admin.strips import LIST_STRIP, recent_runs
from tasks.db import db_now
from tasks.exceptions import TasksError
from tasks.models import CLAIMABLE_STATUSES, Attempt, Run
from tasks.transitions import run_actions

RETRYABLE = (Run.Status.FAILED, Run.Status.CANCELLED)
CANCELLABLE = (*CLAIMABLE_STATUSES, Run.Status.RUNNING)


class RunPageButtons(admin.ModelAdmin):
    change_form_template = "admin/tasks/run/change_form.html"

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("<path:object_id>/retry/", wrap(self.retry_view), name="tasks_run_retry"),
            path("<path:object_id>/cancel/", wrap(self.cancel_view), name="tasks_run_cancel"),
            *super().get_urls(),
        ]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        run = self._run(request, object_id)
        buttons = {"may_retry": run.status in RETRYABLE, "may_cancel": run.status in CANCELLABLE}
        shown = {**(extra_context or {}), **buttons, "run_summary": summary(run)}
        # The heading names the task and the time, not the run's raw `id@timestamp`.
        shown["subtitle"] = f"{run.task.name or run.task_id}, {display.local(run.scheduled_at)}"
        return super().change_view(request, object_id, form_url, shown)

    def _run(self, request: HttpRequest, object_id: str) -> Run:
        run = self.get_object(request, object_id)  # scoped: another user's run is None
        if run is None:
            raise Http404("No such run.")
        return run

    def retry_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return self._act(request, object_id, "Retried", run_actions.retry_run)

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return self._act(request, object_id, "Cancelled", run_actions.cancel_run)

    def _act(
        self, request: HttpRequest, object_id: str, verb: str, action: Callable[..., Run]
    ) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        run = self._run(request, object_id)
        try:
            action(run=run, now=db_now())
        except TasksError as exc:
            self.message_user(request, f"Not done: {exc.detail}", messages.ERROR)
        else:
            self.log_change(request, run, verb)
            self.message_user(request, f"{verb}.", messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:tasks_run_change", args=[run.pk]))


def summary(run: Run) -> dict[str, Any]:
    """What the page shows above the run's fields, ready for the template."""
    now = timezone.now()
    task = run.task
    attempts = list(Attempt.objects.filter(run_id=run.pk).order_by("number"))
    placed = _on_a_line(attempts)
    facts = [
        ("execute at", display.local(run.execute_at)),
        ("worker", run.worker or "-"),
    ]
    facts += [(name, str(value)) for name, value in _outcome(run) if value not in (None, "")]
    return {
        "status": display.badge(run.status),
        "scheduled_at": display.local(run.scheduled_at),
        "duration": display.duration(run, now),
        "attempt": f"{run.attempt} of at most {run.max_attempts}",
        "started_at": display.local(run.started_at),
        "finished_at": display.local(run.finished_at),
        "facts": facts,
        "error": run.error,
        "output": run.output,
        "attempts": [
            {
                "number": attempt.number,
                "outcome": display.badge(attempt.outcome),
                "started_at": display.local(attempt.started_at),
                "finished_at": display.local(attempt.finished_at),
                "duration": display.duration(attempt),
                "worker": attempt.worker or "-",
                "error": attempt.error,
                "left": left,
                "width": width,
                "tone": display.TONES.get(attempt.outcome, "idle"),
            }
            for attempt, (left, width) in zip(attempts, placed, strict=True)
        ],
        "task_name": task.name or str(task.pk),
        "task_url": reverse("admin:tasks_task_change", args=[task.pk]),
        "task_status": display.badge(task.status),
        "schedule": schedule_describe.describe(task.schedule) or task.schedule_type,
        "strip": display.strip(recent_runs([task.pk], now=now, count=LIST_STRIP)[task.pk]),
    }


def _outcome(run: Run) -> list[tuple[str, Any]]:
    return [
        ("exit code", run.exit_code),
        ("HTTP status", run.http_status),
        ("waits for", run.wait_reason),
        ("zombie since", run.zombie_since and display.local(run.zombie_since)),
        ("backfill", "yes" if run.backfill else ""),
    ]


def _on_a_line(attempts: list[Attempt]) -> list[tuple[float, float]]:
    """Each attempt's start and length as percentages of the span from the first start to the
    last finish, so the page draws them as a timeline (the gaps are the backoffs)."""
    starts = [a.started_at or a.finished_at for a in attempts]
    if not attempts:
        return []
    first, last = min(starts), max(a.finished_at for a in attempts)
    total = max((last - first).total_seconds(), 1e-6)
    placed = []
    for start, attempt in zip(starts, attempts, strict=True):
        left = (start - first).total_seconds() / total * 100
        width = max((attempt.finished_at - start).total_seconds() / total * 100, 0.5)
        placed.append((round(left, 2), round(min(width, 100 - left), 2)))
    return placed
