from __future__ import annotations

from django.contrib import admin

from tasks.models import Attempt, Process, Run, Task


class RunInline(admin.TabularInline):
    model = Run
    fields = ["scheduled_at", "status", "attempt", "started_at", "finished_at", "error"]
    readonly_fields = fields
    ordering = ["-scheduled_at"]
    extra = 0
    max_num = 0
    show_change_link = True

    def get_queryset(self, request):
        # Only the most recent runs: a recurring task may have millions.
        queryset = super().get_queryset(request)
        ids = list(queryset.order_by("-scheduled_at").values_list("id", flat=True)[:20])
        return queryset.filter(id__in=ids)

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = [
        "__str__",
        "owner",
        "kind",
        "schedule_type",
        "priority",
        "status",
        "next_run_at",
    ]
    list_filter = ["status", "kind", "schedule_type", "priority"]
    search_fields = ["id", "name", "dedup_key", "owner__username"]
    raw_id_fields = ["owner"]
    readonly_fields = ["id", "next_run_at", "runs_planned", "created_at", "updated_at"]
    inlines = [RunInline]


class AttemptInline(admin.TabularInline):
    model = Attempt
    fields = ["number", "worker", "started_at", "finished_at", "outcome", "error"]
    readonly_fields = fields
    extra = 0
    max_num = 0


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "task", "scheduled_at", "status", "attempt", "priority", "worker"]
    list_filter = ["status", "priority"]
    search_fields = ["id", "task__id", "task__name"]
    raw_id_fields = ["task", "owner"]
    readonly_fields = [f.name for f in Run._meta.fields]
    date_hierarchy = "scheduled_at"
    show_full_result_count = False
    inlines = [AttemptInline]


@admin.register(Process)
class ProcessAdmin(admin.ModelAdmin):
    list_display = ["name", "role", "host", "pid", "started_at", "last_seen_at", "stopped_at"]
    list_filter = ["role"]
