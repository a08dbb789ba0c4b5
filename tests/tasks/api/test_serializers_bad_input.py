"""What a client sends wrongly answers 400 naming the field, never 500 (docs/api.md)."""

from __future__ import annotations

import http.client
import json

import pytest
import requests
from rest_framework.test import APIClient

from tasks.models import Task

NOOP = {"kind": "handler", "payload": {"name": "noop"}}
HUGE = 10**40


def nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def errors_of(api: APIClient, body: object) -> dict:
    response = api.post("/api/v1/tasks", body, format="json")
    assert response.status_code == 400, response.content
    assert not Task.objects.exists()
    return response.json()


@pytest.mark.parametrize(
    "raw",
    [
        b"{",
        b'{"kind": "handler",}',
        b"\xff\xfe",
        b"NaN",
        b"[" * 100_000 + b"]" * 100_000,
    ],
)
def test_malformed_json_body(api: APIClient, raw: bytes) -> None:
    response = api.post("/api/v1/tasks", raw, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"


@pytest.mark.parametrize("path", ["/api/v1/schedules/preview", "/task", "/api/v1/auth/token"])
def test_deeply_nested_body_on_other_routes(api: APIClient, path: str) -> None:
    response = api.post(path, b"[" * 100_000 + b"]" * 100_000, content_type="application/json")

    assert response.status_code == 400


@pytest.mark.parametrize("body", [[NOOP], "text", 5])
def test_body_that_is_not_an_object(api: APIClient, body: object) -> None:
    assert "non_field_errors" in errors_of(api, body)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"kind": "shell"}, "kind"),
        ({"kind": None}, "kind"),
        ({"priority": 10}, "priority"),
        ({"priority": -1}, "priority"),
        ({"priority": "urgent"}, "priority"),
        ({"priority": True}, "priority"),
        ({"priority": 5.5}, "priority"),
        ({"priority": HUGE}, "priority"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": HUGE}, "max_attempts"),
        ({"timeout": HUGE}, "timeout"),
        ({"timeout": 0}, "timeout"),
        ({"retry_backoff": {"base": HUGE, "cap": 1}}, "retry_backoff"),
        ({"retry_backoff": {"base": 10, "cap": 1}}, "retry_backoff"),
        ({"name": "x" * 201}, "name"),
        ({"name": "a\x00b"}, "name"),
        ({"dedup_key": "k\x00"}, "dedup_key"),
        ({"notify": "everyone"}, "notify"),
        ({"notify": [{"channel": "c", "events": ["exploded"]}]}, "notify"),
        ({"payload": ["noop"]}, "payload"),
        ({"payload": "noop"}, "payload"),
    ],
)
def test_bad_top_level_field(api: APIClient, change: dict, field: str) -> None:
    assert field in errors_of(api, NOOP | change)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"name": "no-such-handler"}, "name"),
        ({}, "name"),
        ({"name": "echo", "args": [1, 2]}, "args"),
        ({"name": "sleep", "args": {"seconds": HUGE}}, "args"),
    ],
)
def test_bad_handler_payload(api: APIClient, payload: dict, field: str) -> None:
    errors = errors_of(api, {"kind": "handler", "payload": payload})

    assert field in errors["payload"]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"method": "GET", "url": "ftp://x"}, "url"),
        ({"method": "GET", "url": "not a url"}, "url"),
        ({"method": "GET", "url": "http://[::1"}, "url"),
        ({"method": "GET", "url": "http://127.0.0.1:99999/"}, "url"),
        ({"method": "GET"}, "url"),
        ({"method": "FOO", "url": "http://127.0.0.1/"}, "method"),
        ({"method": 7, "url": "http://127.0.0.1/"}, "method"),
        ({"url": "http://127.0.0.1/", "expect_status": [99]}, "expect_status"),
        ({"url": "http://127.0.0.1/", "expect_status": []}, "expect_status"),
        ({"url": "http://127.0.0.1/", "expect_status": [True]}, "expect_status"),
        ({"url": "http://127.0.0.1/", "timeout": HUGE}, "timeout"),
        ({"url": "http://127.0.0.1/", "headers": {"A": 1}}, "headers"),
        ({"url": "http://127.0.0.1/", "body": 5}, "body"),
    ],
)
def test_bad_http_payload(api: APIClient, payload: dict, field: str) -> None:
    errors = errors_of(api, {"kind": "http", "payload": payload})

    assert field in errors["payload"]


def test_http_to_a_private_address_is_refused(api: APIClient, settings) -> None:
    settings.SCHEDULER_OUTBOUND_ALLOW = []

    errors = errors_of(api, {"kind": "http", "payload": {"url": "http://10.0.0.1/"}})

    assert "url" in errors["payload"]


@pytest.mark.parametrize(
    "payload",
    [
        {"name": "echo", "args": {"x": "a\x00b"}},
        {"name": "echo", "args": {"a\x00": 1}},
        {"name": "echo", "args": {"deep": nested(200)}},
    ],
)
def test_payload_postgres_cannot_store(api: APIClient, payload: dict) -> None:
    assert "payload" in errors_of(api, {"kind": "handler", "payload": payload})


def test_payload_with_a_lone_surrogate(api: APIClient) -> None:
    raw = json.dumps({"kind": "handler", "payload": {"name": "echo", "args": {"x": "\ud800"}}})

    response = api.post("/api/v1/tasks", raw.encode(), content_type="application/json")

    assert response.status_code == 400
    assert "payload" in response.json()


@pytest.mark.parametrize(
    ("schedule", "field"),
    [
        ({"type": "once", "run_at": "tomorrow-ish"}, "run_at"),
        ({"type": "once", "run_at": 12}, "run_at"),
        ({"type": "once", "run_at": "99999-01-01T00:00:00Z"}, "run_at"),
        ({"type": "once", "delay": HUGE}, "delay"),
        ({"type": "once", "delay": -5}, "delay"),
        ({"type": "hourly"}, "type"),
        ({"type": "interval", "every": HUGE}, "every"),
        ({"type": "interval", "every": 60, "timezone": "Mars/Base"}, "timezone"),
        ({"type": "interval", "every": 60, "max_runs": HUGE}, "max_runs"),
        ({"type": "monthly", "day": HUGE, "at": "10:00"}, "day"),
        ({"type": "cron", "expression": "* * *"}, "expression"),
        ({"type": "interval", "every": 60, "end_at": "2000-01-01T00:00:00Z"}, "end_at"),
    ],
)
def test_bad_schedule_names_the_field_inside_schedule(
    api: APIClient, schedule: dict, field: str
) -> None:
    errors = errors_of(api, NOOP | {"schedule": schedule})

    assert field in errors["schedule"], errors


def test_deeply_nested_schedule(api: APIClient) -> None:
    errors = errors_of(api, NOOP | {"schedule": {"type": "interval", "deep": nested(200)}})

    assert "schedule" in errors


def test_executable_without_file(api: APIClient) -> None:
    assert "file" in errors_of(api, {"kind": "executable", "payload": {"args": []}})


def test_file_with_another_kind(api: APIClient) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = api.post(
        "/api/v1/tasks",
        {"kind": "handler", "payload": '{"name": "noop"}', "file": SimpleUploadedFile("a", b"x")},
        format="multipart",
    )

    assert response.status_code == 400
    assert "file" in response.json()


def test_multipart_payload_that_is_not_json(api: APIClient) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = api.post(
        "/api/v1/tasks",
        {"kind": "executable", "payload": "{oops", "file": SimpleUploadedFile("a", b"x")},
        format="multipart",
    )

    assert response.status_code == 400
    assert "payload" in response.json()


def test_bad_patch_changes_nothing(api: APIClient, create) -> None:
    task = create(name="kept")

    response = api.patch(f"/api/v1/tasks/{task['id']}", {"priority": 99}, format="json")

    assert response.status_code == 400
    assert "priority" in response.json()
    assert Task.objects.get(pk=task["id"]).name == "kept"


# Found by the schema fuzzer (tests/system/test_fuzz.py) when it still answered 500.
FUZZER_BODY = {
    "name": "",
    "kind": "http",
    "payload": None,
    "schedule": None,
    "priority": 0,
    "max_attempts": 1,
    "retry_backoff": {"base": 0.0},
    "timeout": 0.001,
    "notify": [],
    "file": "",
}


@pytest.mark.parametrize("route", ["/api/v1/tasks/{id}", "/task/{id}"])
@pytest.mark.parametrize("method", ["patch", "put"])
def test_kind_changed_payload_null_and_half_a_backoff_are_400(
    api: APIClient, create, route: str, method: str
) -> None:
    task = create(name="kept")
    url = route.format(id=task["id"])
    if route == "/task/{id}" and method == "patch":
        pytest.skip("the seed route has no PATCH")

    response = getattr(api, method)(url, FUZZER_BODY, format="json")
    half = getattr(api, method)(url, {"retry_backoff": {"cap": 5}}, format="json")

    assert response.status_code == 400, response.content
    assert half.status_code == 400, half.content
    assert "base" in half.json()["retry_backoff"]
    assert Task.objects.get(pk=task["id"]).name == "kept"


@pytest.mark.parametrize(
    ("query", "field"), [({"priority": "urgent"}, "priority"), ({"kind": "shell"}, "kind")]
)
def test_bad_list_filter(api: APIClient, query: dict, field: str) -> None:
    response = api.get("/api/v1/tasks", query)

    assert response.status_code == 400
    assert field in response.json()


def test_page_past_the_end_is_404(api: APIClient, create) -> None:
    create()

    response = api.get("/api/v1/tasks", {"page": 99})

    assert response.status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "handler", "payload": {"name": "noop"}, "delay": "soon"}, "delay"),
        ({"kind": "handler", "payload": {"name": "noop"}, "schedule": "not cron"}, "schedule"),
        ({"kind": "handler", "payload": {"name": "noop"}, "priority": "urgent"}, "priority"),
    ],
)
def test_bad_seed_create(api: APIClient, body: dict, field: str) -> None:
    response = api.post("/task", body, format="json")

    assert response.status_code == 400
    assert field in response.json()


def test_bad_seed_status_task_id(api: APIClient, db) -> None:
    response = api.put("/task/status", {"task_id": "nope", "status": "enable"}, format="json")

    assert response.status_code == 400
    assert "task_id" in response.json()


# (headers, whether the HTTP client refuses them: then every attempt of the task fails); a name
# that is no RFC 9110 token (a space) may pass http.client but is no header.
BAD_HEADERS = [
    ({"X-Token": "abc\r\nX-Injected: 1"}, True),
    ({"X-Token": "abc\ndef"}, True),
    ({"X-Token": " leading space"}, True),
    ({"X-Token": "snowman \u2603"}, True),
    ({"X Token": "abc"}, False),
    ({"X-Token:": "abc"}, True),
    ({"": "abc"}, True),
]


@pytest.mark.parametrize(("headers", "client_refuses"), BAD_HEADERS)
def test_a_header_that_is_no_http_header_is_a_400_naming_it(
    api: APIClient, headers: dict, client_refuses: bool
) -> None:
    url = "http://127.0.0.1/"
    assert _client_takes(headers) is not client_refuses

    errors = errors_of(api, {"kind": "http", "payload": {"url": url, "headers": headers}})

    (name,) = headers
    assert repr(name) in errors["payload"]["headers"][0]


def test_ordinary_headers_are_accepted(api: APIClient) -> None:
    headers = {"X-Token": "a b\tc", "Accept": "", "X-Odd!#$%&'*+-.^_`|~": "\u00e9"}
    assert _client_takes(headers)

    response = api.post(
        "/api/v1/tasks",
        {"kind": "http", "payload": {"url": "http://127.0.0.1/", "headers": headers}},
        format="json",
    )

    assert response.status_code == 201, response.content


def _client_takes(headers: dict) -> bool:
    """Whether requests and http.client, which send a task's request, accept the headers."""
    try:
        requests.Request("GET", "http://127.0.0.1/", headers=headers).prepare()
        connection = http.client.HTTPConnection("127.0.0.1")
        connection.putrequest("GET", "/")
        for name, value in headers.items():
            connection.putheader(name, value)
    except (requests.exceptions.InvalidHeader, ValueError):  # UnicodeEncodeError too
        return False
    return True
