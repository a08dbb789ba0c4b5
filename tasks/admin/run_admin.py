"""The run admin: its list, its page (tasks/admin/run_page.py), its timeline
(tasks/admin/timeline.py) and its actions, each through tasks.transitions.run_actions as the
API does. The list keeps an ordering each filter's index can serve."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

import tasks.admin.display as display
from tasks.admin.actions import apply_each
from tasks.admin.bulk import CANCEL_UNFINISHED, RETRY_FAILED, BulkMatching
from tasks.admin.lists import (
    CountedToThePage,
    DateRangeFilter,
    OwnerFilter,
    QuickCheckbox,
    parse_uuid,
)
from tasks.admin.run_page import RunPageButtons
from tasks.admin.scope import OwnedAdmin, OwnedInline
from tasks.admin.timeline import RunTimeline
from tasks.models import TERMINAL_STATUSES, Attempt, Run, Task
from tasks.transitions import run_actions

SEARCH_TASKS = 100  # tasks a search by name looks at most, the newest
SEARCH_CAP = 1_000  # runs of theirs it lists at most, the newest


class AttemptInline(OwnedInline, admin.TabularInline):
    model = Attempt
    fields = readonly_fields = (
        "number",
        "worker",
        "started_at",
        "finished_at",
        "outcome",
        "exit_code",
        "http_status",
        "error",
    )
    ordering = ["number"]
    extra = 0
    max_num = 0


@admin.register(Run)
class RunAdmin(
    CountedToThePage, QuickCheckbox, BulkMatching, RunPageButtons, RunTimeline, OwnedAdmin
):
    list_display = ["id", "task", "scheduled", "status_badge", "attempt", "priority", "worker"]
    list_display += ["started", "duration", "wait_reason", "zombie_since"]
    # Date: Today / Past 7 days / This month / This year, or a range typed in; no
    # date_hierarchy, whose drill-down runs SELECT DISTINCT over the whole table.
    list_filter = ["status", ("scheduled_at", DateRangeFilter), OwnerFilter]
    list_select_related = ["task"]
    search_fields = ["task__name"]
    raw_id_fields = ["task", "owner"]
    team_path = "task__team"  # a run is in its task's team
    fields = readonly_fields = (
        "id",
        "task",
        "owner",
        "status",
        "wait_reason",
        "zombie_since",
        "scheduled_at",
        "execute_at",
        "priority",
        "cpu_millis",
        "memory_bytes",
        "attempt",
        "max_attempts",
        "worker",
        "heartbeat_at",
        "started_at",
        "finished_at",
        "exit_code",
        "http_status",
        "error",
        "output_text",
        "created_at",
    )
    show_full_result_count = False
    list_per_page = 50  # as the task list: a page a person scans, in half the time of 100
    inlines = [AttemptInline]
    actions = ["retry", "cancel"]
    bulk_actions = (RETRY_FAILED, CANCEL_UNFINISHED)

    class Media:
        js = ["tasks/admin_live.js"]  # the list's rows refresh themselves
        css = {"all": ["tasks/admin_lists.css", "tasks/admin_console.css"]}  # and fit 1,280 px

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        # An ordering the filter's index can serve, read backwards and cut at the page size:
        # finished statuses by run_finished_idx (status, finished_at); one task's runs by
        # run_unique_task_scheduled_at (task, scheduled_at); a date range by
        # run_scheduled_at_idx; a range of starts (the dashboard's bars) by run_started_at_idx;
        # otherwise the time-ordered uuid7 primary key, newest first.
        if request.GET.get("status__exact") in TERMINAL_STATUSES:
            return ("-finished_at",)
        if {"task__id__exact", "scheduled_at__gte", "scheduled_at__lt"} & request.GET.keys():
            return ("-scheduled_at",)
        if {"started_at__gte", "started_at__lt"} & request.GET.keys():
            return ("-started_at",)
        return ("-id",)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        if not search_term.strip():
            return queryset, False
        # A pasted id finds the run, or every run of the task with that id, by index.
        some_id = parse_uuid(search_term)
        if some_id is not None:
            return queryset.filter(Q(pk=some_id) | Q(task_id=some_id)), False
        # A name matches tasks first (the small table; a range of its trigram index where
        # pg_trgm is installed, migration 0044), the newest SEARCH_TASKS of them, then their
        # runs, the newest SEARCH_CAP, by the runs' (task, scheduled_at) index. Both as values,
        # not subqueries: with the runs of a hundred tasks as the only condition, the page
        # read the primary key backwards, filtering the whole history for them (0.1 s with
        # 1,000,000 runs), where reading the matches and sorting them takes a few ms.
        tasks = (
            Task.objects.filter(name__icontains=search_term)
            .order_by("-created_at", "-pk")
            .values_list("pk", flat=True)
        )
        runs = queryset.filter(task__in=list(tasks[:SEARCH_TASKS])).order_by("-pk")
        return queryset.filter(pk__in=list(runs.values_list("pk", flat=True)[:SEARCH_CAP])), False

    @admin.display(description="scheduled at", ordering="scheduled_at")
    def scheduled(self, run: Run) -> str:
        return display.local(run.scheduled_at)

    @admin.display(description="status", ordering="status")
    def status_badge(self, run: Run) -> str:
        return display.badge(run.status)

    @admin.display(description="started at", ordering="started_at")
    def started(self, run: Run) -> str:
        return display.local(run.started_at)

    @admin.display(description="duration")
    def duration(self, run: Run) -> str:
        return display.duration(run)

    @admin.display(description="output")
    def output_text(self, run: Run) -> str:
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', run.output or "-")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # runs come from schedules, "run now" and retries, never from a form

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The list may act (actions call services); the run page itself is read-only.
        return obj is None and super().has_change_permission(request)

    @admin.action(
        description="Retry the selected runs (failed or cancelled)", permissions=["change"]
    )
    def retry(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        apply_each(
            self, request, queryset, "retried", lambda r, now: run_actions.retry_run(run=r, now=now)
        )

    @admin.action(
        description="Cancel the selected runs (running ones are stopped)", permissions=["change"]
    )
    def cancel(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        apply_each(
            self,
            request,
            queryset,
            "cancelled",
            lambda r, now: run_actions.cancel_run(run=r, now=now),
        )
