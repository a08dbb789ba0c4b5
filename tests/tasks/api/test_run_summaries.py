"""A task's `runs`, built in SQL for a whole page, read exactly as RunSummarySerializer would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from tasks.api.json_sql import recent_run_summaries, recent_runs_json
from tasks.api.renderers import ORJSONRenderer
from tasks.api.serializers import RunSummarySerializer
from tasks.models import Run
from tests.factories import RunFactory, TaskFactory

pytestmark = pytest.mark.django_db


def test_summaries_match_the_serializer_and_keep_the_latest_twenty() -> None:
    task, other = TaskFactory(), TaskFactory()
    base = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    for i in range(25):
        at = base + timedelta(minutes=i, microseconds=0 if i % 2 else 1234)
        done = i < 23
        RunFactory(
            task=task,
            scheduled_at=at,
            status="succeeded" if done else "scheduled",
            attempt=1 if done else 0,
            started_at=at + timedelta(seconds=1) if done else None,
            finished_at=at + timedelta(seconds=2) if done else None,
        )
    RunFactory(task=other, scheduled_at=base)

    found = recent_run_summaries([task.pk, other.pk, TaskFactory().pk])

    latest = Run.objects.filter(task=task).order_by("-scheduled_at")[:20]
    assert found[task.pk] == RunSummarySerializer(latest, many=True).data
    assert len(found[task.pk]) == 20
    assert found[task.pk][0]["started_at"] is None  # the newest two are not started
    assert found[task.pk][-1]["scheduled_at"] == "2026-03-01T12:05:00Z"
    assert [r["id"] for r in found[other.pk]] == [str(Run.objects.get(task=other).pk)]
    assert list(found.values())[2] == []
    # The list page writes the same JSON as PostgreSQL built it.
    raw = recent_runs_json([task.pk])[task.pk]
    assert orjson.loads(ORJSONRenderer().render({"runs": raw}))["runs"] == found[task.pk]
