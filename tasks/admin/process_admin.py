"""The process admin: every role process, its heartbeats and whether it is alive."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest
from django.utils import timezone

from tasks.models import Process


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
