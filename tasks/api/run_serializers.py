"""The shape of a run as the API returns it, for the OpenAPI schema.

The JSON itself is written by PostgreSQL (tasks/api/json_sql.py); tests hold every served run
to the schema these describe.
"""

from __future__ import annotations

from rest_framework import serializers

from tasks.models import Attempt, Run


class RunSummarySerializer(serializers.ModelSerializer):
    """One of a task's `runs`: its latest 20 runs that are not among its `next_runs` (begun, or
    due and waiting for a worker), newest first."""

    class Meta:
        model = Run
        fields = ["id", "scheduled_at", "status", "attempt", "started_at", "finished_at"]


class LastRunSerializer(RunSummarySerializer):
    """A task's `last_run`: its latest run, by `scheduled_at`, that happened (started at least
    once, or ended without starting once its time came: skipped, cancelled), as its `runs` show
    a run; null when none has."""


class NextRunSerializer(serializers.Serializer):
    """One of a task's `next_runs_detail`: a next fire time and its run once it is planned."""

    scheduled_at = serializers.DateTimeField()
    run_id = serializers.UUIDField(
        allow_null=True,
        help_text="The planned run of this occurrence (GET /api/v1/runs/{id}); null while it "
        "is not planned yet (the scheduler plans a look-ahead window ahead of time).",
    )


class AttemptSerializer(serializers.ModelSerializer):
    started = serializers.DateTimeField(source="started_at", allow_null=True)
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


class RunSerializer(serializers.ModelSerializer):
    task = serializers.UUIDField(source="task_id", read_only=True)
    attempts = AttemptSerializer(many=True, read_only=True)
    idempotency_key = serializers.CharField(read_only=True)
    zombie = serializers.BooleanField(read_only=True)
    wait_reason = serializers.CharField(
        read_only=True,
        help_text='Why a `waiting_for_resource` run waits (e.g. "no live worker offers '
        'cpu=64"); empty otherwise.',
    )

    backfill = serializers.BooleanField(
        read_only=True,
        help_text="Made by a backfill (POST /api/v1/tasks/{id}/backfill): never missed.",
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "task",
            "scheduled_at",
            "execute_at",
            "status",
            "wait_reason",
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
            "zombie",
            "zombie_since",
            "idempotency_key",
            "backfill",
        ]
