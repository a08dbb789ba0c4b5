"""A task as every read returns it: the JSON PostgreSQL writes, with `next_runs` from Python."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest
from django.core.files.base import ContentFile

from tasks.api.json_sql import task_json, tasks_json
from tasks.api.serializers import TaskOutputSerializer
from tasks.models import CalendarFeed
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db

AT = datetime(2026, 5, 4, 3, 2, 1, tzinfo=UTC)


def _read(task, now=AT) -> dict:
    found = task_json(task.pk, owner=task.owner, now=now)
    assert found is not None
    data = orjson.loads(found.text)
    assert list(data) == TaskOutputSerializer.Meta.fields  # the schema's order
    return data


def test_every_field_of_a_recurring_task(settings) -> None:
    settings.SCHEDULER_PUBLIC_URL = "http://feeds.example/"
    owner = UserFactory(username="ada")
    task = TaskFactory(
        owner=owner,
        name="every minute",
        dedup_key="nightly",
        payload={"name": "noop", "args": {"x": [1, None, "caf\u00e9"]}},
        schedule={"type": "interval", "every": 60, "start_at": "2026-05-04T03:02:01Z"},
        schedule_type="interval",
        next_unplanned_at=AT + timedelta(minutes=2),
        runs_planned=2,
        timeout=12.5,
        priority=9,
        max_attempts=3,
        notify=[{"channel": "c", "events": ["failed"]}],
        retry_backoff_base=1.5,
        retry_backoff_cap=60,
        resources={"cpu": "500m", "memory": "256Mi"},
        on_zombie="cancel",
    )
    done = RunFactory(
        task=task,
        scheduled_at=AT,
        status="succeeded",
        attempt=1,
        started_at=AT,
        finished_at=AT + timedelta(seconds=1),
    )
    planned = RunFactory(task=task, scheduled_at=AT + timedelta(minutes=1))
    task.refresh_from_db()

    data = _read(task, now=AT + timedelta(seconds=30))

    assert data == {
        "id": str(task.pk),
        "owner": "ada",
        "name": "every minute",
        "dedup_key": "nightly",
        "kind": "handler",
        "payload": {"name": "noop", "args": {"x": [1, None, "caf\u00e9"]}},
        "executable": None,
        # A recurring schedule shows the misfire grace that applies: here the default.
        "schedule": {**task.schedule, "misfire_grace": 60},
        "priority": 9,
        "max_attempts": 3,
        "retry_backoff": {"base": 1.5, "cap": 60},
        "timeout": 12.5,
        "notify": [{"channel": "c", "events": ["failed"]}],
        "resources": {"cpu": "500m", "memory": "256Mi"},
        "concurrency": None,
        "rate_limit": None,
        "on_zombie": "cancel",
        "expect": {},
        "status": "active",
        "health": "up",
        "taskset": None,
        "key": None,
        "team": None,
        "describe": "Every minute",
        "last_run": {
            "id": str(done.pk),
            "scheduled_at": "2026-05-04T03:02:01Z",
            "status": "succeeded",
            "attempt": 1,
            "started_at": "2026-05-04T03:02:01Z",
            "finished_at": "2026-05-04T03:02:02Z",
        },
        # The next fire time: the planned run, not the planner's cursor (03:04:01).
        "next_run_at": "2026-05-04T03:03:01Z",
        # The planned run first, then the schedule's fire times from the cursor.
        "next_runs": [
            "2026-05-04T03:03:01Z",
            "2026-05-04T03:04:01Z",
            "2026-05-04T03:05:01Z",
            "2026-05-04T03:06:01Z",
            "2026-05-04T03:07:01Z",
        ],
        "next_runs_detail": [
            {"scheduled_at": "2026-05-04T03:03:01Z", "run_id": str(planned.pk)},
            {"scheduled_at": "2026-05-04T03:04:01Z", "run_id": None},
            {"scheduled_at": "2026-05-04T03:05:01Z", "run_id": None},
            {"scheduled_at": "2026-05-04T03:06:01Z", "run_id": None},
            {"scheduled_at": "2026-05-04T03:07:01Z", "run_id": None},
        ],
        # The owner's feed token was made by this first read.
        "calendar_url": "http://feeds.example/api/v1/tasks/"
        f"{task.pk}/calendar.ics?token={CalendarFeed.objects.get(owner=owner).token}",
        # Begun runs only: the planned one is among next_runs.
        "runs": [
            {
                "id": str(done.pk),
                "scheduled_at": "2026-05-04T03:02:01Z",
                "status": "succeeded",
                "attempt": 1,
                "started_at": "2026-05-04T03:02:01Z",
                "finished_at": "2026-05-04T03:02:02Z",
            },
        ],
        "created_at": task.created_at.isoformat().replace("+00:00", "Z"),
        "updated_at": task.updated_at.isoformat().replace("+00:00", "Z"),
    }


def test_paused_executable_and_one_time_tasks() -> None:
    paused = TaskFactory(status="paused", next_unplanned_at=AT + timedelta(hours=1))
    binary = TaskFactory(kind="executable", payload={"args": ["-v"]})
    binary.executable.save("tool.sh", ContentFile(b"#!/bin/sh\n"), save=True)
    once = TaskFactory(
        schedule={"type": "once", "run_at": "2026-05-04T04:00:00Z"},
        next_unplanned_at=datetime(2026, 5, 4, 4, tzinfo=UTC),
    )

    assert _read(paused)["next_runs"] == []  # only an active task runs
    assert _read(binary)["executable"] == "tool.sh"  # as uploaded; the key is the hash
    assert (_read(paused)["next_run_at"], _read(paused)["next_runs_detail"]) == (None, [])
    assert _read(paused)["last_run"] is None
    assert _read(binary)["timeout"] is None
    assert _read(once)["next_runs"] == ["2026-05-04T04:00:00Z"]
    assert _read(once)["runs"] == []


def test_only_the_owners_tasks_in_the_order_asked() -> None:
    owner = UserFactory()
    first, second = TaskFactory(owner=owner), TaskFactory(owner=owner)
    stranger = TaskFactory()

    found = tasks_json([second.pk, stranger.pk, first.pk], owner=owner, now=AT)

    assert [orjson.loads(raw.text)["id"] for raw in found] == [str(second.pk), str(first.pk)]
    assert task_json(stranger.pk, owner=owner, now=AT) is None
    assert tasks_json([], owner=owner, now=AT) == []
