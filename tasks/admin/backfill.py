"""The task page's Backfill button and form: the runs of the task's past occurrences in a range,
by the same transition as the API's `POST /tasks/{id}/backfill` (docs/schedules.md, Backfill).

`<task id>/backfill/` finds the task through the admin's scoped queryset (another user's task
is a 404), shows a form (start, end in UTC; optionally max_runs and a lower priority), and on
submit calls tasks.transitions.backfill: a refusal on a field is shown on that field, as the
API's 400 names it; a conflict (a paused task) as an error. What it did is recorded in the
task's history (LogEntry) and said on the task's page.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from tasks.db import db_now
from tasks.exceptions import TasksError
from tasks.models import Task
from tasks.transitions.backfill import DEFAULT_MAX_RUNS, MAX_RUNS_CAP, BackfillError, backfill

_WHEN = forms.DateTimeInput(attrs={"type": "datetime-local", "step": 1}, format="%Y-%m-%dT%H:%M:%S")


class BackfillForm(forms.Form):
    start = forms.DateTimeField(widget=_WHEN, help_text="UTC; included.")
    end = forms.DateTimeField(widget=_WHEN, help_text="UTC; excluded. Not in the future.")
    max_runs = forms.IntegerField(
        min_value=1,
        max_value=MAX_RUNS_CAP,
        initial=DEFAULT_MAX_RUNS,
        help_text="The most occurrences the range may hold; with more, nothing is created.",
    )
    priority = forms.IntegerField(
        min_value=0,
        max_value=9,
        required=False,
        help_text="Blank: the task's. At most the task's, so a backfill can run behind it.",
    )


class TaskBackfill(admin.ModelAdmin):
    change_form_template = "admin/tasks/task/change_form.html"

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(self.backfill_view)
        return [
            path("<path:object_id>/backfill/", view, name="tasks_task_backfill"),
            *super().get_urls(),
        ]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        task = self.get_object(request, object_id)
        recurring = task is not None and task.schedule_type != "once"
        return super().change_view(
            request, object_id, form_url, {**(extra_context or {}), "may_backfill": recurring}
        )

    def backfill_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        task = self.get_object(request, object_id)  # scoped: another user's task is None
        if task is None or not self.has_change_permission(request, task):
            raise Http404("No such task.")
        form = BackfillForm(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid() and self._backfill(request, task, form):
            return HttpResponseRedirect(reverse("admin:tasks_task_change", args=[task.pk]))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": task,
            "title": f"Backfill {task}",
            "form": form,
        }
        return TemplateResponse(request, "admin/tasks/task/backfill.html", context)

    def _backfill(self, request: HttpRequest, task: Task, form: BackfillForm) -> bool:
        data = form.cleaned_data
        try:
            result = backfill(
                task=task,
                start=data["start"],
                end=data["end"],
                now=db_now(),
                max_runs=data["max_runs"],
                priority=data["priority"],
            )
        except BackfillError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
            return False
        except TasksError as exc:
            form.add_error(None, exc.detail)
            return False
        done = (
            f"Backfilled: {result.created} runs created, {result.excluded} excluded "
            f"(recorded skipped), {result.existing} already recorded."
        )
        self.log_change(request, task, done)
        self.message_user(request, done, messages.SUCCESS)
        return True
