"""A handler that declares its arguments refuses any other: `sleep` with `secs` is a 400."""

from __future__ import annotations

from rest_framework.test import APIClient


def test_unknown_argument_of_a_declaring_handler_is_a_400_naming_it(api: APIClient) -> None:
    body = {"kind": "handler", "payload": {"name": "sleep", "args": {"secs": 5}}}

    response = api.post("/api/v1/tasks", body, format="json")

    assert response.status_code == 400, response.content
    assert "secs" in response.json()["payload"]["args"]


def test_declared_arguments_pass_and_open_handlers_take_any(api: APIClient) -> None:
    sleep = {"kind": "handler", "payload": {"name": "sleep", "args": {"seconds": 0}}}
    echo = {"kind": "handler", "payload": {"name": "echo", "args": {"anything": 1}}}

    assert api.post("/api/v1/tasks", sleep, format="json").status_code == 201
    assert api.post("/api/v1/tasks", echo, format="json").status_code == 201
