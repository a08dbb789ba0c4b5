"""The workflow admin: the list and a read-only page with the DAG drawn, each step toned by its
status in the workflow's last run (tasks/admin/workflow_dag.py), and a "Run now" button
(tasks/admin/workflow_page.py). Workflows are written through the API (docs/workflows.md)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

import tasks.admin.display as display
import tasks.admin.workflow_dag as workflow_dag
from tasks.admin.scope import OwnedAdmin, is_operator
from tasks.admin.workflow_page import WorkflowRunNow
from tasks.schedule_describe import describe
from tasks.workflow_models import Workflow, WorkflowRun, WorkflowStep

RECENT_RUNS = 20


class WorkflowScoped(OwnedAdmin):
    """Read-only and the owner's: a workflow has no team (the API shows a user their own)."""

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = admin.ModelAdmin.get_queryset(self, request)
        return queryset if is_operator(request.user) else queryset.filter(owner=request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the API's DELETE cancels the running workflow runs first


def step_statuses(workflow_run: WorkflowRun | None) -> tuple[dict[str, str], dict[str, str]]:
    """Each step's run status in `workflow_run`, and the link to its run page."""
    if workflow_run is None:
        return {}, {}
    rows = WorkflowStep.objects.filter(workflow_run=workflow_run, run__isnull=False)
    pairs = list(rows.values_list("step_id", "run_id", "run__status"))
    statuses = {step_id: status for step_id, _, status in pairs}
    links = {step_id: display.run_url(run_id) for step_id, run_id, _ in pairs}
    return statuses, links


def framed(drawing: SafeString) -> SafeString:
    return format_html('<div class="dag-frame">{}</div>', drawing)


def last_run(workflow: Workflow) -> WorkflowRun | None:
    # An occurrence skipped (misfire, overlap) ran no step: the one before it is shown.
    runs = workflow.runs.exclude(status=WorkflowRun.Status.SKIPPED)
    return runs.order_by("-started_at", "-id").first()


@admin.register(Workflow)
class WorkflowAdmin(WorkflowRunNow, WorkflowScoped):
    list_display = ["name", "step_count", "last_status", "last_started", "created_at", "id"]
    search_fields = ["name"]
    ordering = ["-created_at", "-id"]
    fields = readonly_fields = (
        "name",
        "owner",
        "schedule_text",
        "next_start",
        "priority",
        "expect",
        "health",
        "dag",
        "recent_runs",
        "created_at",
        "updated_at",
    )

    class Media:
        css = {"all": ["tasks/admin_console.css", "tasks/admin_dag.css"]}

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The last run's status and start, one subquery each (workflow_run_workflow_idx).
        latest = (
            WorkflowRun.objects.filter(workflow=OuterRef("pk"))
            .exclude(status=WorkflowRun.Status.SKIPPED)
            .order_by("-started_at", "-id")
        )
        return (
            super()
            .get_queryset(request)
            .select_related("owner")
            .annotate(
                last_run_status=Subquery(latest.values("status")[:1]),
                last_run_started=Subquery(latest.values("started_at")[:1]),
            )
        )

    @admin.display(description="steps")
    def step_count(self, workflow: Workflow) -> int:
        return len(workflow.steps)

    @admin.display(description="last run")
    def last_status(self, workflow: Any) -> str:
        status = workflow.last_run_status
        return display.badge(status) if status else "-"

    @admin.display(description="last started at")
    def last_started(self, workflow: Any) -> str:
        return display.local(workflow.last_run_started)

    @admin.display(description="schedule")
    def schedule_text(self, workflow: Workflow) -> str:
        return describe(workflow.schedule) if workflow.schedule else "- (started on demand)"

    @admin.display(description="next occurrence")
    def next_start(self, workflow: Workflow) -> str:
        return display.local(workflow.next_run_at) if workflow.next_run_at else "-"

    @admin.display(description="steps (as of the last run)")
    def dag(self, workflow: Workflow) -> SafeString:
        statuses, links = step_statuses(last_run(workflow))
        return framed(workflow_dag.svg(workflow.steps, statuses, links))

    @admin.display(description="recent runs")
    def recent_runs(self, workflow: Workflow) -> SafeString:
        runs = workflow.runs.order_by("-started_at", "-id")[:RECENT_RUNS]
        rows = format_html_join(
            "",
            '<li><a href="{}">{}</a> {}</li>',
            (
                (
                    reverse("admin:tasks_workflowrun_change", args=[run.pk]),
                    display.local(run.started_at),
                    display.badge(run.status),
                )
                for run in runs
            ),
        )
        return format_html('<ul class="workflow-runs">{}</ul>', rows) if rows else SafeString("-")
