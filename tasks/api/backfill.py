"""POST /api/v1/tasks/{id}/backfill: the runs of a task's past occurrences never recorded
(tasks/transitions/backfill.py; docs/schedules.md, "Backfill")."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tasks.api.serializers import PriorityField
from tasks.api.strict import StrictSerializer
from tasks.api.views import CONFLICT, ERRORS, changeable_task
from tasks.db import db_now
from tasks.transitions.backfill import DEFAULT_MAX_RUNS, MAX_RUNS_CAP, BackfillError, backfill


class BackfillSerializer(StrictSerializer):
    start = serializers.DateTimeField(help_text="The range's start (inclusive), ISO 8601.")
    end = serializers.DateTimeField(
        help_text="The range's end (exclusive): later than `start`, not in the future."
    )
    max_runs = serializers.IntegerField(
        required=False,
        default=DEFAULT_MAX_RUNS,
        min_value=1,
        max_value=MAX_RUNS_CAP,
        help_text="The most occurrences the range may hold; a range with more is a 400 and "
        f"creates nothing (default {DEFAULT_MAX_RUNS}, at most {MAX_RUNS_CAP}).",
    )
    priority = PriorityField(
        required=False,
        help_text="The backfilled runs' priority, at most the task's (the default), so that "
        "a backfill can run behind the task's own runs.",
    )


BACKFILL_OUTPUT = inline_serializer(
    "BackfillOutput",
    {
        "created": serializers.IntegerField(help_text="New runs, to run."),
        "excluded": serializers.IntegerField(
            help_text="New runs recorded `skipped`: the schedule's exclusions leave them out."
        ),
        "existing": serializers.IntegerField(
            help_text="Occurrences in the range that already had a run, left as they were."
        ),
    },
)


class TaskBackfillView(APIView):
    token_scopes = {"POST": ("run",)}  # a service token needs `run` (accounts/token_auth.py)

    @extend_schema(
        request=BackfillSerializer,
        responses={201: BACKFILL_OUTPUT, 200: BACKFILL_OUTPUT, **ERRORS, **CONFLICT},
    )
    def post(self, request: Request, pk: Any) -> Response:
        task = changeable_task(request, pk)
        serializer = BackfillSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            result = backfill(
                task=task,
                start=data["start"],
                end=data["end"],
                now=db_now(),
                max_runs=data["max_runs"],
                priority=data.get("priority"),
            )
        except BackfillError as exc:
            raise serializers.ValidationError({exc.field: [exc.message]}) from None
        made = result.created + result.excluded
        return Response(
            {"created": result.created, "excluded": result.excluded, "existing": result.existing},
            status=status.HTTP_201_CREATED if made else status.HTTP_200_OK,
        )
