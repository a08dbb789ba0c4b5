"""The workflow run admin: a read-only page with the workflow's DAG toned by this run's step
statuses, each box a link to its step's run, and a table of the steps."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

import tasks.admin.display as display
import tasks.admin.workflow_dag as workflow_dag
from tasks.admin.workflow_admin import WorkflowScoped, framed, step_statuses
from tasks.models import Run
from tasks.workflow_models import WorkflowRun, WorkflowStep

OUTPUT_HEAD = 120  # characters of a step's output the table shows


@admin.register(WorkflowRun)
class WorkflowRunAdmin(WorkflowScoped):
    list_display = ["id", "workflow", "status_badge", "started", "finished"]
    list_filter = ["status"]
    list_select_related = ["workflow"]
    search_fields = ["workflow__name"]
    ordering = ["-started_at", "-id"]
    fields = readonly_fields = (
        "workflow_link",
        "status_badge",
        "started",
        "finished",
        "scheduled",
        "reason",
        "dag",
        "step_table",
    )

    class Media:
        css = {"all": ["tasks/admin_console.css", "tasks/admin_dag.css"]}

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).select_related("workflow")

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        # The heading names the workflow and the time, not the raw `id@timestamp`.
        workflow_run = self.get_object(request, object_id)  # scoped: another user's is a 404
        subtitle = f"{workflow_run.workflow.name}, {display.local(workflow_run.started_at)}"
        shown = {**(extra_context or {}), "subtitle": subtitle}
        return super().change_view(request, object_id, form_url, shown)

    @admin.display(description="workflow")
    def workflow_link(self, workflow_run: WorkflowRun) -> SafeString:
        url = reverse("admin:tasks_workflow_change", args=[workflow_run.workflow_id])
        return format_html('<a href="{}">{}</a>', url, workflow_run.workflow.name)

    @admin.display(description="status", ordering="status")
    def status_badge(self, workflow_run: WorkflowRun) -> str:
        return display.badge(workflow_run.status)

    @admin.display(description="started at", ordering="started_at")
    def started(self, workflow_run: WorkflowRun) -> str:
        return display.local(workflow_run.started_at)

    @admin.display(description="finished at")
    def finished(self, workflow_run: WorkflowRun) -> str:
        return display.local(workflow_run.finished_at)

    @admin.display(description="occurrence")
    def scheduled(self, workflow_run: WorkflowRun) -> str:
        return display.local(workflow_run.scheduled_at) if workflow_run.scheduled_at else "-"

    @admin.display(description="steps")
    def dag(self, workflow_run: WorkflowRun) -> SafeString:
        statuses, links = step_statuses(workflow_run)
        return framed(workflow_dag.svg(run_steps(workflow_run), statuses, links))

    @admin.display(description="step runs")
    def step_table(self, workflow_run: WorkflowRun) -> SafeString:
        rows = WorkflowStep.objects.filter(workflow_run=workflow_run).select_related("run")
        by_id = {row.step_id: row.run for row in rows}
        body = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            (_cells(step["id"], by_id.get(step["id"])) for step in run_steps(workflow_run)),
        )
        return format_html(
            '<table class="workflow-steps"><thead><tr><th>step</th><th>status</th><th>run</th>'
            "<th>duration</th><th>output</th></tr></thead><tbody>{}</tbody></table>",
            body,
        )


def run_steps(workflow_run: WorkflowRun) -> list[dict[str, Any]]:
    """The steps the workflow run started with (a PATCH of the workflow's since changes none),
    in the workflow's order then, shaped as a workflow's steps for the drawing."""
    rows = WorkflowStep.objects.filter(workflow_run=workflow_run).order_by("id")
    return [{"id": row.step_id, "after": row.after, "on": row.run_on} for row in rows]


def _cells(step_id: str, run: Run | None) -> tuple[str, ...]:
    if run is None:
        return (step_id, workflow_dag.NO_RUN, "-", "-", "")
    head = (run.output or "")[:OUTPUT_HEAD]
    link = format_html('<a href="{}">{}</a>', display.run_url(run.pk), run.pk)
    return (step_id, display.badge(run.status), link, display.duration(run), head)
