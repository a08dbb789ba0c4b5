"""pause, resume, DELETE (cancel), run-now and skip-next on a task."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from rest_framework.test import APIClient

from tasks.models import Attempt, Run, Task
from tests.factories import TaskFactory
from tests.tasks.support import finished_run, running_run


def statuses(task_id: str) -> list[str]:
    return list(
        Run.objects.filter(task_id=task_id)
        .order_by("scheduled_at")
        .values_list("status", flat=True)
    )


def test_pause_withdraws_unstarted_runs_and_resume_plans_them_again(
    api: APIClient, create: Callable
) -> None:
    task = create()
    scheduled_at = Run.objects.get(task_id=task["id"]).scheduled_at

    paused = api.post(f"/api/v1/tasks/{task['id']}/pause")

    assert paused.status_code == 200
    assert paused.json()["status"] == "paused"
    assert paused.json()["next_runs"] == []
    assert statuses(task["id"]) == []
    assert Task.objects.get(pk=task["id"]).next_unplanned_at == scheduled_at

    resumed = api.post(f"/api/v1/tasks/{task['id']}/resume")

    assert resumed.status_code == 200
    assert resumed.json()["status"] == "active"
    run = Run.objects.get(task_id=task["id"])
    assert (run.status, run.scheduled_at) == ("scheduled", scheduled_at)


def test_pause_of_a_recurring_task_withdraws_every_planned_run(
    api: APIClient, create: Callable
) -> None:
    task = create(schedule={"type": "interval", "every": 10})
    assert statuses(task["id"]) == ["scheduled"] * len(statuses(task["id"])) != []

    api.post(f"/api/v1/tasks/{task['id']}/pause")

    assert statuses(task["id"]) == []
    api.post(f"/api/v1/tasks/{task['id']}/resume")
    assert "scheduled" in statuses(task["id"])


def test_pause_keeps_finished_runs(api: APIClient, user) -> None:
    task = TaskFactory(owner=user, next_unplanned_at=None)
    done = finished_run(task, "succeeded")

    api.post(f"/api/v1/tasks/{task.id}/pause")

    done.refresh_from_db()
    assert done.status == "succeeded"


def test_pause_and_resume_are_idempotent(api: APIClient, create: Callable) -> None:
    task = create()

    api.post(f"/api/v1/tasks/{task['id']}/pause")
    again = api.post(f"/api/v1/tasks/{task['id']}/pause")
    assert (again.status_code, again.json()["status"]) == (200, "paused")

    api.post(f"/api/v1/tasks/{task['id']}/resume")
    again = api.post(f"/api/v1/tasks/{task['id']}/resume")
    assert (again.status_code, again.json()["status"]) == (200, "active")
    assert statuses(task["id"]) == ["scheduled"]


def test_delete_cancels_the_task_and_its_scheduled_runs(api: APIClient, create: Callable) -> None:
    task = create(schedule={"type": "interval", "every": 10})

    response = api.delete(f"/api/v1/tasks/{task['id']}")

    assert response.status_code == 204
    stored = Task.objects.get(pk=task["id"])
    assert (stored.status, stored.next_unplanned_at) == ("cancelled", None)
    assert set(statuses(task["id"])) == {"cancelled"}
    assert api.get(f"/api/v1/tasks/{task['id']}").json()["next_runs"] == []


def test_delete_is_409_while_a_run_is_running(api: APIClient, user) -> None:
    task = TaskFactory(owner=user)
    run = running_run(task)

    response = api.delete(f"/api/v1/tasks/{task.id}")

    assert response.status_code == 409
    assert response.json()["code"] == "conflict"
    task.refresh_from_db()
    run.refresh_from_db()
    assert (task.status, run.status) == ("active", "running")


def test_delete_with_force_cancels_the_running_run(api: APIClient, user) -> None:
    task = TaskFactory(owner=user)
    run = running_run(task)

    response = api.delete(f"/api/v1/tasks/{task.id}?force=true")

    assert response.status_code == 204
    task.refresh_from_db()
    run.refresh_from_db()
    assert (task.status, run.status) == ("cancelled", "cancelled")
    assert run.finished_at is not None
    attempt = Attempt.objects.get(run=run)
    assert (attempt.number, attempt.outcome, attempt.worker) == (1, "cancelled", "w-1")


def test_run_now_adds_a_run_and_keeps_the_cadence(api: APIClient, create: Callable) -> None:
    task = create(schedule={"type": "interval", "every": 3600})

    response = api.post(f"/api/v1/tasks/{task['id']}/run-now")

    assert response.status_code == 201
    run = response.json()
    assert (run["task"], run["status"], run["attempt"]) == (task["id"], "scheduled", 0)
    stored = Task.objects.get(pk=task["id"])
    assert stored.next_unplanned_at == datetime.fromisoformat(task["next_run_at"])
    assert stored.runs_planned == 0
    assert api.get(f"/api/v1/tasks/{task['id']}").json()["next_runs"] == task["next_runs"]


def test_run_now_on_a_cancelled_task_is_409(api: APIClient, user) -> None:
    task = TaskFactory(owner=user, status="cancelled")

    response = api.post(f"/api/v1/tasks/{task.id}/run-now")

    assert response.status_code == 409
    assert not Run.objects.filter(task=task).exists()


def test_skip_next_skips_the_planned_run(api: APIClient, create: Callable) -> None:
    task = create()
    planned = Run.objects.get(task_id=task["id"])

    response = api.post(f"/api/v1/tasks/{task['id']}/skip-next")

    assert response.status_code == 200
    assert (response.json()["id"], response.json()["status"]) == (str(planned.id), "skipped")
    planned.refresh_from_db()
    assert planned.status == "skipped"
    assert planned.finished_at is not None


def test_skip_next_records_an_unplanned_occurrence(api: APIClient, create: Callable) -> None:
    task = create(schedule={"type": "interval", "every": 3600})
    first = datetime.fromisoformat(task["next_run_at"])

    response = api.post(f"/api/v1/tasks/{task['id']}/skip-next")

    assert response.status_code == 200
    assert datetime.fromisoformat(response.json()["scheduled_at"]) == first
    assert response.json()["status"] == "skipped"
    assert Task.objects.get(pk=task["id"]).next_unplanned_at == first + timedelta(hours=1)


def test_skip_next_of_the_last_occurrence_completes_the_task(
    api: APIClient, create: Callable
) -> None:
    task = create()

    api.post(f"/api/v1/tasks/{task['id']}/skip-next")

    assert Task.objects.get(pk=task["id"]).status == "completed"


def test_skip_next_is_409_when_nothing_is_left(api: APIClient, create: Callable) -> None:
    task = create()
    api.post(f"/api/v1/tasks/{task['id']}/skip-next")

    response = api.post(f"/api/v1/tasks/{task['id']}/skip-next")

    assert response.status_code == 409
    assert response.json()["code"] == "conflict"
    assert statuses(task["id"]) == ["skipped"]


@pytest.mark.parametrize("verb", ["pause", "resume", "run-now", "skip-next"])
def test_a_task_action_with_a_body_member_is_a_400_naming_it(
    api: APIClient, create: Callable, verb: str
) -> None:
    task = create(schedule={"type": "daily", "at": "03:00"})
    before = statuses(task["id"])

    response = api.post(f"/api/v1/tasks/{task['id']}/{verb}", {"foo": 1}, format="json")

    assert response.status_code == 400, response.content
    assert list(response.json()) == ["foo"]
    assert statuses(task["id"]) == before
    assert api.post(f"/api/v1/tasks/{task['id']}/{verb}", {}, format="json").status_code < 300


@pytest.mark.parametrize("verb", ["cancel", "retry"])
def test_a_run_action_with_a_body_member_is_a_400_naming_it(
    api: APIClient, create: Callable, verb: str
) -> None:
    run = Run.objects.get(task_id=create()["id"])

    response = api.post(f"/api/v1/runs/{run.pk}/{verb}", {"force": True}, format="json")

    assert response.status_code == 400, response.content
    assert list(response.json()) == ["force"]
    assert Run.objects.get(pk=run.pk).status == run.status
