"""The seed routes (docs/api.md, Endpoints), as thin adapters onto the same services."""

from __future__ import annotations

import json
import math
from typing import Any
from uuid import UUID

import orjson
from django.http import QueryDict
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduler_project.web.parsers import UPLOAD_PARSERS
from tasks.api.bodies import TASK_BODY, UPLOAD_NOTE
from tasks.api.json_sql import tasks_json
from tasks.api.serializers import TaskInputSerializer, TaskOutputSerializer
from tasks.api.strict import ChoiceField, StrictSerializer
from tasks.api.views import CONFLICT, ERRORS, TaskListCreateView, changeable_task, owned_tasks
from tasks.db import db_now
from tasks.models import Task
from tasks.storage import payload_s3_path
from tasks.transitions import creation, lifecycle


def _plain(data: Any) -> dict:
    if isinstance(data, QueryDict):
        body = {key: data.get(key) for key in data}
        schedule = body.get("schedule")
        if isinstance(schedule, str):
            body["schedule"] = _form_schedule(schedule)
        return body
    if not isinstance(data, dict):
        raise serializers.ValidationError({"non_field_errors": ["Expected a JSON object."]})
    return dict(data)


def _form_schedule(value: str) -> str:
    """A form field carries the schedule as JSON text; a seed route's bare cron string is not JSON,
    so it travels on as a JSON string (which the schedule validator reads as a cron expression)."""
    if not value.strip():
        return value
    try:
        json.loads(value)
    except ValueError:
        return json.dumps(value)
    return value


def seed_to_api(data: Any, *, partial: bool) -> dict:
    """Translate a seed body (dedup_id, cron string schedule, delay, file) into the task API's
    body; any other field is the task API's, and one it does not take is refused there."""
    body = _plain(data)
    if "dedup_id" in body:
        body.setdefault("dedup_key", body.pop("dedup_id"))
    delay = body.pop("delay", None)
    schedule = body.get("schedule")
    if schedule in ("", None):
        body.pop("schedule", None)
        if delay not in (None, ""):
            body["schedule"] = {"type": "once", "delay": _number(delay, "delay")}
    if "file" in body and "kind" not in body:
        body["kind"] = "executable"
    if not partial and "kind" not in body:
        raise serializers.ValidationError(
            {"kind": ["This field is required (or send the executable as multipart part `file`)."]}
        )
    return body


def _number(value: Any, field: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        # "1e999" and "nan" parse as floats; named here rather than as an invalid `schedule`.
        raise serializers.ValidationError({field: ["Must be a number of seconds."]})
    return number


def _task_from(request: Request, value: Any) -> Task:
    if not value:
        raise serializers.ValidationError({"task_id": ["This field is required."]})
    try:
        pk = UUID(str(value))
    except ValueError:
        raise serializers.ValidationError({"task_id": ["Must be a task id."]}) from None
    if request.method in ("GET", "HEAD"):
        return get_object_or_404(owned_tasks(request), pk=pk)
    return changeable_task(request, pk)


def seed_representation(request: Request, task: Task) -> dict:
    """The task as the API returns it, plus the fields the seed routes add (docs/api.md)."""
    data = orjson.loads(tasks_json([task.pk], owner=request.user, now=timezone.now())[0].text)
    data["task_id"] = str(task.id)
    data["payload_s3_path"] = payload_s3_path(task.executable.name if task.executable else None)
    data["detail"] = {"name": task.name, "kind": task.kind, "schedule": task.schedule}
    data["history"] = [
        {"scheduled_timestamp": run["scheduled_at"], "status": run["status"]}
        for run in data["runs"]
    ]
    return data


def _update(request: Request, task: Task, body: dict) -> Task:
    now = db_now()
    multipart = request.content_type.startswith("multipart/")
    serializer = TaskInputSerializer(
        task,
        data=body,
        partial=True,
        context={"now": now, "multipart": multipart, "request": request},
    )
    serializer.is_valid(raise_exception=True)
    return lifecycle.update_task(task=task, data=serializer.validated_data, now=now)


# Every seed PUT answers 204 (docs/api.md, Endpoints); the task is read back with GET.
class SeedTaskView(APIView):
    """POST/PUT/GET/DELETE /task."""

    parser_classes = UPLOAD_PARSERS

    @extend_schema(
        request=TASK_BODY,
        description=UPLOAD_NOTE,
        responses={201: TaskOutputSerializer, 200: TaskOutputSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        now = db_now()
        body = seed_to_api(request.data, partial=False)
        multipart = request.content_type.startswith("multipart/")
        serializer = TaskInputSerializer(
            data=body, context={"now": now, "multipart": multipart, "request": request}
        )
        serializer.is_valid(raise_exception=True)
        task, created = creation.create_task(
            owner=request.user, data=serializer.validated_data, now=now
        )
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(seed_representation(request, task), status=code)

    @extend_schema(
        operation_id="seed_task_update",
        request=TASK_BODY,
        description=UPLOAD_NOTE,
        responses={204: None, **ERRORS, **CONFLICT},
    )
    def put(self, request: Request) -> Response:
        body = _plain(request.data)
        task = _task_from(request, body.pop("task_id", None))
        _update(request, task, seed_to_api(body, partial=True))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        operation_id="seed_task_retrieve",
        parameters=[OpenApiParameter("id", str, required=True)],
        responses={200: TaskOutputSerializer, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        task = _task_from(request, request.query_params.get("id"))
        return Response(seed_representation(request, task))

    @extend_schema(
        operation_id="seed_task_destroy",
        parameters=[OpenApiParameter("id", str, required=True)],
        responses={204: None, **ERRORS, **CONFLICT},
    )
    def delete(self, request: Request) -> Response:
        task = _task_from(request, request.query_params.get("id"))
        lifecycle.cancel_task(task=task, force=False, now=db_now())
        return Response(status=status.HTTP_204_NO_CONTENT)


class SeedTaskStatusSerializer(StrictSerializer):
    task_id = serializers.UUIDField()
    status = ChoiceField(choices=["enable", "disable"])


class SeedTaskStatusView(APIView):
    """PUT /task/status {"task_id", "status": "enable"|"disable"}."""

    @extend_schema(request=SeedTaskStatusSerializer, responses={204: None, **ERRORS})
    def put(self, request: Request) -> Response:
        serializer = SeedTaskStatusSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        task = _task_from(request, serializer.validated_data["task_id"])
        now = db_now()
        if serializer.validated_data["status"] == "enable":
            lifecycle.resume_task(task=task, now=now)
        else:
            lifecycle.pause_task(task=task, now=now)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SeedTaskDetailView(APIView):
    """GET/PUT/DELETE /task/{id}."""

    parser_classes = UPLOAD_PARSERS

    @extend_schema(responses={200: TaskOutputSerializer, **ERRORS})
    def get(self, request: Request, pk: Any) -> Response:
        task = get_object_or_404(owned_tasks(request), pk=pk)
        return Response(seed_representation(request, task))

    @extend_schema(
        request=TASK_BODY, description=UPLOAD_NOTE, responses={204: None, **ERRORS, **CONFLICT}
    )
    def put(self, request: Request, pk: Any) -> Response:
        task = changeable_task(request, pk)
        body = _plain(request.data)
        if body.pop("cancel_next", False) in (True, "true", "1"):
            lifecycle.skip_next(task=task, now=db_now())
        if body:
            _update(request, task, seed_to_api(body, partial=True))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses={204: None, **ERRORS, **CONFLICT})
    def delete(self, request: Request, pk: Any) -> Response:
        task = changeable_task(request, pk)
        lifecycle.cancel_task(task=task, force=False, now=db_now())
        return Response(status=status.HTTP_204_NO_CONTENT)


class SeedTaskListView(TaskListCreateView):
    """GET /tasks: the same list as /api/v1/tasks."""

    http_method_names = ["get", "head", "options"]

    def get_queryset(self):
        return owned_tasks(self.request)
