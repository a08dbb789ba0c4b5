"""A task's `on_zombie`: "notify" by default, or "cancel"; anything else 400."""

from __future__ import annotations

from rest_framework.test import APIClient

NOOP = {"kind": "handler", "payload": {"name": "noop"}}


def test_notify_by_default_and_cancel_when_asked(api: APIClient) -> None:
    plain = api.post("/api/v1/tasks", NOOP, format="json").json()
    cancel = api.post("/api/v1/tasks", NOOP | {"on_zombie": "cancel"}, format="json").json()

    assert (plain["on_zombie"], cancel["on_zombie"]) == ("notify", "cancel")
    changed = api.patch(f"/api/v1/tasks/{cancel['id']}", {"on_zombie": "notify"}, format="json")
    assert changed.json()["on_zombie"] == "notify"


def test_an_unknown_choice_names_the_field(api: APIClient) -> None:
    response = api.post("/api/v1/tasks", NOOP | {"on_zombie": "explode"}, format="json")

    assert response.status_code == 400
    assert list(response.json()) == ["on_zombie"]


def test_a_channel_may_subscribe_to_zombie_events(api: APIClient) -> None:
    body = {"kind": "webhook", "url": "http://127.0.0.1:9/hook", "all_tasks_events": ["zombie"]}

    response = api.post("/api/v1/channels", body, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["all_tasks_events"] == ["zombie"]
