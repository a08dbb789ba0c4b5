"""The admin's calendars: holidays, dates and freeze windows, validated by the API's serializer
and saved by the API's services, so a change re-plans the tasks using the calendar and a
calendar in use is not deleted (the API's 409), whichever door it came through."""

from __future__ import annotations

import zoneinfo
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from tasks.admin.forms import ZoneSelect
from tasks.admin.scope import OwnedAdmin, is_operator
from tasks.api.serializers import CalendarSerializer
from tasks.db import db_now
from tasks.exceptions import Conflict
from tasks.models import Calendar
from tasks.transitions import calendars

TIMEZONES = sorted(zoneinfo.available_timezones())
# The serializer's error keys (their first part) -> the form field that shows them.
ERROR_FIELDS = {"holidays": "holidays_country", "dates": "dates", "windows": "windows"}


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


class CalendarAdminForm(forms.ModelForm):
    timezone = forms.ChoiceField(
        choices=[(z, z) for z in TIMEZONES], initial="UTC", widget=ZoneSelect
    )
    holidays_country = forms.CharField(
        required=False, label="holidays: country", help_text="ISO 3166 code, e.g. DE. Empty: none."
    )
    holidays_subdivision = forms.CharField(
        required=False, label="holidays: subdivision", help_text="e.g. BY for Bavaria."
    )
    dates = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="YYYY-MM-DD, one a line.",
    )
    windows = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Freeze windows, one a line: start / end (YYYY-MM-DD HH:MM, in the calendar's "
        "time zone unless an offset is given).",
    )

    class Meta:
        model = Calendar
        fields = ["owner", "name", "timezone"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        calendar = self.instance
        if not calendar._state.adding:
            self.initial["holidays_country"] = calendar.holidays.get("country", "")
            self.initial["holidays_subdivision"] = calendar.holidays.get("subdivision") or ""
            self.initial["dates"] = "\n".join(calendar.dates)
            self.initial["windows"] = "\n".join(
                f"{w['start']} / {w['end']}" for w in calendar.windows
            )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        country = (cleaned.get("holidays_country") or "").strip()
        holidays = None
        if country:
            holidays = {"country": country}
            if (cleaned.get("holidays_subdivision") or "").strip():
                holidays["subdivision"] = cleaned["holidays_subdivision"].strip()
        windows = []
        for line in _lines(cleaned.get("windows") or ""):
            start, sep, end = line.partition(" / ")
            if not sep:
                self.add_error("windows", f"{line!r}: write start / end.")
                return cleaned
            windows.append({"start": start.strip(), "end": end.strip()})
        body = {
            "name": cleaned.get("name", ""),
            "timezone": cleaned.get("timezone", "UTC"),
            "holidays": holidays,
            "dates": _lines(cleaned.get("dates") or ""),
            "windows": windows,
        }
        serializer = CalendarSerializer(data=body)
        if not serializer.is_valid():
            for key, problems in serializer.errors.items():
                field = ERROR_FIELDS.get(key.split("[")[0].split(".")[0], key)
                if field not in self.fields:
                    field = None
                self.add_error(field, f"{key}: {_flat(problems)}")
            return cleaned
        self.validated = serializer.validated_data
        return cleaned


def _flat(problems: Any) -> str:
    if isinstance(problems, dict):
        return "; ".join(f"{k}: {_flat(v)}" for k, v in problems.items())
    if isinstance(problems, list):
        return " ".join(_flat(p) for p in problems)
    return str(problems)


@admin.register(Calendar)
class CalendarAdmin(OwnedAdmin):
    form = CalendarAdminForm
    list_display = ["name", "owner", "timezone", "holidays_shown", "dates_count", "windows_count"]
    list_display += ["updated_at"]
    search_fields = ["name"]
    ordering = ["name", "id"]
    raw_id_fields = ["owner"]
    readonly_fields = ["used_by", "created_at", "updated_at"]
    fields = ["owner", "name", "timezone", "holidays_country", "holidays_subdivision", "dates"]
    fields += ["windows", "used_by", "created_at", "updated_at"]

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        # A bulk delete would bypass the check that no task uses the calendar.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    @admin.display(description="holidays")
    def holidays_shown(self, calendar: Calendar) -> str:
        country = calendar.holidays.get("country")
        if not country:
            return "-"
        subdivision = calendar.holidays.get("subdivision")
        return f"{country}-{subdivision}" if subdivision else country

    @admin.display(description="dates")
    def dates_count(self, calendar: Calendar) -> int:
        return len(calendar.dates)

    @admin.display(description="freeze windows")
    def windows_count(self, calendar: Calendar) -> int:
        return len(calendar.windows)

    @admin.display(description="used by")
    def used_by(self, calendar: Calendar) -> str:
        if calendar._state.adding:
            return "-"
        using = calendars.tasks_using(calendar).order_by("name", "pk")[:50]
        if not using:
            return "no task"
        return format_html_join(
            ", ",
            '<a href="{}">{}</a>',
            ((reverse("admin:tasks_task_change", args=[t.pk]), t.name or t.pk) for t in using),
        )

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        data = form.validated
        if change:
            saved = calendars.update_calendar(calendar=obj, data=data, now=db_now())
        else:
            # Only operators pick an owner (admin/scope.py): a user's calendar is their own.
            owner = obj.owner if is_operator(request.user) else request.user
            saved = calendars.create_calendar(owner=owner, data=data)
        obj.pk = saved.pk

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: Any = None
    ) -> HttpResponse:
        try:
            return super().delete_view(request, object_id, extra_context)
        except Conflict as refused:
            self.message_user(request, format_html("Not deleted: {}", refused), messages.ERROR)
            return HttpResponseRedirect(reverse("admin:tasks_calendar_change", args=[object_id]))

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        calendars.delete_calendar(calendar=obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Calendar]:
        return super().get_queryset(request).select_related("owner")
