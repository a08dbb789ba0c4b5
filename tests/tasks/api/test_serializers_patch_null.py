"""`null` in a PATCH means the same for every field: it clears the fields that can be empty and is
a 400 naming any other (docs/api.md, Tasks)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

from tasks.models import Task

DAILY = {"type": "daily", "at": "09:00"}


def test_patch_schedule_null_is_a_400_naming_schedule(api: APIClient, create: Callable) -> None:
    task = create(schedule=DAILY)

    response = api.patch(f"/api/v1/tasks/{task['id']}", {"schedule": None}, format="json")

    assert response.status_code == 400, response.content
    assert "schedule" in response.json()
    assert Task.objects.get(pk=task["id"]).schedule["type"] == "daily"


@pytest.mark.parametrize(
    ("field", "value", "cleared"),
    [
        ("timeout", 30.0, None),
        ("concurrency", {"key": "db", "limit": 2}, None),
        ("rate_limit", {"key": "crm", "limit": 5, "per": 60}, None),
        ("expect", {"failure_streak": 3}, {}),
        ("resources", {"cpu": "500m"}, {}),
    ],
)
def test_patch_null_clears_a_field_that_can_be_empty(
    api: APIClient, create: Callable, field: str, value: object, cleared: object
) -> None:
    task = create(**{field: value})

    response = api.patch(f"/api/v1/tasks/{task['id']}", {field: None}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()[field] == cleared


@pytest.mark.parametrize(
    "field",
    ["name", "kind", "payload", "priority", "max_attempts", "retry_backoff", "notify", "on_zombie"],
)
def test_patch_null_of_a_field_that_cannot_be_empty_is_a_400_naming_it(
    api: APIClient, create: Callable, field: str
) -> None:
    task = create()

    response = api.patch(f"/api/v1/tasks/{task['id']}", {field: None}, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json()
