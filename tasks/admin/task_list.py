"""The task list's columns that scan: status and health badges, the schedule in words, times in
the viewer's zone and each task's recent runs as a strip of squares, read for the whole page in
one query (tasks/admin/strips.py) when the page is listed, not once per row."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils import timezone
from django.utils.safestring import SafeString

import tasks.admin.display as display
from tasks import expectations, schedule_describe
from tasks.admin.strips import LIST_STRIP, recent_runs
from tasks.models import Task


class TaskListColumns(admin.ModelAdmin):
    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        page = list(changelist.result_list)  # the page's query, cached for the template too
        strips = recent_runs([t.pk for t in page], now=timezone.now(), count=LIST_STRIP)
        for task in page:
            task.recent_strip = strips.get(task.pk, [])
        return changelist

    @admin.display(description="status", ordering="status")
    def status_badge(self, task: Task) -> SafeString:
        return display.badge(task.status)

    @admin.display(description="health", ordering="health_state__health")
    def health_badge(self, task: Task) -> SafeString:
        """Against the task's `expect` (up when it expects nothing)."""
        return display.badge(expectations.health_of(task))

    @admin.display(description="schedule")
    def schedule_words(self, task: Task) -> str:
        return schedule_describe.describe(task.schedule) or task.schedule_type

    @admin.display(description="recent runs")
    def recent_runs(self, task: Task) -> SafeString:
        return display.strip(getattr(task, "recent_strip", []))
