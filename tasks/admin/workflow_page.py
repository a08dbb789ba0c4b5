"""A workflow's page: its "Run now" button, which posts to `<workflow id>/start/`.

The view finds the workflow through the admin's scoped queryset (another user's is a 404),
validates each step's body as the API's start does (a body valid at create may name a channel
since deleted), starts the workflow run with the same transition, records it in the workflow's
history and goes to the new workflow run's page; a body refused comes back as an error message.
"""

from __future__ import annotations

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

from tasks.api.workflows import step_bodies
from tasks.db import db_now
from tasks.transitions import workflows


class WorkflowRunNow(admin.ModelAdmin):
    change_form_template = "admin/tasks/workflow/change_form.html"

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("<path:object_id>/start/", wrap(self.start_view), name="tasks_workflow_start"),
            *super().get_urls(),
        ]

    def start_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        workflow = self.get_object(request, object_id)  # scoped: another user's is None
        if workflow is None:
            raise Http404("No such workflow.")
        now = db_now()
        # The step tasks are the workflow's owner's, as the API makes them.
        bodies, refused = step_bodies(workflow, now)
        if refused:
            self.message_user(request, "Not started: " + refused, messages.ERROR)
            return HttpResponseRedirect(reverse("admin:tasks_workflow_change", args=[workflow.pk]))
        workflow_run = workflows.start_workflow_run(workflow=workflow, step_bodies=bodies, now=now)
        self.log_change(request, workflow, "Started a workflow run")
        self.message_user(request, "Started.", messages.SUCCESS)
        return HttpResponseRedirect(
            reverse("admin:tasks_workflowrun_change", args=[workflow_run.pk])
        )
