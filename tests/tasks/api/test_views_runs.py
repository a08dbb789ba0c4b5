"""Runs: a task's history, one run with its attempts, cancel and retry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from tasks.models import Attempt, Run
from tests.factories import RunFactory, TaskFactory
from tests.tasks.support import finished_run, running_run

BASE = datetime(2030, 1, 1, tzinfo=UTC)


def test_task_runs_are_paginated_newest_first(api: APIClient, user) -> None:
    task = TaskFactory(owner=user)
    runs = [RunFactory(task=task, scheduled_at=BASE + timedelta(minutes=i)) for i in range(5)]
    RunFactory(task=TaskFactory(owner=user))  # another task's run is not listed

    response = api.get(f"/api/v1/tasks/{task.id}/runs", {"page_size": 3})

    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 5
    assert body["previous"] is None and body["next"]
    assert [r["id"] for r in body["results"]] == [str(r.id) for r in runs[::-1][:3]]
    rest = api.get(body["next"]).json()["results"]
    assert [r["id"] for r in rest] == [str(runs[1].id), str(runs[0].id)]


def test_task_runs_filter_by_status(api: APIClient, user) -> None:
    task = TaskFactory(owner=user)
    failed = finished_run(task, "failed", scheduled_at=BASE)
    RunFactory(task=task, scheduled_at=BASE + timedelta(minutes=1))

    response = api.get(f"/api/v1/tasks/{task.id}/runs", {"status": "failed"})

    assert [r["id"] for r in response.json()["results"]] == [str(failed.id)]


def test_task_runs_of_an_unknown_task_is_404(api: APIClient, db) -> None:
    response = api.get("/api/v1/tasks/0190a0a0-0000-7000-8000-000000000000/runs")

    assert response.status_code == 404


def test_run_detail_has_attempts_and_idempotency_key(api: APIClient, user) -> None:
    task = TaskFactory(owner=user)
    at = datetime(2030, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    run = finished_run(task, "failed", scheduled_at=at, attempt=2, error="boom", exit_code=3)
    for number in (1, 2):
        Attempt.objects.create(
            run=run,
            number=number,
            worker="w-1",
            started_at=at,
            finished_at=at + timedelta(seconds=number),
            outcome="failed",
            error=f"boom {number}",
            exit_code=3,
        )

    response = api.get(f"/api/v1/runs/{run.id}")

    assert response.status_code == 200
    body = response.json()
    assert body["idempotency_key"] == f"{task.id}:2030-05-06T07:08:09.123456Z"
    assert (body["task"], body["status"], body["attempt"]) == (str(task.id), "failed", 2)
    assert (body["error"], body["exit_code"]) == ("boom", 3)
    assert body["scheduled_at"] == "2030-05-06T07:08:09.123456Z"
    assert [(a["number"], a["outcome"], a["error"]) for a in body["attempts"]] == [
        (1, "failed", "boom 1"),
        (2, "failed", "boom 2"),
    ]
    assert set(body["attempts"][0]) >= {"number", "started", "finished", "outcome", "error"}


def test_cancel_a_scheduled_run(api: APIClient, user) -> None:
    task = TaskFactory(owner=user, schedule_type="interval", next_unplanned_at=BASE)
    run = RunFactory(task=task)

    response = api.post(f"/api/v1/runs/{run.id}/cancel")

    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert run.finished_at is not None
    task.refresh_from_db()
    assert task.status == "active"  # more occurrences remain


def test_cancelling_the_last_run_completes_the_task(api: APIClient, user) -> None:
    task = TaskFactory(owner=user, next_unplanned_at=None)
    run = RunFactory(task=task)

    api.post(f"/api/v1/runs/{run.id}/cancel")

    task.refresh_from_db()
    assert task.status == "completed"


def test_cancel_a_running_run_records_a_cancelled_attempt(api: APIClient, user) -> None:
    run = running_run(TaskFactory(owner=user))

    response = api.post(f"/api/v1/runs/{run.id}/cancel")

    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert [a["outcome"] for a in response.json()["attempts"]] == ["cancelled"]


@pytest.mark.parametrize("status", ["succeeded", "failed", "cancelled", "skipped"])
def test_cancel_a_finished_run_is_409(api: APIClient, user, status: str) -> None:
    run = finished_run(TaskFactory(owner=user), status)

    response = api.post(f"/api/v1/runs/{run.id}/cancel")

    assert response.status_code == 409
    assert response.json()["code"] == "conflict"
    run.refresh_from_db()
    assert run.status == status


@pytest.mark.parametrize("status", ["failed", "cancelled"])
def test_retry_schedules_the_run_again(api: APIClient, user, status: str) -> None:
    task = TaskFactory(owner=user, max_attempts=3, status="completed")
    run = finished_run(task, status, attempt=3, max_attempts=3, error="boom", worker="w-1")

    response = api.post(f"/api/v1/runs/{run.id}/retry")

    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["max_attempts"], body["error"]) == ("scheduled", 6, "")
    run.refresh_from_db()
    assert (run.status, run.finished_at, run.worker) == ("scheduled", None, "")
    assert run.execute_at > datetime.now(UTC) - timedelta(minutes=1)
    task.refresh_from_db()
    assert task.status == "active"


@pytest.mark.parametrize("status", ["succeeded", "skipped", "scheduled"])
def test_retry_of_a_run_that_did_not_fail_is_409(api: APIClient, user, status: str) -> None:
    task = TaskFactory(owner=user)
    run = RunFactory(task=task) if status == "scheduled" else finished_run(task, status)

    response = api.post(f"/api/v1/runs/{run.id}/retry")

    assert response.status_code == 409
    run.refresh_from_db()
    assert run.status == status


def test_retry_of_a_running_run_is_409(api: APIClient, user) -> None:
    run = running_run(TaskFactory(owner=user))

    assert api.post(f"/api/v1/runs/{run.id}/retry").status_code == 409


def test_unknown_run_is_404(api: APIClient, db) -> None:
    missing = "0190a0a0-0000-7000-8000-000000000000"

    assert api.get(f"/api/v1/runs/{missing}").status_code == 404
    assert api.post(f"/api/v1/runs/{missing}/cancel").status_code == 404
    assert api.post(f"/api/v1/runs/{missing}/retry").status_code == 404


def test_retry_of_a_run_of_a_cancelled_task_is_409(api: APIClient, create) -> None:
    task = create()
    api.delete(f"/api/v1/tasks/{task['id']}")
    run = Run.objects.get(task_id=task["id"])
    assert run.status == "cancelled"

    response = api.post(f"/api/v1/runs/{run.id}/retry")

    assert response.status_code == 409
    run.refresh_from_db()
    assert run.status == "cancelled"
