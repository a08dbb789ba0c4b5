"""A task's `notify` entries: a channel and the events it is told of, any of them or all."""

from __future__ import annotations

from rest_framework.test import APIClient

from tasks import events

NOOP = {"kind": "handler", "payload": {"name": "noop"}}


def channel(api: APIClient) -> str:
    body = {"kind": "webhook", "url": "http://127.0.0.1:9/hook"}
    response = api.post("/api/v1/channels", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def test_a_task_may_subscribe_a_channel_to_every_event(api: APIClient) -> None:
    notify = [{"channel": channel(api), "events": list(events.EVENTS)}]

    response = api.post("/api/v1/tasks", NOOP | {"notify": notify}, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["notify"] == notify


def test_an_unknown_event_is_named_by_its_index(api: APIClient) -> None:
    notify = [{"channel": channel(api), "events": ["succeeded", "exploded"]}]

    response = api.post("/api/v1/tasks", NOOP | {"notify": notify}, format="json")

    assert response.status_code == 400
    assert list(response.json()["notify"]["0"]["events"]) == ["1"], response.json()
