"""Runs written as JSON by PostgreSQL read as RunSerializer writes them, through the API too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest
from rest_framework.test import APIClient

from tasks.api.json_sql import json_array, runs_json
from tasks.api.renderers import ORJSONRenderer
from tasks.api.serializers import RunSerializer
from tasks.models import Attempt, Run
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db


def _varied_runs(task) -> list[Run]:
    base = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    done = RunFactory(
        task=task,
        scheduled_at=base,  # whole seconds: no fraction, in the key a ".000000"
        execute_at=base + timedelta(microseconds=1200),  # trailing zeros kept: ".001200"
        status="failed",
        attempt=2,
        worker="w-1",
        started_at=base + timedelta(seconds=1, microseconds=123456),
        finished_at=base + timedelta(seconds=2),
        exit_code=3,
        output='line "one"\nline\ttwo \u2028 caf\u00e9 \U0001f600',
        error="boom\\",
    )
    for number in (2, 1):  # created out of order: listed by number
        Attempt.objects.create(
            run=done,
            number=number,
            worker=f"w-{number}",
            started_at=base + timedelta(seconds=number),
            finished_at=base + timedelta(seconds=number, microseconds=10 * number),
            outcome="failed",
            error=f"attempt {number} failed",
            http_status=500 if number == 1 else None,
        )
    waiting = RunFactory(task=task, scheduled_at=base + timedelta(minutes=1, microseconds=7))
    return [done, waiting]


def _serialized(run: Run) -> dict:
    data = RunSerializer(Run.objects.get(pk=run.pk)).data
    data["attempts"] = sorted(data["attempts"], key=lambda a: a["number"])
    return data


def test_runs_read_as_the_serializer_writes_them_in_the_order_asked() -> None:
    task = TaskFactory()
    done, waiting = _varied_runs(task)

    found = runs_json([waiting.pk, done.pk], owner_id=task.owner_id)

    assert [orjson.loads(raw.text) for raw in found] == [_serialized(waiting), _serialized(done)]
    assert orjson.loads(found[1].text)["idempotency_key"] == done.idempotency_key
    page = orjson.loads(ORJSONRenderer().render({"results": json_array(found)}))
    assert page["results"][1]["output"] == done.output


def test_only_the_owners_runs_are_written() -> None:
    task = TaskFactory()
    (run,) = _varied_runs(task)[:1]
    assert runs_json([run.pk], owner_id=UserFactory().pk) == []
    assert runs_json([], owner_id=task.owner_id) == []


def test_run_endpoints_serve_the_sql_json(api: APIClient, user) -> None:
    task = TaskFactory(owner=user)
    done, waiting = _varied_runs(task)
    other = RunFactory()

    page = api.get(f"/api/v1/tasks/{task.pk}/runs").json()
    assert page["count"] == 2
    assert page["results"] == [_serialized(waiting), _serialized(done)]  # newest first
    failed = api.get(f"/api/v1/tasks/{task.pk}/runs?status=failed").json()
    assert [r["id"] for r in failed["results"]] == [str(done.pk)]
    assert api.get(f"/api/v1/runs/{done.pk}").json() == _serialized(done)
    assert api.get(f"/api/v1/runs/{other.pk}").status_code == 404
    assert api.get(f"/api/v1/tasks/{other.task_id}/runs").status_code == 404
