"""GET, list, PATCH/PUT of tasks; someone else's ids answer 404 on every route."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from tasks.models import Run, Task
from tests.factories import RunFactory, TaskFactory
from tests.tasks.support import running_run


def test_get_returns_the_task_with_its_runs(api: APIClient, user) -> None:
    task = TaskFactory(owner=user, name="mine")
    base = datetime(2020, 1, 1, tzinfo=UTC)  # due: history (runs ahead are next_runs)
    runs = [RunFactory(task=task, scheduled_at=base + timedelta(minutes=i)) for i in range(3)]

    response = api.get(f"/api/v1/tasks/{task.id}")

    assert response.status_code == 200
    body = response.json()
    assert body["id"] == str(task.id)
    assert body["name"] == "mine"
    # Most recent first.
    assert [r["id"] for r in body["runs"]] == [str(r.id) for r in reversed(runs)]


def test_get_caps_runs_at_twenty(api: APIClient, user) -> None:
    task = TaskFactory(owner=user)
    base = datetime(2020, 1, 1, tzinfo=UTC)
    for i in range(25):
        RunFactory(task=task, scheduled_at=base + timedelta(minutes=i))

    assert len(api.get(f"/api/v1/tasks/{task.id}").json()["runs"]) == 20
    listed = api.get("/api/v1/tasks").json()["results"][0]
    assert len(listed["runs"]) == 20
    assert listed["runs"][0]["scheduled_at"] == "2020-01-01T00:24:00Z"


def test_unknown_id_is_404(api: APIClient, db) -> None:
    response = api.get("/api/v1/tasks/0190a0a0-0000-7000-8000-000000000000")

    assert response.status_code == 404
    assert set(response.json()) == {"detail", "code"}


def test_list_is_paginated_and_only_mine(api: APIClient, user, other_user) -> None:
    mine = [TaskFactory(owner=user) for _ in range(3)]
    TaskFactory(owner=other_user)

    response = api.get("/api/v1/tasks", {"page_size": 2})

    assert response.status_code == 200
    body = response.json()
    assert set(body) >= {"count", "next", "previous", "results"}
    assert body["count"] == 3
    assert len(body["results"]) == 2
    assert body["previous"] is None
    assert body["next"]
    second = api.get(body["next"]).json()
    ids = {t["id"] for t in body["results"] + second["results"]}
    assert ids == {str(t.id) for t in mine}
    assert second["next"] is None


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"status": "paused"}, ["b"]),
        ({"kind": "http"}, ["c"]),
        ({"priority": 9}, ["c"]),
        ({"name": "ALP"}, ["alpha"]),
    ],
)
def test_list_filters(api: APIClient, user, query: dict, expected: list[str]) -> None:
    TaskFactory(owner=user, name="alpha")
    TaskFactory(owner=user, name="b", status="paused")
    TaskFactory(
        owner=user,
        name="c",
        kind="http",
        priority=9,
        payload={"method": "GET", "url": "http://127.0.0.1:9/"},
    )

    response = api.get("/api/v1/tasks", query)

    assert response.status_code == 200
    assert [t["name"] for t in response.json()["results"]] == expected


def test_list_rejects_an_unknown_status_filter(api: APIClient, db) -> None:
    response = api.get("/api/v1/tasks", {"status": "sleeping"})

    assert response.status_code == 400
    assert "status" in response.json()


def test_list_ordering(api: APIClient, user) -> None:
    for name, priority in (("x", 3), ("y", 9), ("z", 1)):
        TaskFactory(owner=user, name=name, priority=priority)

    by_priority = api.get("/api/v1/tasks", {"ordering": "-priority"}).json()["results"]
    by_name = api.get("/api/v1/tasks", {"ordering": "name"}).json()["results"]
    default = api.get("/api/v1/tasks").json()["results"]

    assert [t["name"] for t in by_priority] == ["y", "x", "z"]
    assert [t["name"] for t in by_name] == ["x", "y", "z"]
    assert [t["name"] for t in default] == ["z", "y", "x"]  # newest first


def test_patch_changes_name_priority_and_payload(api: APIClient, create: Callable) -> None:
    task = create()

    response = api.patch(
        f"/api/v1/tasks/{task['id']}",
        {"name": "renamed", "priority": "low", "payload": {"name": "echo", "args": {"a": 1}}},
        format="json",
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["name"], body["priority"]) == ("renamed", 1)
    assert body["payload"] == {"name": "echo", "args": {"a": 1}}
    # The run not yet started takes the new priority.
    assert Run.objects.get(task_id=task["id"]).priority == 1
    stored = Task.objects.get(pk=task["id"])
    assert (stored.name, stored.priority, stored.payload["name"]) == ("renamed", 1, "echo")


def test_patch_schedule_replans_unstarted_runs(api: APIClient, create: Callable) -> None:
    task = create()
    old_run = Run.objects.get(task_id=task["id"])
    later = datetime.now(UTC) + timedelta(hours=1)

    response = api.patch(
        f"/api/v1/tasks/{task['id']}",
        {"schedule": {"type": "once", "run_at": later.isoformat()}},
        format="json",
    )

    assert response.status_code == 200
    assert not Run.objects.filter(pk=old_run.pk).exists()
    assert not Run.objects.filter(task_id=task["id"]).exists()
    next_run_at = datetime.fromisoformat(response.json()["next_run_at"])
    assert abs(next_run_at - later) < timedelta(seconds=1)

    back = api.patch(
        f"/api/v1/tasks/{task['id']}", {"schedule": {"type": "once", "delay": 0}}, format="json"
    )

    assert back.status_code == 200
    run = Run.objects.get(task_id=task["id"])
    assert run.status == "scheduled"
    assert run.scheduled_at < later - timedelta(minutes=50)


def test_patch_keeps_finished_runs(api: APIClient, user) -> None:
    task = TaskFactory(owner=user, schedule={"type": "interval", "every": 60})
    done = RunFactory(task=task, status="succeeded", attempt=1, finished_at=datetime.now(UTC))

    response = api.patch(
        f"/api/v1/tasks/{task.id}", {"schedule": {"type": "interval", "every": 120}}, format="json"
    )

    assert response.status_code == 200
    done.refresh_from_db()
    assert done.status == "succeeded"


def test_patch_is_409_while_a_one_time_run_is_running(api: APIClient, user) -> None:
    task = TaskFactory(owner=user, name="before")
    running_run(task)

    response = api.patch(f"/api/v1/tasks/{task.id}", {"name": "after"}, format="json")

    assert response.status_code == 409
    assert response.json()["code"] == "conflict"
    task.refresh_from_db()
    assert task.name == "before"


def test_put_replaces_the_task(api: APIClient, create: Callable) -> None:
    task = create(name="first")

    response = api.put(
        f"/api/v1/tasks/{task['id']}",
        {"kind": "handler", "payload": {"name": "sleep", "args": {"seconds": 1}}, "name": "second"},
        format="json",
    )

    assert response.status_code == 200
    assert response.json()["payload"]["name"] == "sleep"
    assert Task.objects.get(pk=task["id"]).name == "second"


def test_put_without_kind_is_400(api: APIClient, create: Callable) -> None:
    task = create()

    response = api.put(f"/api/v1/tasks/{task['id']}", {"name": "x"}, format="json")

    assert response.status_code == 400
    assert "kind" in response.json()


OTHERS_ROUTES = [
    ("get", "/api/v1/tasks/{task}", None),
    ("patch", "/api/v1/tasks/{task}", {"name": "stolen"}),
    ("put", "/api/v1/tasks/{task}", {"kind": "handler", "payload": {"name": "noop"}}),
    ("delete", "/api/v1/tasks/{task}", None),
    ("post", "/api/v1/tasks/{task}/pause", None),
    ("post", "/api/v1/tasks/{task}/resume", None),
    ("post", "/api/v1/tasks/{task}/run-now", None),
    ("post", "/api/v1/tasks/{task}/skip-next", None),
    ("get", "/api/v1/tasks/{task}/runs", None),
    ("get", "/api/v1/runs/{run}", None),
    ("post", "/api/v1/runs/{run}/cancel", None),
    ("post", "/api/v1/runs/{run}/retry", None),
]


@pytest.mark.parametrize(("method", "path", "body"), OTHERS_ROUTES)
def test_someone_elses_task_is_404(
    other_api: APIClient,
    user,
    method: str,
    path: str,
    body: dict | None,
) -> None:
    task = TaskFactory(owner=user, name="theirs")
    run = RunFactory(task=task, status="failed", attempt=1, finished_at=datetime.now(UTC))

    response = getattr(other_api, method)(
        path.format(task=task.id, run=run.id), body, format="json"
    )

    assert response.status_code == 404
    task.refresh_from_db()
    run.refresh_from_db()
    assert (task.name, task.status, run.status) == ("theirs", "active", "failed")
    assert Run.objects.filter(task=task).count() == 1


def test_someone_elses_id_answers_as_an_unknown_id(other_api: APIClient, user) -> None:
    task = TaskFactory(owner=user)

    theirs = other_api.get(f"/api/v1/tasks/{task.id}")
    unknown = other_api.get("/api/v1/tasks/0190a0a0-0000-7000-8000-000000000000")

    assert (theirs.status_code, theirs.json()) == (unknown.status_code, unknown.json())


def test_someone_elses_task_is_not_listed(other_api: APIClient, user) -> None:
    TaskFactory(owner=user)

    assert other_api.get("/api/v1/tasks").json()["count"] == 0


def test_patch_notify_entry_without_channel_is_a_400(api: APIClient, create: Callable) -> None:
    task = create(kind="handler", payload={"name": "noop"})

    response = api.patch(
        f"/api/v1/tasks/{task['id']}", {"notify": [{"events": ["failed"]}]}, format="json"
    )

    assert response.status_code == 400
    assert "channel" in str(response.json()["notify"])


def test_list_pages_keep_the_order_asked_and_a_page_past_the_end_is_404(api, user) -> None:
    for name in ("b", "d", "a", "c", "e"):
        TaskFactory(owner=user, name=name)

    first = api.get("/api/v1/tasks", {"ordering": "name", "page_size": 2}).json()
    second = api.get("/api/v1/tasks", {"ordering": "-name", "page_size": 2, "page": 2}).json()

    assert [t["name"] for t in first["results"]] == ["a", "b"]
    assert [t["name"] for t in second["results"]] == ["c", "b"]
    assert api.get("/api/v1/tasks", {"page_size": 2, "page": 4}).status_code == 404
    assert api.get("/api/v1/tasks", {"name": "nothing"}).json() == {
        "count": 0,
        "next": None,
        "previous": None,
        "results": [],
    }
