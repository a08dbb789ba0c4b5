"""The task form's live preview: the next fire times of the schedule as it is typed, before
saving, from the same schedule maths and validation as the API's `POST /schedules/preview`.

The form's JavaScript (static/tasks/admin_preview.js) posts the form's fields to
`preview-schedule/`; the answer is the next five times (UTC and the schedule's zone) or the
schedule's errors, named as the form names its fields.
"""

from __future__ import annotations

import zoneinfo
from datetime import UTC
from types import SimpleNamespace
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.urls import path

from tasks import occurrences
from tasks.admin.forms import TaskAdminForm
from tasks.api.serializers import PreviewSerializer
from tasks.db import db_now

COUNT = 5


class SchedulePreview(admin.ModelAdmin):
    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(self.preview_schedule_view)
        return [
            path("preview-schedule/", view, name="tasks_task_preview_schedule"),
            *super().get_urls(),
        ]

    def preview_schedule_view(self, request: HttpRequest) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        form = self.get_form(request)(data=request.POST)
        assert isinstance(form, TaskAdminForm)
        form.is_valid()  # the schedule's own fields are cleaned whatever else is still missing
        schedule = form.schedule()
        now = db_now()
        # The calendars a schedule excludes must be its owner's, as through the API.
        owner = getattr(form, "cleaned_data", {}).get("owner") or request.user
        serializer = PreviewSerializer(
            data={"schedule": schedule, "count": COUNT},
            context={"now": now, "request": SimpleNamespace(user=owner)},
        )
        if not serializer.is_valid():
            errors = serializer.errors.get("schedule", serializer.errors)
            return JsonResponse({"errors": _lines(errors)}, status=400)
        normalized = serializer.validated_data["schedule"]
        zone = zoneinfo.ZoneInfo(normalized.get("timezone") or "UTC")
        calendars = occurrences.load_calendars([normalized])
        times, _ = occurrences.preview(normalized, now=now, count=COUNT, calendars=calendars)
        return JsonResponse(
            {
                "next_runs": [
                    f"{at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
                    f" ({at.astimezone(zone):%Y-%m-%d %H:%M:%S} {zone.key})"
                    for at in times
                ]
            }
        )


def _lines(errors: Any, prefix: str = "") -> list[str]:
    if isinstance(errors, dict):
        return [line for key, value in errors.items() for line in _lines(value, f"{key}: ")]
    if isinstance(errors, list):
        return [line for item in errors for line in _lines(item, prefix)]
    return [f"{prefix}{errors}"]
