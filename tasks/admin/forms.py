"""The admin's task form: the API's body built from form fields, validated by the API's own
serializer (one set of rules), saved by the same services the API calls.

The schedule is a form per type (the fields each type reads, with its time zone); the page
shows which fields belong to which type, and the serializer names whatever is wrong.
"""

from __future__ import annotations

import zoneinfo
from types import SimpleNamespace
from typing import Any

from django import forms
from django.contrib.admin.widgets import AdminTextareaWidget
from django.forms.utils import flatatt
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from rest_framework.exceptions import PermissionDenied

from tasks.api.serializers import TaskInputSerializer
from tasks.db import db_now
from tasks.models import Task
from tasks.schedules import MISFIRE_POLICIES, OVERLAP_POLICIES, TYPES, WEEKDAYS

# Form field -> the schedule key it fills, per schedule type (docs/api.md, "schedule"): every
# member a type takes (schedules.members) but `anchor`, which the form keeps unchanged, and a
# one-time `delay`, which is stored as its `run_at`. A test holds the two lists equal.
TYPE_FIELDS = {
    "once": ("run_at", "timezone"),
    "interval": ("every", "allow_every_second"),
    "daily": ("at", "business_days_only"),
    "weekly": ("days", "at", "business_days_only"),
    "monthly": ("day", "weekday", "week", "business_day", "at"),
    "cron": ("expression", "allow_every_second"),
    "rrule": ("rule", "exdates", "allow_every_second"),
}
RECURRING_FIELDS: tuple[str, ...] = ("timezone", "start_at", "end_at", "max_runs", "jitter")
RECURRING_FIELDS += ("misfire", "misfire_grace", "overlap", "exclude", "exclude_windows")
SCHEDULE_FIELDS = (
    "schedule_type",
    *dict.fromkeys(
        [*(field for fields in TYPE_FIELDS.values() for field in fields), *RECURRING_FIELDS]
    ),
)
# The task's fields shown as JSON text; null (or empty) clears them.
JSON_TASK_FIELDS = ("concurrency", "rate_limit", "expect")
TIMEZONES = sorted(zoneinfo.available_timezones())


class ZoneSelect(forms.Select):
    """A select of the 600 time zones, written out in one pass: Django renders each option
    through a template of its own, which cost a task's page (and a calendar's) over half of its
    time. Same markup: the attributes the form gives, the chosen zone selected."""

    def render(
        self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None
    ) -> SafeString:
        chosen = {str(v) for v in self.format_value(value)}
        options = format_html_join(
            "",
            '<option value="{}"{}>{}</option>',
            (
                (key, mark_safe(" selected") if str(key) in chosen else "", label)
                for key, label in self.choices
            ),
        )
        final = self.build_attrs(self.attrs, {**(attrs or {}), "name": name})
        return format_html("<select{}>{}</select>", flatatt(final), options)


DATETIME_HELP = "YYYY-MM-DD HH:MM[:SS], in the schedule's time zone (or with an offset)."


def _json_widget() -> AdminTextareaWidget:
    return AdminTextareaWidget(attrs={"rows": 4, "style": "font-family: monospace"})


class TaskAdminForm(forms.ModelForm):
    payload = forms.JSONField(
        required=False,
        widget=_json_widget(),
        help_text='JSON, by kind: handler {"name", "args"?}; http {"method", "url", ...}; '
        'executable {"args"?, "env"?}.',
    )
    executable_file = forms.FileField(
        required=False, label="executable", help_text="The file an executable task runs."
    )
    schedule_type = forms.ChoiceField(choices=[(t, t) for t in TYPES], initial="once")
    run_at = forms.CharField(
        required=False, label="run at", help_text="once: " + DATETIME_HELP + " Empty: now."
    )
    every = forms.IntegerField(required=False, min_value=1, help_text="interval: seconds.")
    at = forms.CharField(required=False, help_text="daily, weekly, monthly: HH:MM[:SS].")
    days = forms.MultipleChoiceField(
        required=False,
        choices=[(d, d) for d in WEEKDAYS],
        widget=forms.CheckboxSelectMultiple,
        help_text="weekly.",
    )
    business_days_only = forms.BooleanField(
        required=False,
        label="business days only",
        help_text="daily, weekly: Monday to Friday, less the holidays of the exclude calendars.",
    )
    day = forms.IntegerField(required=False, help_text="monthly: 1..31, or -1 for the last day.")
    weekday = forms.ChoiceField(
        required=False,
        choices=[("", "---------"), *((d, d) for d in WEEKDAYS)],
        help_text="monthly, instead of day: this weekday of the week below.",
    )
    week = forms.IntegerField(
        required=False, help_text="monthly, with weekday: 1..5, or -1..-5 from the end (-1 last)."
    )
    business_day = forms.IntegerField(
        required=False,
        label="business day",
        help_text="monthly, instead of day: the n-th business day (1..23), -1 the last.",
    )
    expression = forms.CharField(
        required=False, help_text="cron: 5 fields, or 6 with seconds first."
    )
    allow_every_second = forms.BooleanField(
        required=False,
        label="allow every second",
        help_text="Opt in to firing every second: a 6-field * * * * * * cron, an interval of 1, an "
        "rrule at FREQ=SECONDLY.",
    )
    rule = forms.CharField(
        required=False, help_text="rrule: RFC 5545, e.g. FREQ=MONTHLY;BYDAY=FR;BYSETPOS=-1."
    )
    exdates = forms.JSONField(
        required=False,
        widget=_json_widget(),
        help_text='rrule: JSON, dates or date-times left out: ["2026-12-24", ...].',
    )
    timezone = forms.ChoiceField(
        choices=[(z, z) for z in TIMEZONES], initial="UTC", widget=ZoneSelect
    )
    start_at = forms.CharField(required=False, help_text=DATETIME_HELP)
    end_at = forms.CharField(required=False, help_text=DATETIME_HELP)
    max_runs = forms.IntegerField(required=False, min_value=1)
    jitter = forms.FloatField(required=False, min_value=0, help_text="seconds")
    misfire = forms.ChoiceField(choices=[(p, p) for p in MISFIRE_POLICIES], initial="run_once")
    misfire_grace = forms.FloatField(
        required=False,
        min_value=1,
        label="misfire grace",
        help_text="seconds late before an occurrence counts as missed; empty: the default.",
    )
    overlap = forms.ChoiceField(choices=[(p, p) for p in OVERLAP_POLICIES], initial="allow")
    exclude = forms.JSONField(
        required=False,
        widget=_json_widget(),
        help_text='JSON: the ids of calendars whose days and windows are off: ["CALENDAR_ID"].',
    )
    exclude_windows = forms.JSONField(
        required=False,
        widget=_json_widget(),
        label="exclude windows",
        help_text='JSON, freeze windows: [{"start": "2026-12-20T00:00:00Z", "end": "..."}].',
    )
    backoff_base = forms.FloatField(required=False, label="retry backoff base", initial=2.0)
    backoff_cap = forms.FloatField(required=False, label="retry backoff cap", initial=600.0)
    resources = forms.JSONField(
        required=False,
        widget=_json_widget(),
        help_text='JSON, Kubernetes quantities: {"cpu": "500m", "memory": "256Mi"}.',
    )
    on_zombie = forms.ChoiceField(
        choices=Task.OnZombie.choices,
        initial=Task.OnZombie.NOTIFY,
        required=False,
        help_text="when a running executable uses no CPU and writes nothing: notify, or "
        "cancel the run too",
    )
    notify = forms.JSONField(
        required=False,
        widget=_json_widget(),
        help_text='JSON: [{"channel": "CHANNEL_ID", "events": ["failed", ...]}]',
    )
    concurrency = forms.JSONField(
        required=False,
        widget=_json_widget(),
        help_text='JSON: {"key": "db", "limit": 2, "scope": "owner"}; null for none.',
    )
    rate_limit = forms.JSONField(
        required=False,
        widget=_json_widget(),
        label="rate limit",
        help_text='JSON: {"key": "crm", "limit": 10, "per": 60, "scope": "owner"}; null for none.',
    )
    expect = forms.JSONField(
        required=False,
        widget=_json_widget(),
        help_text='JSON: {"start_within"?, "duration"?: {"min"?, "max"?}, "failure_streak"?, '
        '"success_within"?, "repeat_every"?}; null for none.',
    )

    team = forms.SlugField(
        required=False, help_text="The team's slug (its editors may); empty: the owner's alone."
    )

    class Meta:
        model = Task
        fields = ["owner", "name", "dedup_key", "kind", "priority", "max_attempts", "timeout"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.api_data: dict[str, Any] = {}
        self.team_slug: str | None = None
        task: Task = self.instance
        if task._state.adding:  # a Task's pk is set before it is saved (uuid7)
            self.fields["payload"].initial = {"name": "echo", "args": {}}
            return
        self.initial.update(payload=task.payload, notify=task.notify, resources=task.resources)
        self.initial["on_zombie"] = task.on_zombie
        self.initial["team"] = task.team.slug if task.team is not None else None
        for field in JSON_TASK_FIELDS:
            self.initial[field] = getattr(task, field) or None  # shown as null when empty
        self.initial.update(backoff_base=task.retry_backoff_base)
        self.initial["backoff_cap"] = task.retry_backoff_cap
        schedule = task.schedule or {}
        self.initial["schedule_type"] = schedule.get("type", "once")
        for field in SCHEDULE_FIELDS[1:]:
            value = schedule.get(field)
            if value is not None:
                self.initial[field] = value

    def body(self) -> dict[str, Any]:
        """The API body the form says, with `schedule` only when it was given or changed (an
        unchanged schedule is not sent, so saving a name keeps the planned runs)."""
        data = self.cleaned_data
        body: dict[str, Any] = {"name": data.get("name") or "", "kind": data.get("kind")}
        for field in ("dedup_key", "priority", "max_attempts", "timeout"):
            if data.get(field) is not None:
                body[field] = data[field]
        if data.get("on_zombie"):
            body["on_zombie"] = data["on_zombie"]
        body["payload"] = data.get("payload") if data.get("payload") is not None else {}
        body["notify"] = data.get("notify") or []
        for field in JSON_TASK_FIELDS:
            body[field] = data.get(field)  # null clears it
        if data.get("resources") is not None:
            body["resources"] = data["resources"]
        if data.get("backoff_base") is not None and data.get("backoff_cap") is not None:
            body["retry_backoff"] = {"base": data["backoff_base"], "cap": data["backoff_cap"]}
        if self.instance._state.adding or set(SCHEDULE_FIELDS) & set(self.changed_data):
            body["schedule"] = self.schedule()
        if data.get("executable_file") is not None:
            body["file"] = data["executable_file"]
        if "team" in self.changed_data:
            body["team"] = self.team_slug
        return body

    def schedule(self) -> dict[str, Any]:
        data = self.cleaned_data
        kind = data.get("schedule_type") or "once"
        fields = TYPE_FIELDS[kind] + (() if kind == "once" else RECURRING_FIELDS)
        # A member the form does not show (`anchor`: the phase) is kept as it is.
        stored = None if self.instance._state.adding else self.instance.schedule
        kept = stored if stored and stored.get("type") == kind else {}
        schedule: dict[str, Any] = {
            key: value for key, value in kept.items() if key not in SCHEDULE_FIELDS
        }
        schedule["type"] = kind
        for field in fields:
            value = data.get(field)
            if value not in (None, "", []):
                schedule[field] = value
        return schedule

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        # The model's field takes a team, set below once the API's check placed it.
        self.team_slug = cleaned.pop("team", None) or None
        if self.errors:
            return cleaned
        owner = cleaned.get("owner") or getattr(self.instance, "owner", None)
        context = {
            "now": db_now(),
            "multipart": cleaned.get("executable_file") is not None,
            # The owner's channels are the ones `notify` may name, as through the API.
            "request": SimpleNamespace(user=owner),
        }
        instance = None if self.instance._state.adding else self.instance
        serializer = TaskInputSerializer(instance, data=self.body(), context=context)
        try:
            valid = serializer.is_valid()
        except PermissionDenied as exc:  # a team's role too low (accounts/access.py)
            self.add_error("team", str(exc.detail))
            return cleaned
        if valid:
            self.api_data = dict(serializer.validated_data)
            # The model's field takes the team itself, not the slug the form shows.
            cleaned["team"] = self.api_data.get("team", getattr(self.instance, "team", None))
        else:
            self._add_api_errors(serializer.errors)
        return cleaned

    def _add_api_errors(self, errors: dict[str, Any]) -> None:
        """The serializer's errors on the form fields that carry them."""
        for field, messages in errors.items():
            if field == "schedule" and isinstance(messages, dict):
                for key, inner in messages.items():
                    if key.split("[")[0] in SCHEDULE_FIELDS:  # exclude[0]: on exclude's field
                        self._add(key.split("[")[0], inner, label=key if "[" in key else "")
                    elif key.startswith("rule."):  # a part of an rrule: on the rule's field
                        self._add("rule", inner, label=key.removeprefix("rule."))
                    elif key in ("type", "non_field_errors"):
                        self._add("schedule_type", inner)
                    else:
                        self._add("schedule_type", inner, label=key)
            elif field == "retry_backoff" and isinstance(messages, dict):
                for key, inner in messages.items():
                    self._add(f"backoff_{key}" if key in ("base", "cap") else None, inner, key)
            elif field == "file":
                self._add("executable_file", messages)
            elif field in self.fields:
                self._add(field, messages)
            else:
                self._add(None, messages, label=field)

    def _add(self, field: str | None, messages: Any, label: str = "") -> None:
        for message in _flatten(messages):
            self.add_error(field, f"{label}: {message}" if label else message)


def _flatten(messages: Any, prefix: str = "") -> list[str]:
    if isinstance(messages, dict):
        return [m for key, inner in messages.items() for m in _flatten(inner, f"{prefix}{key}: ")]
    if isinstance(messages, list):
        return [m for inner in messages for m in _flatten(inner, prefix)]
    return [prefix + str(messages)]


def schedule_help() -> str:
    """Which fields each schedule type reads (shown above the schedule fieldset)."""
    lines = [f"{kind}: {', '.join(fields)}" for kind, fields in TYPE_FIELDS.items()]
    return "; ".join(lines) + f". Recurring types also read {', '.join(RECURRING_FIELDS)}."
