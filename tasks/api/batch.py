"""POST /api/v1/tasks/batch: up to 1,000 task bodies created all or none."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduler_project.web.parsers import JSONParser
from tasks.api.bodies import TaskJSONBody
from tasks.api.serializers import TaskInputSerializer
from tasks.api.strict import StrictSerializer
from tasks.api.views import ERRORS
from tasks.db import db_now
from tasks.transitions.creation import MAX_BATCH, create_task_rows


class BodyField(serializers.DictField):
    """A task body: an object, its values left to TaskInputSerializer. DictField's own child
    validation runs a field per key of every body that validates nothing (its child takes any
    value), and has the same result."""

    def run_child_validation(self, data: Mapping[str, Any]) -> dict[str, Any]:
        return {str(key): value for key, value in data.items()}


class BatchInputSerializer(StrictSerializer):
    tasks = serializers.ListField(child=BodyField(), allow_empty=False, max_length=MAX_BATCH)


class TaskBatchCreateView(APIView):
    parser_classes = [JSONParser]

    @extend_schema(
        request=inline_serializer("TaskBatchInput", {"tasks": TaskJSONBody(many=True)}),
        responses={
            201: inline_serializer("TaskBatchOutput", {"ids": serializers.ListField()}),
            **ERRORS,
            413: OpenApiResponse(description="The body is too large."),
        },
    )
    def post(self, request: Request) -> Response:
        outer = BatchInputSerializer(data=request.data)
        outer.is_valid(raise_exception=True)
        now = db_now()
        items = validate_bodies(outer.validated_data["tasks"], request=request, now=now)
        created = create_task_rows(owner=request.user, items=items, now=now)
        return Response({"ids": [str(i) for i in created.ids]}, status=status.HTTP_201_CREATED)


def validate_bodies(bodies: list[dict], *, request: Request, now: datetime) -> list[dict]:
    """Each body validated as a single create validates it; raises on the first bad one, by
    index and field, so nothing of the batch is created.

    One serializer for the whole batch: building one per body deep-copies its declared fields
    every time, which cost as much CPU as the validation itself.
    """
    # The request names the owner, whose channels `notify` may use (isolation).
    one = TaskInputSerializer(context={"now": now, "multipart": False, "request": request})
    items = []
    for index, body in enumerate(bodies):
        if "file" in body:
            raise serializers.ValidationError(
                {"tasks": {str(index): {"file": ["Executables are created one at a time."]}}}
            )
        try:
            items.append(one.run_validation(body))
        except serializers.ValidationError as exc:
            raise serializers.ValidationError({"tasks": {str(index): exc.detail}}) from None
    return items
