"""The seed routes (docs/api.md, Endpoints), onto the same services."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from tasks.models import Run, Task
from tests.factories import TaskFactory
from tests.tasks.support import running_run

NOOP = {"kind": "handler", "payload": {"name": "noop"}}


def test_post_with_a_cron_string(api: APIClient) -> None:
    response = api.post("/task", NOOP | {"schedule": "*/5 * * * *"}, format="json")

    assert response.status_code == 201
    body = response.json()
    assert body["task_id"] == body["id"]
    task = Task.objects.get(pk=body["task_id"])
    assert task.schedule["type"] == "cron"
    assert task.schedule["expression"] == "*/5 * * * *"


def test_post_with_empty_schedule_and_delay(api: APIClient) -> None:
    before = datetime.now(UTC)

    response = api.post("/task", NOOP | {"schedule": "", "delay": 120}, format="json")

    assert response.status_code == 201
    task = Task.objects.get(pk=response.json()["task_id"])
    assert task.schedule_type == "once"
    assert (
        before + timedelta(seconds=115) < task.next_unplanned_at < before + timedelta(seconds=125)
    )
    assert not Run.objects.filter(task=task).exists()


def test_post_without_schedule_runs_now(api: APIClient) -> None:
    response = api.post("/task", NOOP | {"schedule": ""}, format="json")

    assert response.status_code == 201
    assert [r["status"] for r in response.json()["history"]] == ["scheduled"]


def test_post_dedup_id_is_the_dedup_key(api: APIClient) -> None:
    first = api.post("/task", NOOP | {"dedup_id": "abc"}, format="json")
    second = api.post("/task", NOOP | {"dedup_id": "abc"}, format="json")

    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["task_id"] == second.json()["task_id"]
    assert Task.objects.get().dedup_key == "abc"


def test_dedup_id_is_free_again_after_delete(api: APIClient) -> None:
    first = api.post("/task", NOOP | {"dedup_id": "abc"}, format="json").json()["task_id"]
    assert api.delete(f"/task/{first}").status_code == 204

    again = api.post("/task", NOOP | {"dedup_id": "abc"}, format="json")
    repeat = api.post("/task", NOOP | {"dedup_id": "abc"}, format="json")

    assert (again.status_code, repeat.status_code) == (201, 200)
    assert again.json()["task_id"] != first
    assert repeat.json()["task_id"] == again.json()["task_id"]
    assert Task.objects.get(pk=again.json()["task_id"]).status == "active"


@pytest.mark.parametrize(("given", "stored"), [("high", 9), ("low", 1), (3, 3)])
def test_post_priority_name_or_number(api: APIClient, given: object, stored: int) -> None:
    response = api.post("/task", NOOP | {"priority": given}, format="json")

    assert response.status_code == 201
    assert Task.objects.get(pk=response.json()["task_id"]).priority == stored


def test_post_multipart_file_is_an_executable(api: APIClient) -> None:
    response = api.post(
        "/task",
        {
            "file": SimpleUploadedFile("run.sh", b"#!/bin/sh\nexit 0\n"),
            "payload": json.dumps({"args": ["x"]}),
            "delay": "30",
            "priority": "high",
        },
        format="multipart",
    )

    assert response.status_code == 201, response.content
    task = Task.objects.get(pk=response.json()["task_id"])
    assert (task.kind, task.priority, task.payload["args"]) == ("executable", 9, ["x"])
    assert task.executable


def test_post_multipart_with_a_cron_string(api: APIClient) -> None:
    response = api.post(
        "/task",
        {"file": SimpleUploadedFile("run.sh", b"#!/bin/sh\n"), "schedule": "0 * * * *"},
        format="multipart",
    )

    assert response.status_code == 201, response.content
    task = Task.objects.get(pk=response.json()["task_id"])
    assert task.schedule["expression"] == "0 * * * *"


def test_post_without_kind_or_file_is_400(api: APIClient, db) -> None:
    response = api.post("/task", {"payload": {"name": "noop"}}, format="json")

    assert response.status_code == 400
    assert "kind" in response.json()


def test_put_task_with_task_id_in_body(api: APIClient, user) -> None:
    task = TaskFactory(owner=user, name="old")

    response = api.put(
        "/task", {"task_id": str(task.id), "name": "new", "priority": "low"}, format="json"
    )

    assert response.status_code == 204, response.content
    assert response.content == b""
    task.refresh_from_db()
    assert (task.name, task.priority) == ("new", 1)


def test_put_task_without_task_id_is_400(api: APIClient, db) -> None:
    response = api.put("/task", {"name": "new"}, format="json")

    assert response.status_code == 400
    assert "task_id" in response.json()


def test_put_status_disable_and_enable(api: APIClient, create: Callable) -> None:
    task = create()

    disabled = api.put("/task/status", {"task_id": task["id"], "status": "disable"}, format="json")

    assert disabled.status_code == 204, disabled.content
    assert Task.objects.get(pk=task["id"]).status == "paused"
    assert not Run.objects.filter(task_id=task["id"]).exists()

    enabled = api.put("/task/status", {"task_id": task["id"], "status": "enable"}, format="json")

    assert enabled.status_code == 204, enabled.content
    assert api.get("/task", {"id": task["id"]}).json()["status"] == "active"
    assert Run.objects.filter(task_id=task["id"], status="scheduled").count() == 1


def test_put_status_rejects_an_unknown_status(api: APIClient, user) -> None:
    task = TaskFactory(owner=user)

    response = api.put("/task/status", {"task_id": str(task.id), "status": "off"}, format="json")

    assert response.status_code == 400
    assert "status" in response.json()


def test_get_task_by_query_id(api: APIClient, create: Callable) -> None:
    task = create(name="seeded")

    response = api.get("/task", {"id": task["id"]})

    assert response.status_code == 200
    body = response.json()
    assert body["task_id"] == task["id"]
    assert body["status"] == "active"
    assert body["detail"]["name"] == "seeded"
    assert body["detail"]["kind"] == "handler"
    assert [h["status"] for h in body["history"]] == ["scheduled"]
    assert body["history"][0]["scheduled_timestamp"] == body["runs"][0]["scheduled_at"]


@pytest.mark.parametrize("query", [{}, {"id": "not-a-uuid"}])
def test_get_task_with_bad_id_is_400(api: APIClient, db, query: dict) -> None:
    response = api.get("/task", query)

    assert response.status_code == 400
    assert "task_id" in response.json()


def test_get_someone_elses_task_is_404(other_api: APIClient, user) -> None:
    task = TaskFactory(owner=user)

    assert other_api.get("/task", {"id": str(task.id)}).status_code == 404
    assert other_api.get(f"/task/{task.id}").status_code == 404
    assert other_api.delete(f"/task?id={task.id}").status_code == 404
    assert other_api.delete(f"/task/{task.id}").status_code == 404
    task.refresh_from_db()
    assert task.status == "active"


def test_delete_task_by_query_id(api: APIClient, create: Callable) -> None:
    task = create()

    response = api.delete(f"/task?id={task['id']}")

    assert response.status_code == 204
    assert Task.objects.get(pk=task["id"]).status == "cancelled"
    assert Run.objects.get(task_id=task["id"]).status == "cancelled"


def test_get_task_by_path(api: APIClient, user) -> None:
    task = TaskFactory(owner=user)

    response = api.get(f"/task/{task.id}")

    assert response.status_code == 200
    assert response.json()["task_id"] == str(task.id)


def test_put_task_by_path_is_204(api: APIClient, user) -> None:
    task = TaskFactory(owner=user)

    response = api.put(f"/task/{task.id}", {"name": "renamed", "priority": 8}, format="json")

    assert response.status_code == 204
    task.refresh_from_db()
    assert (task.name, task.priority) == ("renamed", 8)


def test_put_task_by_path_cancel_next(api: APIClient, create: Callable) -> None:
    task = create()

    response = api.put(f"/task/{task['id']}", {"cancel_next": True}, format="json")

    assert response.status_code == 204
    assert Run.objects.get(task_id=task["id"]).status == "skipped"


def test_delete_task_by_path(api: APIClient, create: Callable) -> None:
    task = create()

    response = api.delete(f"/task/{task['id']}")

    assert response.status_code == 204
    assert Task.objects.get(pk=task["id"]).status == "cancelled"


def test_delete_task_by_path_is_409_while_running(api: APIClient, user) -> None:
    task = TaskFactory(owner=user)
    run = running_run(task)

    response = api.delete(f"/task/{task.id}")

    assert response.status_code == 409
    task.refresh_from_db()
    run.refresh_from_db()
    assert (task.status, run.status) == ("active", "running")


def test_get_tasks_lists_mine(api: APIClient, user, other_user) -> None:
    mine = TaskFactory(owner=user)
    TaskFactory(owner=other_user)

    response = api.get("/tasks")

    assert response.status_code == 200
    assert [t["id"] for t in response.json()["results"]] == [str(mine.id)]


def test_post_tasks_is_not_a_seed_route(api: APIClient, db) -> None:
    response = api.post("/tasks", NOOP, format="json")

    assert response.status_code == 405
    assert not Task.objects.exists()
