"""A task read with GET and PUT back unchanged changes nothing and plans nothing again."""

from __future__ import annotations

from collections.abc import Callable

from rest_framework.test import APIClient

from tasks.models import Run, Task
from tasks.task_fields import BODY_FIELDS


def test_put_back_of_a_get_changes_nothing_and_replans_nothing(
    api: APIClient, create: Callable
) -> None:
    task = create(schedule={"type": "interval", "every": 10, "start_at": "2020-01-01T00:00:00Z"})
    planned = set(Run.objects.filter(task_id=task["id"]).values_list("id", flat=True))
    before = Task.objects.get(pk=task["id"])
    shown = api.get(f"/api/v1/tasks/{task['id']}").json()

    body = {name: shown[name] for name in BODY_FIELDS}
    response = api.put(f"/api/v1/tasks/{task['id']}", body, format="json")

    assert response.status_code == 200, response.content
    after = Task.objects.get(pk=task["id"])
    assert planned and set(Run.objects.filter(task_id=task["id"]).values_list("id", flat=True)) == (
        planned
    )
    assert after.schedule == before.schedule, "misfire_grace stays null, not the default shown"
    assert after.updated_at == before.updated_at
