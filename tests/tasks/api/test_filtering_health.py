"""`?health=` on the task list: by the tasks' health; `up` includes tasks expecting nothing."""

from __future__ import annotations

from rest_framework.test import APIClient

from tasks.models import TaskHealth

NOOP = {"kind": "handler", "payload": {"name": "noop"}}


def test_the_list_filters_by_health(api: APIClient) -> None:
    plain = api.post("/api/v1/tasks", NOOP, format="json").json()["id"]
    watched = api.post("/api/v1/tasks", NOOP | {"expect": {"failure_streak": 1}}, format="json")
    failing = api.post("/api/v1/tasks", NOOP | {"expect": {"failure_streak": 1}}, format="json")
    TaskHealth.objects.filter(task_id=failing.json()["id"]).update(health="failing")

    def listed(health: str) -> set[str]:
        response = api.get(f"/api/v1/tasks?health={health}")
        assert response.status_code == 200, response.content
        return {task["id"] for task in response.json()["results"]}

    assert listed("failing") == {failing.json()["id"]}
    assert listed("up") == {plain, watched.json()["id"]}
    assert listed("overdue") == set()
    shown = api.get(f"/api/v1/tasks/{failing.json()['id']}").json()
    assert shown["health"] == "failing"


def test_an_unknown_health_is_a_400_listing_the_choices(api: APIClient) -> None:
    response = api.get("/api/v1/tasks?health=down")

    assert response.status_code == 400
    assert "up, late, failing, overdue" in response.json()["health"][0]
