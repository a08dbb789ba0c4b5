"""The task admin: its list (tasks/admin/task_list.py), its page (tasks/admin/task_page.py), its
form (tasks/admin/forms.py) and its actions.

Every action and every task saved goes through tasks.transitions (creation, lifecycle), exactly
like the API; the task form is validated by the API's serializer. The list stays fast with
millions of runs: no full counts (EstimatedCountPaginator, show_full_result_count = False),
static filters, uuid search by primary key, and an ordering each filter's index can serve
(docs/operations.md has the measurement).
"""

from __future__ import annotations

import zoneinfo
from datetime import UTC
from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.text import smart_split, unescape_string_literal

import tasks.admin.display as display
from tasks import expectations, history, occurrences
from tasks.admin.actions import apply_each
from tasks.admin.backfill import TaskBackfill
from tasks.admin.bulk import PAUSE_ACTIVE, RESUME_PAUSED, BulkMatching
from tasks.admin.forms import SCHEDULE_FIELDS, TaskAdminForm, schedule_help
from tasks.admin.lists import (
    CancelledFilter,
    CountedToThePage,
    HealthFilter,
    LastRunFilter,
    OwnerFilter,
    PriorityFilter,
    QuickCheckbox,
    ScheduleTypeFilter,
    parse_uuid,
)
from tasks.admin.notify import NotifyPicker
from tasks.admin.preview import SchedulePreview
from tasks.admin.scope import OwnedAdmin, is_operator
from tasks.admin.task_list import TaskListColumns
from tasks.admin.task_page import TaskSummaryPage
from tasks.db import db_now
from tasks.exceptions import TasksError
from tasks.models import Task, TaskSet
from tasks.transitions import creation, lifecycle

TIMES = ["created_at", "updated_at"]
SEARCH_CAP = 1_000  # tasks a search by words lists at most, the newest


@admin.register(Task)
class TaskAdmin(
    CountedToThePage,
    QuickCheckbox,
    TaskSummaryPage,
    TaskListColumns,
    TaskBackfill,
    BulkMatching,
    NotifyPicker,
    SchedulePreview,
    OwnedAdmin,
):
    list_display = ["__str__", "owner", "kind", "status_badge", "health_badge", "schedule_words"]
    list_display += ["next_run", "last_run", "recent_runs"]
    list_filter = ["status", CancelledFilter, "kind", HealthFilter, LastRunFilter, OwnerFilter]
    list_filter += [PriorityFilter, ScheduleTypeFilter]
    list_select_related = ["owner", "health_state"]
    search_fields = ["name", "dedup_key", "=owner__username"]  # as get_search_results does
    list_per_page = 50  # each row draws a strip of runs: half of Django's 100 halves the page
    show_full_result_count = False
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
        css = {"all": ["tasks/admin_lists.css", "tasks/admin_console.css"]}

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
    def next_run(self, task: Task) -> str:
        """The next fire time (the API's `next_run_at`), not the planner's cursor."""
        return display.local(getattr(task, "next_run_at", None))

    @admin.display(description="last run")
    def last_run(self, task: Task) -> str:
        status = getattr(task, "last_run_status", None)
        if status is None:
            return "-"
        at = task.last_run_scheduled_at  # type: ignore[attr-defined]
        return format_html("{} {}", display.badge(status), display.local(at))

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
        # One owner's tasks by task_owner_created_id_idx; otherwise the uuid7 key, newest first.
        return ("-created_at",) if "owner" in request.GET else ("-id",)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        # A pasted id is looked up by primary key, not matched as text across the table.
        task_id = parse_uuid(search_term)
        if task_id is not None:
            return queryset.filter(pk=task_id), False
        words = [
            unescape_string_literal(w) if w[:1] in "\"'" else w for w in smart_split(search_term)
        ]
        if not words:
            return queryset, False
        # Each word in the name or the dedup key, or the owner's exact username. The tasks
        # that match are read once, the newest SEARCH_CAP of them; the page and its count then
        # read those by primary key. A substring is a range of the trigram indexes where
        # pg_trgm is installed (migration 0044), a pass over the table where it is not. The
        # owners are looked up first and passed as values: a subquery under the OR would be a
        # filter on every row, so that no index could serve the OR.
        users = get_user_model().objects
        found = Q()
        for word in words:
            owners = list(users.filter(username__iexact=word).values_list("pk", flat=True))
            either = Q(name__icontains=word) | Q(dedup_key__icontains=word)
            if owners:
                either |= Q(owner_id__in=owners)
            found &= either
        # By creation (uuid7 ids: the same order): a sort of the matches, where "-pk" read the
        # whole primary key backwards, row by row.
        matched = queryset.filter(found).order_by("-created_at", "-pk").values_list("pk", flat=True)
        return queryset.filter(pk__in=list(matched[:SEARCH_CAP])), False

    @admin.action(description="Pause the selected tasks", permissions=["change"])
    def pause(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        apply_each(
            self, request, queryset, "paused", lambda t, now: lifecycle.pause_task(task=t, now=now)
        )

    @admin.action(description="Resume the selected tasks", permissions=["change"])
    def resume(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        apply_each(
            self,
            request,
            queryset,
            "resumed",
            lambda t, now: lifecycle.resume_task(task=t, now=now),
        )

    @admin.action(description="Run the selected tasks now (one extra run)", permissions=["change"])
    def run_now(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        apply_each(
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
        apply_each(
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
        apply_each(
            self,
            request,
            queryset,
            "cancelled",
            lambda t, now: lifecycle.cancel_task(task=t, force=True, now=now),
        )
