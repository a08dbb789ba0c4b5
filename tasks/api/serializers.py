"""Input validation and output shapes of the task API (API.md)."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from tasks import planning, schedules
from tasks.api.json_sql import recent_run_summaries, recent_runs_json
from tasks.api.payloads import validate_payload
from tasks.api.renderers import RawJSON
from tasks.models import Attempt, Run, Task

PRIORITY_NAMES = {"low": 1, "medium": 5, "high": 9}
MAX_TIMEOUT_SECONDS = 7 * 24 * 3600
MAX_JSON_DEPTH = 64


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer", "minimum": 0, "maximum": 9},
            {"type": "string", "enum": list(PRIORITY_NAMES)},
        ]
    }
)
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


def check_storable_json(value: Any) -> None:
    """Refuse JSON that PostgreSQL's jsonb cannot store (NUL characters, lone surrogates) or that
    is nested so deeply that encoding it would exhaust Python's stack; both used to be a 500."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise serializers.ValidationError(f"Nested too deeply (at most {MAX_JSON_DEPTH}).")
        if isinstance(item, dict):
            for key, child in item.items():
                _check_text(key)
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
        else:
            _check_text(item)


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
        check_storable_json(data)
        return super().to_internal_value(data)


class RetryBackoffSerializer(serializers.Serializer):
    base = serializers.FloatField(min_value=0.0, max_value=86400.0)
    cap = serializers.FloatField(min_value=0.0, max_value=7 * 86400.0)

    def validate(self, attrs: dict) -> dict:
        if attrs["cap"] < attrs["base"]:
            raise serializers.ValidationError({"cap": ["Must be at least base."]})
        return attrs


class NotifySerializer(serializers.Serializer):
    channel = serializers.CharField(max_length=64)
    events = serializers.ListField(
        child=serializers.ChoiceField(
            choices=["succeeded", "failed", "retries_exhausted", "missed", "stuck"]
        ),
        allow_empty=False,
        max_length=5,
    )


class TaskInputSerializer(serializers.Serializer):
    """What a client sends to create or change a task; `partial=True` for PATCH."""

    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    dedup_key = serializers.CharField(max_length=200, required=False, allow_null=True)
    kind = serializers.ChoiceField(choices=Task.Kind.choices)
    payload = JSONFormField(required=False)
    schedule = JSONFormField(required=False, allow_null=True)
    priority = PriorityField(required=False)
    max_attempts = serializers.IntegerField(min_value=1, max_value=100, required=False)
    retry_backoff = RetryBackoffSerializer(required=False)
    timeout = serializers.FloatField(
        min_value=0.001, max_value=MAX_TIMEOUT_SECONDS, required=False, allow_null=True
    )
    notify = NotifySerializer(many=True, required=False, max_length=20)
    file = serializers.FileField(required=False, write_only=True)

    def to_internal_value(self, data: Any) -> dict:
        # A multipart form carries `notify` (a list) as JSON text, like `payload` and `schedule`.
        if self.context.get("multipart") and isinstance(data.get("notify"), str):
            data = {key: data.get(key) for key in data}
            try:
                data["notify"] = json.loads(data["notify"])
            except ValueError:
                raise serializers.ValidationError({"notify": ["Must be valid JSON."]}) from None
        return super().to_internal_value(data)

    def validate_notify(self, value: list[dict]) -> list[dict]:
        # Issue 5: each entry must name one of the owner's channels (errors per index).
        from notifications.api.serializers import validate_notify_channels

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
        request = self.context.get("request")
        owner = request.user if request else getattr(self.instance, "owner", None)
        return validate_notify_channels(value, owner=owner)

    def validate_timeout(self, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise serializers.ValidationError("Must be a finite number of seconds.")
        return value

    def validate_schedule(self, value: Any) -> dict:
        try:
            return schedules.normalize(value, now=self.context["now"])
        except schedules.ScheduleError as exc:
            raise serializers.ValidationError(exc.errors) from None

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
        backoff = attrs.pop("retry_backoff", None)
        if backoff:
            attrs["retry_backoff_base"] = backoff["base"]
            attrs["retry_backoff_cap"] = backoff["cap"]
        return attrs


RUN_SUMMARY_FIELDS = ("id", "scheduled_at", "status", "attempt", "started_at", "finished_at")


class RunSummarySerializer(serializers.ModelSerializer):
    class Meta:
        model = Run
        fields = list(RUN_SUMMARY_FIELDS)


class AttemptSerializer(serializers.ModelSerializer):
    started = serializers.DateTimeField(source="started_at")
    finished = serializers.DateTimeField(source="finished_at")

    class Meta:
        model = Attempt
        fields = [
            "number",
            "started",
            "finished",
            "outcome",
            "error",
            "worker",
            "exit_code",
            "http_status",
        ]

    def to_representation(self, attempt: Attempt) -> dict:
        return attempt_representation(attempt)


def attempt_representation(attempt: Attempt) -> dict:
    # Written out, as TaskOutputSerializer's (a test holds it equal to DRF's rendering).
    return {
        "number": attempt.number,
        "started": _datetime(attempt.started_at),
        "finished": _datetime(attempt.finished_at),
        "outcome": attempt.outcome,
        "error": attempt.error,
        "worker": attempt.worker,
        "exit_code": attempt.exit_code,
        "http_status": attempt.http_status,
    }


class RunSerializer(serializers.ModelSerializer):
    task = serializers.UUIDField(source="task_id", read_only=True)
    attempts = AttemptSerializer(many=True, read_only=True)
    idempotency_key = serializers.CharField(read_only=True)

    class Meta:
        model = Run
        fields = [
            "id",
            "task",
            "scheduled_at",
            "execute_at",
            "status",
            "attempt",
            "max_attempts",
            "priority",
            "worker",
            "started_at",
            "finished_at",
            "attempts",
            "exit_code",
            "http_status",
            "output",
            "error",
            "idempotency_key",
        ]

    def to_representation(self, run: Run) -> dict:
        # Written out, as TaskOutputSerializer's (a test holds it equal to DRF's rendering).
        return {
            "id": str(run.id),
            "task": str(run.task_id),
            "scheduled_at": _datetime(run.scheduled_at),
            "execute_at": _datetime(run.execute_at),
            "status": run.status,
            "attempt": run.attempt,
            "max_attempts": run.max_attempts,
            "priority": run.priority,
            "worker": run.worker,
            "started_at": _datetime(run.started_at),
            "finished_at": _datetime(run.finished_at),
            "attempts": [attempt_representation(a) for a in run.attempts.all()],
            "exit_code": run.exit_code,
            "http_status": run.http_status,
            "output": run.output,
            "error": run.error,
            "idempotency_key": run.idempotency_key,
        }


class TaskListSerializer(serializers.ListSerializer):
    """Loads what every task of a page shows from its runs (the recent ones, the planned ones)
    with one query each, before serializing the page."""

    def to_representation(self, data: Any) -> list[dict]:
        tasks = list(data.all() if isinstance(data, models.manager.BaseManager) else data)
        missing = [task for task in tasks if getattr(task, "recent_runs", None) is None]
        recent = recent_runs_json([task.pk for task in missing])
        active = [t.pk for t in tasks if t.status == Task.Status.ACTIVE and t.pending_times is None]
        pending = planning.pending_times(active, now=timezone.now())
        for task in missing:
            task.recent_runs = recent[task.pk]
        for task in tasks:
            if task.pk in pending:
                task.pending_times = pending[task.pk]
        return super().to_representation(tasks)


class TaskOutputSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.get_username", read_only=True)
    retry_backoff = serializers.SerializerMethodField()
    next_runs = serializers.SerializerMethodField()
    runs = serializers.SerializerMethodField()
    executable = serializers.SerializerMethodField()

    class Meta:
        model = Task
        list_serializer_class = TaskListSerializer
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
            "status",
            "next_run_at",
            "next_runs",
            "runs",
            "created_at",
            "updated_at",
        ]

    def get_retry_backoff(self, task: Task) -> dict[str, float]:
        return {"base": task.retry_backoff_base, "cap": task.retry_backoff_cap}

    @extend_schema_field({"type": "array", "items": {"type": "string", "format": "date-time"}})
    def get_next_runs(self, task: Task) -> list[str]:
        from tasks.api.views import next_runs

        return [_datetime(at) for at in next_runs(task)]

    @extend_schema_field(RunSummarySerializer(many=True))
    def get_runs(self, task: Task) -> list[dict] | RawJSON:
        recent = getattr(task, "recent_runs", None)  # JSON, set for a page by TaskListSerializer
        if recent is None:
            recent = recent_run_summaries([task.pk])[task.pk]
        return recent

    @extend_schema_field({"type": "string", "nullable": True})
    def get_executable(self, task: Task) -> str | None:
        return task.executable.name.rsplit("/", 1)[-1] if task.executable else None

    def to_representation(self, task: Task) -> dict:
        """The fields above, written out directly: DRF's generic field-by-field walk took most of
        a task list page's time (50 tasks). The declared fields still define the schema, and a
        test holds this equal to DRF's own rendering (`ModelSerializer.to_representation`)."""
        return {
            "id": str(task.id),
            "owner": getattr(task, "owner_name", None) or task.owner.get_username(),
            "name": task.name,
            "dedup_key": task.dedup_key,
            "kind": task.kind,
            "payload": task.payload,
            "executable": self.get_executable(task),
            "schedule": task.schedule,
            "priority": task.priority,
            "max_attempts": task.max_attempts,
            "retry_backoff": self.get_retry_backoff(task),
            "timeout": None if task.timeout is None else float(task.timeout),
            "notify": task.notify,
            "status": task.status,
            "next_run_at": _datetime(task.next_run_at),
            "next_runs": self.get_next_runs(task),
            "runs": self.get_runs(task),
            "created_at": _datetime(task.created_at),
            "updated_at": _datetime(task.updated_at),
        }


def _datetime(value: datetime | None) -> str | None:
    """DRF's DateTimeField output (ISO 8601, "+00:00" as "Z") in the default time zone, which
    no request changes here; DRF looks up the current zone again for every single value."""
    if value is None:
        return None
    text = value.astimezone(timezone.get_default_timezone()).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


class PreviewSerializer(serializers.Serializer):
    schedule = JSONFormField()
    count = serializers.IntegerField(min_value=1, max_value=100, default=5)

    def validate_schedule(self, value: Any) -> dict:
        try:
            return schedules.normalize(value, now=self.context["now"])
        except schedules.ScheduleError as exc:
            raise serializers.ValidationError(exc.errors) from None
