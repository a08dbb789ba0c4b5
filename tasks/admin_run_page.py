"""Retry and cancel buttons on a run's own page, beside the list's actions.

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

from tasks.db import db_now
from tasks.exceptions import TasksError
from tasks.models import CLAIMABLE_STATUSES, Run
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
        return super().change_view(
            request, object_id, form_url, {**(extra_context or {}), **buttons}
        )

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
