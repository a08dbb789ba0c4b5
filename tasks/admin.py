"""The Django admin operators run the service from: tasks, runs, processes, and the dashboard.

Every action and every task saved goes through tasks.transitions (creation, lifecycle,
run_actions), exactly like the API; the task form is validated by the API's serializer
(tasks.admin_forms). Every changelist stays fast with millions of runs: no full counts
(EstimatedCountPaginator, show_full_result_count = False), static filters, uuid search by
primary key, and an ordering each filter's index can serve (docs/operations.md has the
measurement).
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from datetime import UTC
from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from tasks import (
    admin_calendars,  # noqa: F401  (registers the calendars' admin)
    admin_limits,  # noqa: F401  (registers the limit keys' admin)
    expectations,
    history,
    occurrences,
)
from tasks.admin_backfill import TaskBackfill
from tasks.admin_bulk import (
    CANCEL_UNFINISHED,
    PAUSE_ACTIVE,
    RESUME_PAUSED,
    RETRY_FAILED,
    BulkMatching,
)
from tasks.admin_forms import SCHEDULE_FIELDS, TaskAdminForm, schedule_help
from tasks.admin_lists import (
    DateRangeFilter,
    EstimatedCountPaginator,
    HealthFilter,
    LastRunFilter,
    OwnerFilter,
    PriorityFilter,
    ScheduleTypeFilter,
    parse_uuid,
)
from tasks.admin_notify import NotifyPicker
from tasks.admin_preview import SchedulePreview
from tasks.admin_run_page import RunPageButtons
from tasks.admin_scope import OwnedAdmin, OwnedInline, is_operator
from tasks.db import db_now
from tasks.exceptions import TasksError
from tasks.models import (
    TERMINAL_STATUSES,
    Attempt,
    Process,
    Run,
    Task,
    TaskSet,
)
from tasks.transitions import creation, lifecycle, run_actions

# The index page links the dashboard (templates/admin/tasks_index.html).
admin.site.index_template = "admin/tasks_index.html"


def _apply(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet, verb: str, fn: Callable
) -> None:
    """Call a service for each selected row; report successes and refusals (409s) separately."""
    done, refused = 0, []
    now = db_now()
    for obj in queryset[:500]:  # a bulk action on "select all" must stay bounded
        try:
            fn(obj, now)
            done += 1
        except TasksError as exc:
            refused.append(f"{obj}: {exc.detail}")
    if done:
        modeladmin.message_user(request, f"{verb}: {done}", messages.SUCCESS)
    for line in refused[:20]:
        modeladmin.message_user(request, line, messages.WARNING)


class RunInline(OwnedInline, admin.TabularInline):
    model = Run
    fields = readonly_fields = (
        "scheduled_at",
        "status",
        "wait_reason",
        "attempt",
        "started_at",
        "finished_at",
        "error",
    )
    ordering = ["-scheduled_at"]
    extra = 0
    max_num = 0
    show_change_link = True

    def runs_of(self, request: HttpRequest, task: Task | None) -> QuerySet[Run]:
        """The task's latest runs as its API `runs` lists them (tasks/history.py): a recurring
        task may have millions, and the planned ones ahead are its next fire times."""
        queryset = super().get_queryset(request)
        if task is None or task.pk is None:
            return queryset.none()
        recent = history.recent_runs(task.pk, now=timezone.now())
        ids = list(recent.values_list("id", flat=True))
        return queryset.filter(id__in=ids)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    # Shown, never edited or deleted from the task's page: runs change through their actions.
    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


TIMES = ["created_at", "updated_at"]


@admin.register(Task)
class TaskAdmin(TaskBackfill, BulkMatching, NotifyPicker, SchedulePreview, OwnedAdmin):
    list_display = ["__str__", "owner", "kind", "schedule_type", "priority", "status"]
    list_display += ["health", "next_run", "last_run", "runs_link"]
    list_filter = ["status", "kind", HealthFilter, LastRunFilter, OwnerFilter, PriorityFilter]
    list_filter += [ScheduleTypeFilter]
    list_select_related = ["owner", "health_state"]
    search_fields = ["name", "dedup_key", "=owner__username"]
    inlines = [RunInline]
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    actions = ["pause", "resume", "run_now", "skip_next", "backfill", "cancel"]
    bulk_actions = (PAUSE_ACTIVE, RESUME_PAUSED)
    form = TaskAdminForm
    raw_id_fields = ["owner"]
    readonly_fields = ["status", "health", "next_fire_times", "next_run", "last_run", *TIMES]
    readonly_fields += ["task_set"]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "owner",
                    "team",
                    "name",
                    "dedup_key",
                    "kind",
                    "payload",
                    "executable_file",
                ]
            },
        ),
        ("Schedule", {"fields": list(SCHEDULE_FIELDS), "description": schedule_help()}),
        ("Next fire times", {"fields": ["next_fire_times"]}),
        ("Running", {"fields": ["priority", "max_attempts", "backoff_base", "backoff_cap"]}),
        (None, {"fields": ["timeout", "resources", "concurrency", "rate_limit", "on_zombie"]}),
        (None, {"fields": ["notify", "expect"]}),
        ("State", {"fields": ["status", "health", "next_run", "last_run", *TIMES]}),
        ("Task set", {"fields": ["task_set"]}),
    ]

    class Media:
        # The schedule type's fields only (task form); rows that refresh themselves (list).
        js = ["tasks/admin_schedule.js", "tasks/admin_live.js", "tasks/admin_preview.js"]
        css = {"all": ["tasks/admin_lists.css"]}

    def get_queryset(self, request: HttpRequest) -> QuerySet[Task]:
        # Two index probes per task shown (a page of the list, or the one task's page).
        return (
            super()
            .get_queryset(request)
            .annotate(
                next_run_at=history.next_run_at(timezone.now()),
                last_run_status=history.last_run("status"),
                last_run_scheduled_at=history.last_run("scheduled_at"),
            )
        )

    def get_formset_kwargs(
        self, request: HttpRequest, obj: Any, inline: Any, prefix: str
    ) -> dict[str, Any]:
        kwargs = super().get_formset_kwargs(request, obj, inline, prefix)
        if isinstance(inline, RunInline):  # this task's own runs, whatever other tasks do
            kwargs["queryset"] = inline.runs_of(request, obj)
        return kwargs

    @admin.display(description="health", ordering="health_state__health")
    def health(self, task: Task) -> str:
        """Against the task's `expect` (up when it expects nothing)."""
        return expectations.health_of(task)

    @admin.display(description="task set")
    def task_set(self, task: Task) -> str:
        if task.taskset_id is None:
            return "-"
        taskset = TaskSet.objects.filter(pk=task.taskset_id).values_list("name", flat=True)
        return (
            f"{taskset.first()} / {task.taskset_key}: a change here is drift, which the set's "
            "next apply reverts (docs/schedules-as-code.md)"
        )

    @admin.display(description="next run at", ordering="next_run_at")
    def next_run(self, task: Task) -> Any:
        """The next fire time (the API's `next_run_at`), not the planner's cursor."""
        return getattr(task, "next_run_at", None)

    @admin.display(description="last run")
    def last_run(self, task: Task) -> str:
        status = getattr(task, "last_run_status", None)
        if status is None:
            return "-"
        at = task.last_run_scheduled_at.astimezone(UTC)  # type: ignore[attr-defined]
        return f"{status} ({at:%Y-%m-%d %H:%M:%S} UTC)"

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        return {"owner": request.user.pk, **super().get_changeform_initial_data(request)}

    @admin.display(description="next 5 fire times")
    def next_fire_times(self, task: Task) -> str:
        if task.pk is None:
            return "Shown once the task is saved."
        times = occurrences.next_runs(task, now=timezone.now(), count=5)
        if not times:
            return "None: the task is not active or has no occurrence left."
        zone = timezone.get_default_timezone()
        if isinstance(task.schedule.get("timezone"), str):
            zone = zoneinfo.ZoneInfo(task.schedule["timezone"])
        rows = [
            (
                at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
                at.astimezone(zone).strftime(f"%Y-%m-%d %H:%M:%S {zone.key}"),
            )
            for at in times
        ]
        items = format_html_join("", "<li>{} ({})</li>", rows)
        return format_html('<ol class="next-fire-times">{}</ol>', items)

    def save_model(
        self, request: HttpRequest, obj: Task, form: TaskAdminForm, change: bool
    ) -> None:
        """Create or change through the services, as POST/PATCH /api/v1/tasks do."""
        now = db_now()
        try:
            if change:
                task = lifecycle.update_task(task=obj, data=form.api_data, now=now)
            else:
                owner = form.cleaned_data.get("owner") or request.user
                if not is_operator(request.user):
                    owner = request.user  # the form has no owner field for them either
                task, created = creation.create_task(owner=owner, data=form.api_data, now=now)
                if not created:
                    self.message_user(
                        request, "A task with this dedup key exists: it is shown.", messages.INFO
                    )
        except TasksError as exc:
            request.task_refused = str(exc.detail)  # type: ignore[attr-defined]
            return
        obj.pk, obj._state.adding = task.pk, False

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        if not getattr(request, "task_refused", None):
            return super().log_addition(request, obj, message)
        return None

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        if not getattr(request, "task_refused", None):
            return super().log_change(request, obj, message)
        return None

    def response_add(self, request: HttpRequest, obj: Task, *args: Any) -> HttpResponse:
        return self._refused(request) or super().response_add(request, obj, *args)

    def response_change(self, request: HttpRequest, obj: Task) -> HttpResponse:
        return self._refused(request) or super().response_change(request, obj)

    def _refused(self, request: HttpRequest) -> HttpResponse | None:
        """A service's refusal (the API's 409) back on the same page, nothing saved."""
        refused = getattr(request, "task_refused", None)
        if refused is None:
            return None
        self.message_user(request, f"Not saved: {refused}", messages.ERROR)
        return HttpResponseRedirect(request.path)

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        # One owner's tasks by task_owner_created_idx; otherwise the uuid7 key, newest first.
        return ("-created_at",) if "owner" in request.GET else ("-id",)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        # A pasted id is looked up by primary key, not matched as text across the table.
        task_id = parse_uuid(search_term)
        if task_id is not None:
            return queryset.filter(pk=task_id), False
        return super().get_search_results(request, queryset, search_term)

    @admin.display(description="runs")
    def runs_link(self, task: Task) -> str:
        url = reverse("admin:tasks_run_changelist") + f"?task__id__exact={task.pk}"
        return format_html('<a href="{}">runs</a>', url)

    @admin.action(description="Pause the selected tasks", permissions=["change"])
    def pause(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        _apply(
            self, request, queryset, "paused", lambda t, now: lifecycle.pause_task(task=t, now=now)
        )

    @admin.action(description="Resume the selected tasks", permissions=["change"])
    def resume(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        _apply(
            self,
            request,
            queryset,
            "resumed",
            lambda t, now: lifecycle.resume_task(task=t, now=now),
        )

    @admin.action(description="Run the selected tasks now (one extra run)", permissions=["change"])
    def run_now(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        _apply(
            self,
            request,
            queryset,
            "runs created",
            lambda t, now: lifecycle.run_now(task=t, now=now),
        )

    @admin.action(
        description="Skip the next occurrence of the selected tasks", permissions=["change"]
    )
    def skip_next(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        _apply(
            self, request, queryset, "skipped", lambda t, now: lifecycle.skip_next(task=t, now=now)
        )

    @admin.action(description="Backfill the selected task (a form)", permissions=["change"])
    def backfill(self, request: HttpRequest, queryset: QuerySet[Task]) -> HttpResponse | None:
        chosen = list(queryset.values_list("pk", flat=True)[:2])
        if len(chosen) != 1:
            self.message_user(request, "Backfill one task at a time.", messages.WARNING)
            return None
        return HttpResponseRedirect(reverse("admin:tasks_task_backfill", args=[chosen[0]]))

    @admin.action(
        description="Cancel the selected tasks (stops running runs too)", permissions=["change"]
    )
    def cancel(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        _apply(
            self,
            request,
            queryset,
            "cancelled",
            lambda t, now: lifecycle.cancel_task(task=t, force=True, now=now),
        )


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
class RunAdmin(BulkMatching, RunPageButtons, OwnedAdmin):
    list_display = ["id", "task", "scheduled_at", "status", "attempt", "priority", "worker"]
    list_display += ["started_at", "finished_at", "wait_reason", "zombie_since"]
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
    paginator = EstimatedCountPaginator
    inlines = [AttemptInline]
    actions = ["retry", "cancel"]
    bulk_actions = (RETRY_FAILED, CANCEL_UNFINISHED)

    class Media:
        js = ["tasks/admin_live.js"]  # the list's rows refresh themselves
        css = {"all": ["tasks/admin_lists.css"]}  # and fit 1,280 px

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        # An ordering the filter's index can serve, read backwards and cut at the page size:
        # finished statuses by run_status_finished_idx (status, finished_at); one task's runs by
        # run_unique_task_scheduled_at (task, scheduled_at); a date range by
        # run_scheduled_at_idx; otherwise the time-ordered uuid7 primary key, newest first.
        if request.GET.get("status__exact") in TERMINAL_STATUSES:
            return ("-finished_at",)
        if {"task__id__exact", "scheduled_at__gte", "scheduled_at__lt"} & request.GET.keys():
            return ("-scheduled_at",)
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
        # A name matches tasks first (the small table), then their runs. The ids are passed as
        # values, not a subquery, so the planner knows how many runs match and picks its plan.
        # The newest hundred such tasks, by a stated order.
        tasks = (
            Task.objects.filter(name__icontains=search_term)
            .order_by("-created_at", "-pk")
            .values_list("pk", flat=True)
        )
        return queryset.filter(task__in=list(tasks[:100])), False

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
        _apply(
            self, request, queryset, "retried", lambda r, now: run_actions.retry_run(run=r, now=now)
        )

    @admin.action(
        description="Cancel the selected runs (running ones are stopped)", permissions=["change"]
    )
    def cancel(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        _apply(
            self,
            request,
            queryset,
            "cancelled",
            lambda r, now: run_actions.cancel_run(run=r, now=now),
        )


@admin.register(Process)
class ProcessAdmin(admin.ModelAdmin):
    list_display = ["name", "role", "host", "pid", "concurrency", "cpu_millis", "memory_bytes"]
    list_display += ["started_at", "last_seen_at"]
    list_display += ["stopped_at", "alive", "sandbox"]
    list_filter = ["role", ("stopped_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "host"]
    ordering = ["-last_seen_at"]
    readonly_fields = [f.name for f in Process._meta.fields]

    @admin.display(boolean=True, description="alive")
    def alive(self, process: Process) -> bool:
        if process.stopped_at is not None:
            return False
        age = (timezone.now() - process.last_seen_at).total_seconds()
        return age <= settings.REVIEWERS_PROCESS_DEAD_AFTER_SECONDS

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
