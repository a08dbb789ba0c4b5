"""The JSON PostgreSQL writes for every read: DRF's formats, RunSerializer's fields (DRF's own
rendering of it is the reference), the idempotency key as Python writes it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from importlib import resources
from zoneinfo import ZoneInfo

import orjson
import pytest
from django.db import connection
from rest_framework import serializers
from rest_framework.test import APIClient

from scheduler_project.sql import Statements
from scheduler_project.web.renderers import ORJSONRenderer
from tasks import history, occurrences
from tasks.api.json_sql import iso_json, runs_json, tasks_json
from tasks.api.run_serializers import RunSerializer, RunSummarySerializer
from tasks.ids import idempotency_key
from tasks.models import Attempt, Run, Task
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
        zombie_since=base + timedelta(seconds=1, microseconds=500),
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
    # DRF's generic rendering (RunSerializer declares no representation of its own).
    data = RunSerializer(Run.objects.get(pk=run.pk)).data
    data["attempts"] = sorted(data["attempts"], key=lambda a: a["number"])
    return data


def test_runs_read_as_the_serializer_writes_them_in_the_order_asked() -> None:
    task = TaskFactory()
    done, waiting = _varied_runs(task)

    found = runs_json([waiting.pk, done.pk], owner_id=task.owner_id)

    assert [orjson.loads(raw.text) for raw in found] == [_serialized(waiting), _serialized(done)]
    assert orjson.loads(found[1].text)["idempotency_key"] == done.idempotency_key
    page = orjson.loads(ORJSONRenderer().render({"results": found}))
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


TIMES = [
    datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
    datetime(2026, 3, 1, 12, 0, 0, 1200, tzinfo=UTC),  # trailing zeros kept: ".001200"
    datetime(2026, 3, 1, 12, 0, 0, 999999, tzinfo=UTC),
    datetime(1999, 12, 31, 23, 59, 59, 100000, tzinfo=ZoneInfo("America/New_York")),
]


def test_datetimes_and_idempotency_keys_are_written_as_python_writes_them() -> None:
    task_id = "0190d7a1-0000-7000-8000-000000000001"
    drf = serializers.DateTimeField()
    # The reads' fragments, included by a statement of the test's own.
    text = (resources.files("tasks") / "sql" / "api_json.sql").read_text(encoding="utf-8")
    probe = Statements(
        text + "\n-- One time and one key as the reads write them.\n-- name: probe\n"
        "SELECT {iso_time(%(at)s::timestamptz)},"
        " {idempotency_key(%(task)s::uuid, %(at)s::timestamptz)}\n",
        {},
    )["probe"]
    with connection.cursor() as cursor:
        for at in TIMES:
            cursor.execute(probe, {"at": at, "task": task_id})
            assert cursor.fetchone() == (drf.to_representation(at), idempotency_key(task_id, at))
    assert orjson.loads(iso_json(TIMES)) == [drf.to_representation(at) for at in TIMES]


def test_a_tasks_runs_are_its_latest_twenty_begun_runs_as_summaries() -> None:
    task, other = TaskFactory(), TaskFactory(owner=UserFactory())
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

    (found,) = tasks_json([task.pk, other.pk], owner=task.owner, now=base)

    runs = orjson.loads(found.text)["runs"]
    latest = Run.objects.filter(task=task, attempt=1).order_by("-scheduled_at")[:20]
    assert runs == RunSummarySerializer(latest, many=True).data
    assert runs[0]["scheduled_at"] == "2026-03-01T12:22:00.001234Z"  # newest two: not begun
    assert runs[-1]["scheduled_at"] == "2026-03-01T12:03:00Z"


@pytest.mark.parametrize("ahead", [0, 3, 19, 20, 25])
def test_next_runs_list_the_planned_occurrences_first_however_many_lie_ahead(ahead) -> None:
    """The planned occurrences and the history come from the task's newest 25 runs when those
    reach back past `now`, and from probes of their own otherwise; the times agree with
    occurrences.next_runs, the history with tasks/history.py."""
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    task = TaskFactory(
        schedule={"type": "interval", "every": 60, "start_at": "2026-01-01T00:00:00Z"},
        schedule_type="interval",
        next_unplanned_at=now + timedelta(hours=1),
        runs_planned=100,
    )
    for i in range(1, 8):  # history behind `now`, and one retry ahead (not a planned one)
        at = now - timedelta(minutes=i)
        RunFactory(
            task=task, scheduled_at=at, status="succeeded", attempt=1, started_at=at, finished_at=at
        )
    RunFactory(task=task, scheduled_at=now + timedelta(seconds=1), attempt=1)
    for i in range(ahead):  # planned, not started, newest last
        RunFactory(task=task, scheduled_at=now + timedelta(minutes=2 + i, microseconds=i))

    (found,) = tasks_json([task.pk], owner=task.owner, now=now)

    expected = occurrences.next_runs(Task.objects.get(pk=task.pk), now=now, count=5)
    drf = serializers.DateTimeField()
    body = orjson.loads(found.text)
    assert body["next_runs"] == [drf.to_representation(t) for t in expected]
    # The history beside them, however many lie ahead: the retry first (begun), then the past.
    recent = history.recent_runs(task.pk, now=now)
    assert body["runs"] == RunSummarySerializer(recent, many=True).data
    assert len(body["runs"]) == 8 and body["last_run"] == body["runs"][0]
    if ahead:
        assert expected[0] == now + timedelta(minutes=2)
