"""POST /api/v1/tasks: every kind, the returned shape, inline planning, dedup and priorities."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from tasks.models import Run, Task

TASK_FIELDS = {
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
}


def parse(value: str) -> datetime:
    assert value.endswith("Z"), value
    return datetime.fromisoformat(value)


def test_handler_task_answers_the_api_shape(api: APIClient, user) -> None:
    response = api.post(
        "/api/v1/tasks",
        {"name": "nightly", "kind": "handler", "payload": {"name": "echo", "args": {"x": 1}}},
        format="json",
    )

    assert response.status_code == 201
    body = response.json()
    assert TASK_FIELDS <= set(body)
    assert body["owner"] == user.username
    assert body["name"] == "nightly"
    assert body["kind"] == "handler"
    assert body["payload"] == {"name": "echo", "args": {"x": 1}}
    assert body["status"] == "active"
    assert body["priority"] == 5
    assert body["max_attempts"] == 5
    assert body["schedule"]["type"] == "once"
    assert abs(parse(body["created_at"]) - datetime.now(UTC)) < timedelta(seconds=30)
    task = Task.objects.get(pk=body["id"])
    assert task.owner == user


def test_once_now_creates_a_due_run_at_once(create: Callable[..., dict]) -> None:
    body = create()

    assert [run["status"] for run in body["runs"]] == ["scheduled"]
    assert set(body["runs"][0]) >= {"id", "scheduled_at", "status", "attempt", "started_at"}
    # Nothing is left to plan for a one-time task whose run exists.
    assert body["next_run_at"] is None
    assert body["next_runs"] == []
    run = Run.objects.get(task_id=body["id"])
    assert run.status == "scheduled"
    assert run.execute_at <= datetime.now(UTC)


def test_once_with_delay_plans_nothing_yet(create: Callable[..., dict]) -> None:
    before = datetime.now(UTC)

    body = create(schedule={"type": "once", "delay": 60})

    assert body["runs"] == []
    assert not Run.objects.filter(task_id=body["id"]).exists()
    next_run_at = parse(body["next_run_at"])
    assert before + timedelta(seconds=55) < next_run_at < before + timedelta(seconds=65)
    assert [parse(at) for at in body["next_runs"]] == [next_run_at]


def test_recurring_task_lists_its_next_five_fire_times(create: Callable[..., dict]) -> None:
    body = create(schedule={"type": "interval", "every": 3600})

    times = [parse(at) for at in body["next_runs"]]
    assert len(times) == 5
    assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(times))
    assert parse(body["next_run_at"]) == times[0]


def test_http_task(create: Callable[..., dict]) -> None:
    body = create(
        kind="http",
        payload={
            "method": "post",
            "url": "http://127.0.0.1:9/hook",
            "headers": {"X-A": "1"},
            "body": {"k": "v"},
            "expect_status": [200, 204],
        },
    )

    assert body["kind"] == "http"
    assert body["payload"]["method"] == "POST"
    assert body["payload"]["url"] == "http://127.0.0.1:9/hook"
    assert body["payload"]["expect_status"] == [200, 204]


def test_executable_task_from_multipart(api: APIClient) -> None:
    script = SimpleUploadedFile("job.sh", b"#!/bin/sh\necho hi\n")

    response = api.post(
        "/api/v1/tasks",
        {
            "kind": "executable",
            "name": "script",
            "payload": json.dumps({"args": ["--fast"], "env": {"A": "1"}}),
            "schedule": json.dumps({"type": "interval", "every": 600}),
            "priority": "high",
            "file": script,
        },
        format="multipart",
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["kind"] == "executable"
    assert body["payload"] == {"args": ["--fast"], "env": {"A": "1"}}
    assert body["schedule"]["type"] == "interval"
    assert body["schedule"]["every"] == 600
    assert body["priority"] == 9
    assert body["executable"].startswith("job")
    task = Task.objects.get(pk=body["id"])
    with task.executable.open("rb") as stored:
        assert stored.read() == b"#!/bin/sh\necho hi\n"


def test_dedup_key_repeated_returns_the_same_task(api: APIClient) -> None:
    body = {"kind": "handler", "payload": {"name": "noop"}, "dedup_key": "report-2025"}
    first = api.post("/api/v1/tasks", body, format="json")

    second = api.post("/api/v1/tasks", body | {"name": "changed"}, format="json")

    assert first.status_code == 201
    assert second.status_code == 200
    assert second.json()["id"] == first.json()["id"]
    assert Task.objects.filter(dedup_key="report-2025").count() == 1
    assert Run.objects.filter(task_id=first.json()["id"]).count() == 1


def test_a_deleted_tasks_dedup_key_is_free_again(api: APIClient) -> None:
    body = {"kind": "handler", "payload": {"name": "noop"}, "dedup_key": "nightly"}
    first = api.post("/api/v1/tasks", body, format="json").json()
    assert api.delete(f"/api/v1/tasks/{first['id']}").status_code == 204

    again = api.post("/api/v1/tasks", body, format="json")
    repeat = api.post("/api/v1/tasks", body, format="json")

    assert again.status_code == 201
    assert again.json()["id"] != first["id"]
    assert again.json()["status"] == "active"
    assert repeat.status_code == 200
    assert repeat.json()["id"] == again.json()["id"]
    statuses = Task.objects.filter(dedup_key="nightly").values_list("status", flat=True)
    assert sorted(statuses) == ["active", "cancelled"]


def test_batch_create_reuses_no_deleted_tasks_key(api: APIClient) -> None:
    body = {"kind": "handler", "payload": {"name": "noop"}, "dedup_key": "b"}
    first = api.post("/api/v1/tasks", body, format="json").json()
    api.delete(f"/api/v1/tasks/{first['id']}")

    response = api.post("/api/v1/tasks/batch", {"tasks": [body, body]}, format="json")

    assert response.status_code == 201, response.content
    ids = set(response.json()["ids"])
    assert len(ids) == 1
    assert first["id"] not in ids


def test_dedup_key_is_per_owner(api: APIClient, other_api: APIClient) -> None:
    body = {"kind": "handler", "payload": {"name": "noop"}, "dedup_key": "shared"}

    mine = api.post("/api/v1/tasks", body, format="json")
    theirs = other_api.post("/api/v1/tasks", body, format="json")

    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert mine.json()["id"] != theirs.json()["id"]


def test_without_dedup_key_two_creates_make_two_tasks(create: Callable[..., dict]) -> None:
    assert create()["id"] != create()["id"]
    assert Task.objects.count() == 2


@pytest.mark.parametrize(
    ("given", "stored"),
    [("low", 1), ("medium", 5), ("high", 9), ("HIGH", 9), (0, 0), (9, 9), ("7", 7)],
)
def test_priority_names_and_numbers(
    create: Callable[..., dict], given: object, stored: int
) -> None:
    body = create(priority=given)

    assert body["priority"] == stored
    assert Run.objects.get(task_id=body["id"]).priority == stored


def test_retry_policy_timeout_and_max_attempts(create: Callable[..., dict]) -> None:
    body = create(max_attempts=3, retry_backoff={"base": 1, "cap": 30}, timeout=12.5)

    assert body["max_attempts"] == 3
    assert body["retry_backoff"] == {"base": 1.0, "cap": 30.0}
    assert body["timeout"] == 12.5
    assert Run.objects.get(task_id=body["id"]).max_attempts == 3


def test_once_at_a_past_time_still_runs(create: Callable[..., dict]) -> None:
    past = datetime.now(UTC) - timedelta(hours=2)

    body = create(schedule={"type": "once", "run_at": past.isoformat()})

    assert [run["status"] for run in body["runs"]] == ["scheduled"]
    assert abs(parse(body["runs"][0]["scheduled_at"]) - past) < timedelta(seconds=1)


def test_times_are_answered_in_utc(create: Callable[..., dict]) -> None:
    body = create(schedule={"type": "once", "run_at": "2030-01-01T12:00:00+02:00"})

    assert body["next_run_at"] == "2030-01-01T10:00:00Z"


def test_executable_file_over_the_limit_is_413(api: APIClient, settings) -> None:
    # Stopped while it streams in (scheduler_project/middleware.py), a JSON 413.
    settings.SCHEDULER_MAX_UPLOAD_BYTES = 8

    response = api.post(
        "/api/v1/tasks",
        {"kind": "executable", "file": SimpleUploadedFile("big.sh", b"#!/bin/sh\n" * 10)},
        format="multipart",
    )

    assert response.status_code == 413
    assert response.json()["code"] == "request_too_large"
    assert not Task.objects.exists()


def test_multipart_create_accepts_notify_as_json_text(api: APIClient, user) -> None:
    from notifications.models import Channel

    channel = Channel.objects.create(
        owner=user, kind=Channel.Kind.EMAIL, config={"address": "ops@example.com"}
    )
    notify = [{"channel": str(channel.id), "events": ["failed"]}]

    response = api.post(
        "/api/v1/tasks",
        {
            "kind": "executable",
            "file": SimpleUploadedFile("job.sh", b"#!/bin/sh\ntrue\n"),
            "notify": json.dumps(notify),
        },
        format="multipart",
    )
    bad = api.post(
        "/api/v1/tasks",
        {"kind": "executable", "file": SimpleUploadedFile("j.sh", b"x"), "notify": "[not json"},
        format="multipart",
    )

    assert response.status_code == 201, response.content
    assert response.json()["notify"] == notify
    assert bad.status_code == 400 and "notify" in bad.json()


def test_upload_route_creates_an_executable_task(api: APIClient) -> None:
    body = {
        "file": SimpleUploadedFile("job.sh", b"#!/bin/sh\necho hi\n"),
        "schedule": json.dumps({"type": "once", "delay": 60}),
        "payload": json.dumps({"args": ["a"]}),
    }
    response = api.post("/api/v1/tasks/upload", body, format="multipart")
    as_json = api.post("/api/v1/tasks/upload", {"kind": "handler"}, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["kind"] == "executable"
    assert response.json()["payload"]["args"] == ["a"]
    assert as_json.status_code == 415
