"""Hostile bodies on every write route: always a JSON 4xx, naming the field.

tests/tasks/api/test_serializers_bad_input.py goes through the task fields one by one; this
module sweeps the same kinds of trouble across the other writers (seed routes, batch, channels,
token) and the answers Django gives outside DRF (unknown URLs), which must be JSON as well.
"""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from notifications.models import Channel
from tasks.models import Task

pytestmark = pytest.mark.django_db
NOOP = {"kind": "handler", "payload": {"name": "noop"}}
TASK_ROUTES = ["/api/v1/tasks", "/task"]
WRITERS = [
    *TASK_ROUTES,
    "/api/v1/tasks/batch",
    "/api/v1/channels",
    "/api/v1/schedules/preview",
    "/api/v1/auth/token",
    "/api/v1/auth/token/refresh",
]
BIG = 2**64


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def assert_json_error(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    return response.json()


@pytest.mark.parametrize("path", WRITERS)
@pytest.mark.parametrize(
    "raw",
    [
        b"{",
        b'{"kind": "handler",}',
        b"\xff\xfe\x00",
        b"NaN",
        b"[" * 50_000 + b"]" * 50_000,
        nested(5_000).encode(),
    ],
    ids=["truncated", "trailing-comma", "not-utf8", "nan", "deep-array", "deep-object"],
)
def test_malformed_json_is_a_json_400(api: APIClient, path: str, raw: bytes) -> None:
    body = assert_json_error(api.post(path, raw, content_type="application/json"), 400)

    assert body["code"] == "parse_error" or body  # a parse error, or a field named
    assert not Task.objects.exists() and not Channel.objects.exists()


@pytest.mark.parametrize("path", WRITERS)
@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", "image/png"])
def test_wrong_content_type_is_a_json_415(api: APIClient, path: str, content_type: str) -> None:
    body = assert_json_error(api.post(path, b"{}", content_type=content_type), 415)

    assert body["code"] == "unsupported_media_type"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/tasks", {**NOOP, "name": "a\x00b"}, "name"),
        ("/api/v1/tasks", {**NOOP, "payload": {"name": "echo", "args": {"k": "\x00"}}}, "payload"),
        (
            "/api/v1/tasks",
            {**NOOP, "schedule": {"type": "cron", "expression": "* * * * *\x00"}},
            "schedule",
        ),
        ("/task", {**NOOP, "dedup_id": "k\x00"}, "dedup_key"),
        ("/api/v1/channels", {"kind": "email", "address": "a@example.com", "name": "\x00"}, "name"),
        ("/api/v1/channels", {"kind": "slack", "token": "x\x00", "channel": "C1"}, "token"),
        ("/api/v1/auth/token", {"username": "\x00", "password": "p"}, "username"),
        ("/api/v1/tasks", {**NOOP, "name": "\ud800"}, "name"),
    ],
)
def test_nul_and_lone_surrogates_name_the_field(api: APIClient, path, body, field) -> None:
    raw = json.dumps(body).encode()  # \u0000 and \ud800 escapes, as a client would send them

    errors = assert_json_error(api.post(path, raw, content_type="application/json"), 400)

    assert field in errors


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"priority": BIG}, "priority"),
        ({"max_attempts": BIG}, "max_attempts"),
        ({"timeout": BIG * BIG}, "timeout"),
        ({"payload": {"name": "echo", "args": {"n": BIG}}}, "payload"),
        ({"payload": {"name": "echo", "args": {"n": -BIG}}}, "payload"),
        ({"schedule": {"type": "interval", "every": BIG}}, "schedule"),
        ({"schedule": {"type": "interval", "every": 60, "max_runs": BIG}}, "schedule"),
    ],
)
@pytest.mark.parametrize("path", TASK_ROUTES)
def test_integers_beyond_64_bits_name_the_field(api: APIClient, path, change, field) -> None:
    errors = assert_json_error(api.post(path, {**NOOP, **change}, format="json"), 400)

    assert field in errors
    assert not Task.objects.exists()


def test_integers_within_64_bits_are_kept_exactly(api: APIClient) -> None:
    args = {"big": 2**63 - 1, "small": -(2**63)}
    body = {**NOOP, "payload": {"name": "echo", "args": args}}

    response = api.post("/api/v1/tasks", body, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["payload"]["args"] == args


@pytest.mark.parametrize("delay", ["1e999", "nan", "-inf", "soon"])
def test_seed_delay_that_is_not_a_finite_number(api: APIClient, delay: str) -> None:
    errors = assert_json_error(api.post("/task", {**NOOP, "delay": delay}, format="json"), 400)

    assert "delay" in errors


def test_batch_names_the_index_and_field(api: APIClient) -> None:
    tasks = [NOOP, {**NOOP, "payload": {"name": "echo", "args": {"n": BIG}}}]

    errors = assert_json_error(
        api.post("/api/v1/tasks/batch", {"tasks": tasks}, format="json"), 400
    )

    assert "payload" in errors["tasks"]["1"]


@pytest.mark.parametrize("path", ["/api/v1/nowhere", "/api/v1/tasks/not-a-uuid", "/nowhere"])
def test_unknown_urls_answer_json_404(api: APIClient, path: str) -> None:
    body = assert_json_error(api.get(path), 404)

    assert body == {"detail": "Not found.", "code": "not_found"}


def test_admin_keeps_djangos_html_404(admin_client) -> None:
    response = admin_client.get("/admin/nowhere/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
