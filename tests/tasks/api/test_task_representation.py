"""The task as returned is written out by hand for speed; it must equal DRF's own rendering."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.files.base import ContentFile
from rest_framework import serializers

from tasks.api.serializers import TaskOutputSerializer
from tasks.models import Task
from tests.factories import RunFactory, TaskFactory

pytestmark = pytest.mark.django_db

AT = datetime(2026, 5, 4, 3, 2, 1, tzinfo=UTC)


def tasks() -> list[Task]:
    plain = TaskFactory(name="plain")
    recurring = TaskFactory(
        name="every minute",
        dedup_key="nightly",
        schedule={"type": "interval", "every": 60, "start_at": "2026-05-04T03:02:01Z"},
        schedule_type="interval",
        next_run_at=AT + timedelta(minutes=1, microseconds=250),
        runs_planned=1,
        timeout=12,
        priority=9,
        notify=[{"channel": "c", "events": ["failed"]}],
        retry_backoff_base=1.5,
    )
    RunFactory(task=recurring, scheduled_at=AT, status="succeeded", attempt=1,
               started_at=AT, finished_at=AT + timedelta(seconds=1))  # fmt: skip
    RunFactory(task=recurring, scheduled_at=AT + timedelta(hours=1))
    paused = TaskFactory(status="paused", payload={"name": "noop", "args": {"x": [1, None]}})
    binary = TaskFactory(kind="executable", payload={"args": ["-v"]})
    binary.executable.save("tool.sh", ContentFile(b"#!/bin/sh\n"), save=True)
    return [plain, recurring, paused, binary]


def test_hand_written_task_equals_drf_rendering() -> None:
    for task in tasks():
        task = Task.objects.select_related("owner").get(pk=task.pk)
        serializer = TaskOutputSerializer(task)
        fast = serializer.to_representation(task)
        generic = serializers.ModelSerializer.to_representation(serializer, task)
        assert fast == dict(generic), task.name
        assert list(fast) == TaskOutputSerializer.Meta.fields


def test_hand_written_run_and_attempts_equal_drf_rendering() -> None:
    from tasks.api.serializers import AttemptSerializer, RunSerializer
    from tasks.models import Run

    task = TaskFactory()
    finished = RunFactory(task=task, scheduled_at=AT, status="failed", attempt=2, worker="w-1",
                          started_at=AT, finished_at=AT + timedelta(seconds=3), exit_code=3,
                          output="out\n", error="exit code 3")  # fmt: skip
    for number, outcome in ((1, "timed_out"), (2, "failed")):
        finished.attempts.create(
            number=number,
            worker="w-1",
            started_at=AT,
            finished_at=AT + timedelta(seconds=number),
            outcome=outcome,
            error="boom",
            http_status=502 if number == 1 else None,
        )
    waiting = RunFactory(task=task, scheduled_at=AT + timedelta(minutes=1, microseconds=7))
    for run in Run.objects.prefetch_related("attempts").filter(pk__in=[finished.pk, waiting.pk]):
        serializer = RunSerializer(run)
        generic = serializers.ModelSerializer.to_representation(serializer, run)
        generic["attempts"] = [
            dict(serializers.ModelSerializer.to_representation(AttemptSerializer(), a))
            for a in run.attempts.all()
        ]
        assert serializer.to_representation(run) == dict(generic)
        assert list(serializer.to_representation(run)) == RunSerializer.Meta.fields
    assert len(RunSerializer(finished).data["attempts"]) == 2
