"""A task's `dedup_key` is its create's: a change that names another is refused, not dropped."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

from tasks.models import Task


@pytest.mark.parametrize("method", ["patch", "put"])
def test_another_dedup_key_in_a_change_is_a_400_naming_it(
    api: APIClient, create: Callable, method: str
) -> None:
    task = create(dedup_key="first")
    body = {"kind": "handler", "payload": {"name": "noop"}, "dedup_key": "second"}

    response = getattr(api, method)(f"/api/v1/tasks/{task['id']}", body, format="json")

    assert response.status_code == 400, response.content
    assert "dedup_key" in response.json()
    assert Task.objects.get(pk=task["id"]).dedup_key == "first"


def test_the_same_dedup_key_in_a_change_is_no_change(api: APIClient, create: Callable) -> None:
    task = create(dedup_key="first")

    response = api.patch(f"/api/v1/tasks/{task['id']}", {"dedup_key": "first"}, format="json")

    assert response.status_code == 200, response.content
