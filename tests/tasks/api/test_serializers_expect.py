"""A task's `expect` on create, update, batch and the seed routes; `health` as the task shows it."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tasks.models import Task, TaskHealth

NOOP = {"kind": "handler", "payload": {"name": "noop"}}
EXPECT = {
    "start_within": 2,
    "duration": {"min": 5, "max": 60},
    "failure_streak": 3,
    "success_within": 3600,
    "repeat_every": 600,
}


def test_a_task_shows_its_expectations_and_is_up(api: APIClient) -> None:
    body = api.post("/api/v1/tasks", NOOP | {"expect": EXPECT}, format="json").json()

    assert body["expect"] == EXPECT
    assert body["health"] == "up"
    row = TaskHealth.objects.get(task_id=body["id"])
    assert (row.start_within, row.min_duration, row.max_duration) == (2, 5, 60)
    assert (row.failure_streak, row.success_within, row.repeat_every) == (3, 3600, 600)


def test_a_task_without_expectations_has_no_health_row(api: APIClient) -> None:
    body = api.post("/api/v1/tasks", NOOP, format="json").json()

    assert (body["expect"], body["health"]) == ({}, "up")
    assert not TaskHealth.objects.filter(task_id=body["id"]).exists()


def test_patch_replaces_and_null_clears_the_expectations(api: APIClient) -> None:
    task = api.post("/api/v1/tasks", NOOP | {"expect": EXPECT}, format="json").json()

    changed = api.patch(
        f"/api/v1/tasks/{task['id']}", {"expect": {"failure_streak": 2}}, format="json"
    )
    assert changed.json()["expect"] == {"failure_streak": 2}
    row = TaskHealth.objects.get(task_id=task["id"])
    assert (row.failure_streak, row.start_within, row.max_duration) == (2, None, None)

    cleared = api.patch(f"/api/v1/tasks/{task['id']}", {"expect": None}, format="json")
    assert cleared.json()["expect"] == {}
    assert not TaskHealth.objects.filter(task_id=task["id"]).exists()


@pytest.mark.parametrize(
    ("expect", "error"),
    [
        ({"duration": {"min": -1}}, {"duration": {"min": ["Ensure"]}}),
        ({"duration": {"min": 5, "max": 2}}, {"duration": {"max": ["Must be at least min."]}}),
        ({"duration": {"mean": 5}}, {"duration": {"mean": ["Unknown field"]}}),
        ({"start_within": "soon"}, {"start_within": ["A valid number"]}),
        ({"failure_streak": 0}, {"failure_streak": ["Ensure"]}),
        ({"success_in": 5}, {"success_in": ["Unknown field"]}),
        ([1], {"non_field_errors": ["Invalid data"]}),
    ],
)
def test_bad_expectations_are_a_400_naming_the_field(
    api: APIClient, expect: object, error: dict
) -> None:
    response = api.post("/api/v1/tasks", NOOP | {"name": "bad", "expect": expect}, format="json")

    assert response.status_code == 400
    found = response.json()["expect"]

    def starts(got: object, want: object) -> None:
        if isinstance(want, dict):
            assert isinstance(got, dict) and set(got) == set(want), got
            for key in want:
                starts(got[key], want[key])
        else:
            assert isinstance(got, list) and got[0].startswith(want[0]), got  # type: ignore[index]

    starts(found, error)
    assert not Task.objects.filter(name="bad").exists()


def test_the_batch_route_takes_expectations(api: APIClient) -> None:
    bodies = [NOOP | {"expect": {"failure_streak": 2}}, NOOP]

    response = api.post("/api/v1/tasks/batch", {"tasks": bodies}, format="json")

    assert response.status_code == 201, response.content
    first, second = response.json()["ids"]
    assert TaskHealth.objects.get(task_id=first).failure_streak == 2
    assert not TaskHealth.objects.filter(task_id=second).exists()


def test_a_bad_expectation_in_a_batch_names_its_index(api: APIClient) -> None:
    bodies = [NOOP, NOOP | {"expect": {"duration": {"max": 0}}}]

    response = api.post("/api/v1/tasks/batch", {"tasks": bodies}, format="json")

    assert response.status_code == 400
    assert "max" in str(response.json())


def test_the_seed_routes_take_expectations(api: APIClient) -> None:
    created = api.post("/task", NOOP | {"expect": {"start_within": 2}}, format="json")
    assert created.status_code == 201, created.content
    task_id = created.json()["task_id"]

    updated = api.put(
        "/task", {"task_id": task_id, "expect": {"duration": {"max": 9}}}, format="json"
    )

    assert updated.status_code == 204, updated.content
    assert api.get(f"/api/v1/tasks/{task_id}").json()["expect"] == {"duration": {"max": 9}}
    assert TaskHealth.objects.get(task_id=task_id).max_duration == 9


def test_a_multipart_form_carries_expect_as_json_text(api: APIClient) -> None:
    form = {"kind": "handler", "payload": '{"name": "noop"}', "expect": '{"failure_streak": 4}'}

    response = api.post("/api/v1/tasks", form, format="multipart")

    assert response.status_code == 201, response.content
    assert response.json()["expect"] == {"failure_streak": 4}


def test_removing_the_expectation_behind_a_state_makes_the_task_up(api: APIClient) -> None:
    task = api.post("/api/v1/tasks", NOOP | {"expect": EXPECT}, format="json").json()
    TaskHealth.objects.filter(task_id=task["id"]).update(health="failing", failures=3)

    kept = api.patch(
        f"/api/v1/tasks/{task['id']}", {"expect": {"failure_streak": 3}}, format="json"
    )
    assert kept.json()["health"] == "failing"

    dropped = api.patch(
        f"/api/v1/tasks/{task['id']}", {"expect": {"start_within": 5}}, format="json"
    )
    assert dropped.json()["health"] == "up"
