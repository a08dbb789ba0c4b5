"""Input validation of the task API (docs/api.md) and the shape of a task as returned."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounts import access
from tasks import events, exclusions, outbox, schedules, task_fields
from tasks.api.payloads import validate_payload
from tasks.api.resource_fields import ResourcesField
from tasks.api.run_serializers import LastRunSerializer, NextRunSerializer, RunSummarySerializer
from tasks.api.strict import ChoiceField, StrictSerializer
from tasks.models import Calendar, Task, TaskHealth
from tasks.schedule_fields import FieldReader
from tasks.transitions import limits

PRIORITY_NAMES = {"low": 1, "medium": 5, "high": 9}
MAX_TIMEOUT_SECONDS = 7 * 24 * 3600
MAX_JSON_DEPTH = 64


PRIORITY_SCHEMA = {
    "oneOf": [
        {"type": "integer", "minimum": 0, "maximum": 9},
        {"type": "string", "enum": list(PRIORITY_NAMES)},
    ]
}


@extend_schema_field(PRIORITY_SCHEMA)
class PriorityField(serializers.Field):
    """0-9 (9 runs first) or low/medium/high."""

    default_error_messages = {
        "invalid": "Priority must be an integer 0-9 or one of low, medium, high.",
    }

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, str):
            if data.lower() in PRIORITY_NAMES:
                return PRIORITY_NAMES[data.lower()]
            if data.strip().isdigit():
                data = int(data.strip())
        if isinstance(data, bool) or not isinstance(data, int) or not 0 <= data <= 9:
            self.fail("invalid")
        return data

    def to_representation(self, value: int) -> int:
        return value


def check_storable_json(value: Any) -> bool:
    """Refuse JSON that PostgreSQL's jsonb cannot store (NUL characters, lone surrogates) or that
    is nested so deeply that encoding it would exhaust Python's stack; both used to be a 500.

    Returns whether `value` is made of JSON's own types alone (dicts with text keys, lists, text,
    integers of 64 bits at most, finite floats, booleans, null), which the standard library's
    encoder writes without fail: what a parsed request body is."""
    plain = True
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise serializers.ValidationError(f"Nested too deeply (at most {MAX_JSON_DEPTH}).")
        if isinstance(item, dict):
            plain = plain and type(item) is dict
            for key, child in item.items():
                _check_text(key)
                plain = plain and type(key) is str
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            plain = plain and type(item) is list
            stack.extend((child, depth + 1) for child in item)
        else:
            _check_text(item)
            plain = plain and _plain_scalar(item)
    return plain


def _plain_scalar(value: Any) -> bool:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:  # the encoder refuses more than 4,300 digits
        return -(2**63) <= value < 2**64
    return kind is float and math.isfinite(value)


def _check_text(value: Any) -> None:
    if not isinstance(value, str):
        return
    if "\x00" in value:
        raise serializers.ValidationError("Null characters are not allowed.")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise serializers.ValidationError("Surrogate characters are not allowed.") from None


class JSONFormField(serializers.JSONField):
    """JSON that may also arrive as a string (multipart form fields carry JSON as text)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and self.context.get("multipart"):
            try:
                data = json.loads(data)
            except (ValueError, RecursionError):
                raise serializers.ValidationError("Must be valid JSON.") from None
        if check_storable_json(data) and not self.binary:
            # What DRF's JSONField returns once `json.dumps` has not failed: for plain JSON it
            # cannot, and the encoding was a sixth of validating a task body.
            return data
        return super().to_internal_value(data)


class PayloadField(JSONFormField):
    """A task's `payload`; scheduler_project/schema.py describes it per kind."""


class ScheduleField(JSONFormField):
    """A schedule; scheduler_project/schema.py describes it per type."""


class RetryBackoffSerializer(StrictSerializer):
    base = serializers.FloatField(min_value=0.0, max_value=86400.0)
    cap = serializers.FloatField(min_value=0.0, max_value=7 * 86400.0)

    def validate(self, attrs: dict) -> dict:
        # A PATCH validates nested fields partially; the policy is still given whole.
        missing = {key: ["This field is required."] for key in ("base", "cap") if key not in attrs}
        if missing:
            raise serializers.ValidationError(missing)
        if attrs["cap"] < attrs["base"]:
            raise serializers.ValidationError({"cap": ["Must be at least base."]})
        return attrs


MAX_EXPECT_SECONDS = 366 * 86400


def _finite(value: float) -> None:
    if not math.isfinite(value):
        raise serializers.ValidationError("Must be a finite number of seconds.")


def _seconds(**kwargs: Any) -> serializers.FloatField:
    return serializers.FloatField(
        min_value=0.001,
        max_value=MAX_EXPECT_SECONDS,
        required=False,
        allow_null=True,
        validators=[_finite],
        **kwargs,
    )


class DurationSerializer(StrictSerializer):
    min = _seconds(help_text="A run that succeeds sooner raises `too_fast`.")
    max = _seconds(help_text="A run still running this long raises `too_slow` while it runs.")

    def validate(self, attrs: dict) -> dict:
        low, high = attrs.get("min"), attrs.get("max")
        if low is not None and high is not None and high < low:
            raise serializers.ValidationError({"max": ["Must be at least min."]})
        return attrs


class ExpectSerializer(StrictSerializer):
    """What the task's runs are expected to do; each member optional (docs/api.md)."""

    start_within = _seconds(
        help_text="A run not started this long after its scheduled_at raises `late`."
    )
    duration = DurationSerializer(required=False, allow_null=True)
    failure_streak = serializers.IntegerField(
        min_value=1,
        max_value=1000,
        required=False,
        allow_null=True,
        help_text="This many consecutive final failures raise `failing`.",
    )
    success_within = _seconds(help_text="No run succeeding for this long raises `overdue`.")
    repeat_every = _seconds(
        help_text="While late, failing or overdue, a reminder this often (none by default)."
    )

    def validate(self, attrs: dict) -> dict:
        # A PATCH validates nested fields partially; `expect` is still given whole.
        for name, value in list(attrs.items()):
            if value is None:
                del attrs[name]
        duration = attrs.get("duration")
        if duration is not None:
            duration = {k: v for k, v in duration.items() if v is not None}
            if duration:
                attrs["duration"] = duration
            else:
                del attrs["duration"]
        return attrs


class NotifySerializer(StrictSerializer):
    channel = serializers.CharField(max_length=64)
    events = serializers.ListField(
        child=ChoiceField(choices=events.EVENTS),
        allow_empty=False,
        max_length=len(events.EVENTS),
    )


KEY_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$"
MAX_KEY_LIMIT = 10_000
MAX_RATE_PER_SECONDS = 7 * 24 * 3600


def key_fields(kind: limits.Kind, *, required: bool = True) -> dict[str, serializers.Field]:
    """A key's fields as a task and the key routes take them, in the schema's order: its name, its
    kind's limits (`per`: a rate key's window) and its scope."""
    fields: dict[str, serializers.Field] = {"key": serializers.RegexField(KEY_NAME, max_length=200)}
    for name in kind.limits:
        fields[name] = serializers.IntegerField(
            min_value=1,
            max_value=MAX_RATE_PER_SECONDS if name == "per" else MAX_KEY_LIMIT,
            required=required,
            help_text="The window, in seconds." if name == "per" else None,
        )
    fields["scope"] = ChoiceField(choices=["owner", "global"], required=False)
    return fields


class TaskKeySerializer(StrictSerializer):
    """A task's key of one kind (`kind`): its subclasses say which."""

    kind: limits.Kind

    def get_fields(self) -> dict[str, serializers.Field]:
        return key_fields(self.kind, required=False)

    def validate(self, attrs: dict) -> dict:
        # A PATCH validates nested fields partially; the key is still given whole. An owner's key
        # needs every limit of its kind; a global one, that an operator declared it.
        required = ["This field is required."]
        if "key" not in attrs:
            raise serializers.ValidationError({"key": required})
        if attrs.setdefault("scope", "owner") == "global":
            if limits.global_key(self.kind, attrs["key"]) is None:
                message = f"No global {self.kind.noun} {attrs['key']!r} is declared."
                raise serializers.ValidationError({"key": [message]})
        elif missing := {name: required for name in self.kind.limits if name not in attrs}:
            raise serializers.ValidationError(missing)
        return attrs


class ConcurrencySerializer(TaskKeySerializer):
    """{"key": "db", "limit": 2, "scope": "owner"}: at most `limit` runs of the tasks naming
    the key run at once. Scope "global" names a key an operator declared (its limit applies)."""

    kind = limits.CONCURRENCY


class RateLimitSerializer(TaskKeySerializer):
    """{"key": "crm-api", "limit": 10, "per": 60, "scope": "owner"}: at most `limit` runs of
    the tasks naming the key start in any `per` seconds. Scope "global" names a key an operator
    declared (its limit and window apply)."""

    kind = limits.RATE


class TaskInputSerializer(StrictSerializer):
    """What a client sends to create or change a task; `partial=True` for PATCH."""

    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    dedup_key = serializers.CharField(max_length=200, required=False, allow_null=True)
    kind = ChoiceField(choices=Task.Kind.choices)
    payload = PayloadField(required=False)
    schedule = ScheduleField(required=False, allow_null=True)
    priority = PriorityField(required=False)
    max_attempts = serializers.IntegerField(min_value=1, max_value=100, required=False)
    retry_backoff = RetryBackoffSerializer(required=False)
    timeout = serializers.FloatField(
        min_value=0.001, max_value=MAX_TIMEOUT_SECONDS, required=False, allow_null=True
    )
    # many=True hands max_length on to the ListSerializer; the stubs only know Serializer's.
    notify = NotifySerializer(many=True, required=False, max_length=20)  # type: ignore[call-arg]
    resources = ResourcesField()
    concurrency = ConcurrencySerializer(required=False, allow_null=True)
    rate_limit = RateLimitSerializer(required=False, allow_null=True)
    on_zombie = ChoiceField(choices=Task.OnZombie.choices, required=False)
    expect = ExpectSerializer(required=False, allow_null=True)
    team = serializers.SlugField(max_length=100, required=False, allow_null=True)
    file = serializers.FileField(required=False, write_only=True)

    def to_internal_value(self, data: Any) -> dict:
        # A multipart form carries every object or list as JSON text (task_fields says which);
        # read as a plain dict, so nested bodies (`retry_backoff`...) are not looked for as
        # `retry_backoff.base` form fields and silently missed.
        if self.context.get("multipart") and hasattr(data, "getlist"):
            data = {key: data.get(key) for key in data}
            for name in task_fields.JSON_TEXT_FIELDS:
                if isinstance(self.fields.get(name), JSONFormField):
                    continue  # reads its JSON text itself
                if isinstance(data.get(name), str):
                    try:
                        data[name] = json.loads(data[name])
                    except (ValueError, RecursionError):
                        message = ["Must be valid JSON."]
                        raise serializers.ValidationError({name: message}) from None
        return super().to_internal_value(data)

    def validate_notify(self, value: list[dict]) -> list[dict]:
        # Each entry must name one of the owner's channels (errors per index): the outbox's
        # registered check, the notifications app's.
        # A PATCH validates nested entries partially, so a missing key could slip through.
        missing = {
            str(i): {
                key: ["This field is required."] for key in ("channel", "events") if key not in e
            }
            for i, e in enumerate(value)
            if "channel" not in e or "events" not in e
        }
        if missing:
            raise serializers.ValidationError(missing)
        return value  # the channels are checked with the task's team (`validate`)

    def validate_dedup_key(self, value: str | None) -> str | None:
        instance: Task | None = self.instance
        if instance is not None and (value or None) != instance.dedup_key:
            # The key names what a create made; an update applying none would drop it.
            raise serializers.ValidationError("Set by the task's create; it cannot change.")
        return value

    def validate_concurrency(self, value: dict | None) -> dict:
        return value or {}

    def validate_rate_limit(self, value: dict | None) -> dict:
        return value or {}

    def validate_timeout(self, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise serializers.ValidationError("Must be a finite number of seconds.")
        return value

    def validate_schedule(self, value: Any) -> dict:
        if value is None and self.instance is not None:
            # Null clears only what may be empty (task_fields.NULL_CLEARS); a task always has
            # a schedule, and a change leaves it out to keep it.
            raise serializers.ValidationError(
                "A task always has a schedule: send one, or leave `schedule` out to keep it."
            )
        try:
            schedule = schedules.normalize(value, now=self.context["now"])
        except schedules.ScheduleError as exc:
            raise serializers.ValidationError(exc.errors) from None
        return check_calendars(schedule, self.context)

    def validate(self, attrs: dict) -> dict:
        instance: Task | None = self.instance
        if "schedule" not in attrs and instance is None:
            attrs["schedule"] = schedules.normalize(None, now=self.context["now"])
        kind = attrs.get("kind", instance.kind if instance else None)
        if "payload" in attrs or "kind" in attrs or instance is None:
            payload = attrs.get("payload", instance.payload if instance else {})
            attrs["payload"] = validate_payload(kind, payload)
        upload = attrs.pop("file", None)
        if kind == "executable":
            if upload is None and not (instance and instance.executable):
                raise serializers.ValidationError(
                    {"file": ["An executable task needs the file as multipart part `file`."]}
                )
            if upload is not None and upload.size > settings.SCHEDULER_MAX_UPLOAD_BYTES:
                raise serializers.ValidationError({"file": ["The file is too large."]})
            if upload is not None:
                attrs["executable"] = upload
        elif upload is not None:
            raise serializers.ValidationError({"file": ["Only executable tasks take a file."]})
        if "expect" in attrs and attrs["expect"] is None:
            attrs["expect"] = {}  # null clears the expectations, as {} does
        request = self.context.get("request")
        if "team" in attrs and request is None:
            raise serializers.ValidationError({"team": ["Not taken here."]})
        if request is not None and request.user is not None:  # the admin's form may have none
            attrs = access.place(request.user, instance, attrs)
        if self.context.get("team") is not None:  # a task set's entry: the set's team, checked
            attrs["team"] = self.context["team"]
        if "notify" in attrs or ("team" in attrs and instance is not None and instance.notify):
            # Each entry must name a channel of the task's team, or of its owner for a task of
            # no team (errors per index): the outbox's registered check, the notifications app's.
            owner = request.user if request else getattr(instance, "owner", None)
            team = attrs["team"] if "team" in attrs else getattr(instance, "team", None)
            notify = attrs.get("notify", instance.notify if instance else [])
            try:
                attrs["notify"] = outbox.validate_notify(notify, owner=owner, team=team)
            except serializers.ValidationError as exc:
                raise serializers.ValidationError({"notify": exc.detail}) from None
        backoff = attrs.pop("retry_backoff", None)
        if backoff:
            attrs["retry_backoff_base"] = backoff["base"]
            attrs["retry_backoff_cap"] = backoff["cap"]
        return attrs


class TaskOutputSerializer(serializers.ModelSerializer):
    """The shape of a task as the API returns it, for the OpenAPI schema. The JSON itself is
    written by PostgreSQL (tasks/api/json_sql.py); tests hold every served task to this shape."""

    owner = serializers.CharField(read_only=True)
    payload = PayloadField(read_only=True)
    schedule = ScheduleField(read_only=True)
    # As validated on the way in (the model's columns would show their types' whole ranges).
    priority = serializers.IntegerField(min_value=0, max_value=9, read_only=True)
    max_attempts = serializers.IntegerField(min_value=1, max_value=100, read_only=True)
    notify = NotifySerializer(many=True, read_only=True)
    retry_backoff = RetryBackoffSerializer(read_only=True)
    last_run = LastRunSerializer(read_only=True, allow_null=True)
    next_run_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="The next fire time: `next_runs[0]`, or null."
    )
    next_runs = serializers.ListField(child=serializers.DateTimeField(), read_only=True)
    describe = serializers.CharField(
        read_only=True,
        help_text='The schedule in words, e.g. "At 17:00 on the last Friday of every month '
        '(Europe/Berlin)".',
    )
    next_runs_detail = NextRunSerializer(many=True, read_only=True)
    calendar_url = serializers.URLField(
        read_only=True,
        help_text="The task's calendar feed (iCalendar, its upcoming fire times), the owner's "
        "feed token included: for a calendar app to subscribe to (docs/api.md, Calendar feeds).",
    )
    runs = RunSummarySerializer(many=True, read_only=True)
    executable = serializers.CharField(read_only=True, allow_null=True)
    resources = ResourcesField(read_only=True)
    concurrency = ConcurrencySerializer(read_only=True, allow_null=True)
    rate_limit = RateLimitSerializer(read_only=True, allow_null=True)
    expect = ExpectSerializer(read_only=True)
    health = ChoiceField(
        choices=TaskHealth.Health.choices,
        read_only=True,
        help_text="`up`, or what the task's `expect` found: `late`, `failing` or `overdue`.",
    )
    taskset = serializers.CharField(read_only=True, allow_null=True, help_text="Its task set.")
    key = serializers.CharField(read_only=True, allow_null=True, help_text="Its key there.")
    team = serializers.CharField(
        read_only=True, allow_null=True, help_text="Its team's slug; null: its owner's alone."
    )

    class Meta:
        model = Task
        fields = [
            "id",
            "owner",
            "name",
            "dedup_key",
            "kind",
            "payload",
            "executable",
            "schedule",
            "priority",
            "max_attempts",
            "retry_backoff",
            "timeout",
            "notify",
            "resources",
            "concurrency",
            "rate_limit",
            "on_zombie",
            "expect",
            "status",
            "health",
            "taskset",
            "key",
            "team",
            "describe",
            "last_run",
            "next_run_at",
            "next_runs",
            "next_runs_detail",
            "calendar_url",
            "runs",
            "created_at",
            "updated_at",
        ]

    def get_fields(self) -> dict[str, serializers.Field]:
        # `warnings` is in a create's answer only (tasks/api/creation_warnings.py), so it stays
        # out of Meta.fields, the fields every read has in their order. Not read_only: the
        # schema makes read-only fields required.
        fields = super().get_fields()
        fields["warnings"] = serializers.ListField(
            child=serializers.CharField(),
            required=False,
            help_text="In the answer to a create only, and only when the task cannot run as "
            'things are (it is created all the same): e.g. "no live worker can run '
            'executables: bubblewrap (bwrap) is not installed; ...". Its runs wait, spending '
            "no attempt, until a worker can run them.",
        )
        return fields


class PreviewSerializer(StrictSerializer):
    schedule = ScheduleField()
    count = serializers.IntegerField(min_value=1, max_value=100, default=5)

    def validate_schedule(self, value: Any) -> dict:
        try:
            schedule = schedules.normalize(value, now=self.context["now"])
        except schedules.ScheduleError as exc:
            raise serializers.ValidationError(exc.errors) from None
        return check_calendars(schedule, self.context)


def check_calendars(schedule: dict, context: Mapping[str, Any]) -> dict:
    """The calendars a schedule names in `exclude` must be ones the caller sees (their own and
    their teams', accounts/access.py): another user's id is refused like an unknown one (a 400
    naming `exclude[i]`)."""
    ids = schedule.get("exclude") or []
    if not ids:
        return schedule
    request = context.get("request")
    owner = getattr(request, "user", None)
    seen = access.visible(Calendar.objects.filter(pk__in=ids), owner) if owner else None
    owned = {str(pk) for pk in seen.values_list("pk", flat=True)} if seen is not None else set()
    errors = {f"exclude[{i}]": ["Unknown calendar."] for i, c in enumerate(ids) if c not in owned}
    if errors:
        raise serializers.ValidationError(errors)
    return schedule


class HolidaysSerializer(StrictSerializer):
    country = serializers.CharField(max_length=8)
    subdivision = serializers.CharField(max_length=64, required=False, allow_null=True)

    def run_validation(self, data: Any = serializers.empty) -> Any:
        # `{}` is what a calendar without holidays shows: sent back, it means none.
        if data == {}:
            return None
        return super().run_validation(data)

    def validate(self, attrs: dict) -> dict:
        if "country" not in attrs:  # a PATCH replaces the holidays whole: no partial object
            raise serializers.ValidationError({"country": ["This field is required."]})
        known = exclusions.supported()
        country = attrs["country"].strip().upper()
        if country not in known:
            raise serializers.ValidationError(
                {"country": ["Unknown country; use an ISO 3166 code the holidays package has."]}
            )
        subdivisions = {s.upper(): s for s in known[country]}
        subdivision = (attrs.get("subdivision") or "").strip().upper() or None
        if subdivision is not None and subdivision not in subdivisions:
            choices = ", ".join(sorted(known[country])[:60])
            raise serializers.ValidationError(
                {"subdivision": [f"Unknown subdivision of {country}; use one of {choices}."]}
            )
        return {"country": country, "subdivision": subdivisions.get(subdivision or "")}


class WindowSerializer(StrictSerializer):
    start = serializers.CharField(max_length=64)
    end = serializers.CharField(max_length=64)


class CalendarSerializer(StrictSerializer):
    """A calendar as clients send it; times without an offset are in its `timezone`."""

    name = serializers.CharField(max_length=200)
    timezone = serializers.CharField(max_length=64, default="UTC")
    holidays = HolidaysSerializer(required=False, allow_null=True)
    dates = serializers.ListField(
        child=serializers.DateField(), max_length=exclusions.MAX_DATES, required=False
    )
    windows = serializers.ListField(
        child=WindowSerializer(), max_length=exclusions.MAX_WINDOWS, required=False
    )
    team = serializers.SlugField(max_length=100, required=False, allow_null=True)

    def validate(self, attrs: dict) -> dict:
        # The zone and the windows are read as a schedule reads them, with the same messages.
        raw = {"timezone": attrs.get("timezone"), "exclude_windows": attrs.get("windows")}
        errors: dict[str, list[str]] = {}
        reader = FieldReader(raw, errors)
        zone = reader.zone()
        windows = reader.windows(zone) if "windows" in attrs else None
        if errors:
            raise serializers.ValidationError(
                {k.replace("exclude_windows", "windows"): v for k, v in errors.items()}
            )
        out = dict(attrs)
        if "timezone" in attrs or self.instance is None:
            out["timezone"] = zone.key
        if windows is not None:
            out["windows"] = windows
        if "dates" in attrs:
            out["dates"] = sorted({d.isoformat() for d in attrs["dates"]})
        if "holidays" in attrs:
            out["holidays"] = attrs["holidays"] or {}
        return out


class CalendarOutputSerializer(serializers.ModelSerializer):
    team: serializers.Field = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )

    class Meta:
        model = Calendar
        fields = [
            "id",
            "name",
            "timezone",
            "holidays",
            "dates",
            "windows",
            "team",
            "created_at",
            "updated_at",
        ]
