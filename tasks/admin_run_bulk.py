""" "Retry all failed runs matching this filter" on the run list.

The list's own actions act on the rows ticked on one page (or "all", up to the actions' bound);
this acts on every failed run the list's current filters and search match, across pages. It asks
first, saying how many, and the confirmation re-reads the same filters through the admin's
changelist (so through the user's scoped queryset), retries each through the same transition as
the API, records each in the run's history, and says how many it retried and how many it could
not. At most BATCH runs per confirmation, oldest first; when more match, the message says so
and the button does the next batch.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from tasks.db import db_now
from tasks.exceptions import TasksError
from tasks.models import Run
from tasks.transitions import run_actions

BATCH = 1000


class RunBulkRetry(admin.ModelAdmin):
    change_list_template = "admin/tasks/run/change_list.html"

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(self.retry_matching_view)
        return [
            path("retry-matching/", view, name="tasks_run_retry_matching"),
            *super().get_urls(),
        ]

    def _matching_failed(self, request: HttpRequest) -> Any:
        changelist = self.get_changelist_instance(request)  # the list's filters and search
        return changelist.get_queryset(request).filter(status=Run.Status.FAILED)

    def retry_matching_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_change_permission(request):
            return HttpResponseRedirect(reverse("admin:index"))
        try:
            matching = self._matching_failed(request)
        except IncorrectLookupParameters:  # the list itself answers these with ?e=1
            return HttpResponseRedirect(reverse("admin:tasks_run_changelist") + "?e=1")
        query = request.GET.urlencode()
        back = reverse("admin:tasks_run_changelist") + (f"?{query}" if query else "")
        if request.method != "POST":
            count = matching.order_by()[: BATCH + 1].count()
            context = {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": "Retry failed runs",
                "count": min(count, BATCH),
                "more": count > BATCH,
                "back": back,
            }
            return TemplateResponse(request, "admin/tasks/run/retry_matching.html", context)
        ids = list(matching.order_by("scheduled_at", "id").values_list("pk", flat=True)[:BATCH])
        now, retried, refused = db_now(), 0, 0
        for run in Run.objects.filter(pk__in=ids).order_by("scheduled_at", "id"):
            try:
                run_actions.retry_run(run=run, now=now)
            except TasksError:
                refused += 1  # no longer failed (retried meanwhile), or its task was cancelled
                continue
            self.log_change(request, run, "Retried (all failed runs matching a filter)")
            retried += 1
        message = f"Retried {retried} failed run{'s' if retried != 1 else ''}."
        if refused:
            message += f" {refused} could not be retried (no longer failed, or task cancelled)."
        if len(ids) == BATCH and self._matching_failed(request).exists():
            message += " More match: retry again for the next batch."
        self.message_user(request, message, messages.SUCCESS if retried else messages.WARNING)
        return HttpResponseRedirect(back)
