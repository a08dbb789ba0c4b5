"""Request limits: body size (413 JSON), chunked bodies, write rate (429)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
import requests
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from tasks.models import Task

pytestmark = pytest.mark.django_db
NOOP = {"kind": "handler", "payload": {"name": "noop"}}


@pytest.fixture(autouse=True)
def _small_limits(settings, tmp_path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.SCHEDULER_MAX_JSON_BYTES = 4_000
    settings.SCHEDULER_MAX_UPLOAD_BYTES = 20_000


def assert_413(response) -> None:
    assert response.status_code == 413, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"detail", "code"} and body["code"] == "request_too_large"


def padded(size: int) -> bytes:
    body = json.dumps({**NOOP, "name": ""}).encode()
    return json.dumps({**NOOP, "name": "x" * (size - len(body))}).encode()


@pytest.mark.parametrize(
    "path", ["/api/v1/tasks", "/task", "/api/v1/tasks/batch", "/api/v1/channels"]
)
def test_json_body_over_the_limit(api: APIClient, path: str) -> None:
    response = api.post(path, padded(4_001), content_type="application/json")

    assert_413(response)
    assert not Task.objects.exists()


def test_json_body_at_the_limit_is_read(api: APIClient) -> None:
    response = api.post("/api/v1/tasks", padded(4_000), content_type="application/json")

    assert response.status_code == 400  # read and validated: the name is too long
    assert "name" in response.json()


def test_limit_applies_before_authentication(anon: APIClient, db) -> None:
    assert_413(anon.post("/api/v1/tasks", padded(5_000), content_type="application/json"))


def test_token_endpoint_has_the_json_limit_too(anon: APIClient, db) -> None:
    body = json.dumps({"username": "u", "password": "p" * 5_000}).encode()

    assert_413(anon.post("/api/v1/auth/token", body, content_type="application/json"))


def upload(api: APIClient, size: int, path: str = "/api/v1/tasks") -> object:
    data = {"kind": "executable", "payload": json.dumps({"args": []})}
    data["file"] = SimpleUploadedFile("job.sh", b"#" * size)
    return api.post(path, data, format="multipart")


def test_multipart_upload_within_the_limit(api: APIClient) -> None:
    response = upload(api, 19_000)

    assert response.status_code == 201, response.content


@pytest.mark.parametrize("path", ["/api/v1/tasks", "/task"])
def test_multipart_body_over_the_limit(api: APIClient, path: str) -> None:
    assert_413(upload(api, 30_000, path))  # refused on Content-Length, before parsing
    assert not Task.objects.exists()


def test_one_file_over_the_upload_limit_is_stopped_while_streaming(api: APIClient) -> None:
    # The body fits (upload + form allowance) but the file alone passes SCHEDULER_MAX_UPLOAD_BYTES.
    response = upload(api, 21_000)

    assert_413(response)
    assert "uploaded file" in response.json()["detail"]
    assert not Task.objects.exists()


def test_djangos_own_limit_is_a_json_413(api: APIClient, settings) -> None:
    """RequestDataTooBig raised by Django itself (its limit below ours) is answered the same way."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100

    assert_413(api.post("/api/v1/tasks", padded(500), content_type="application/json"))


def test_too_many_form_fields_is_a_json_400(api: APIClient, settings) -> None:
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 5
    body = {f"f{i}": "1" for i in range(10)}

    response = api.post("/api/v1/tasks", body, format="multipart")

    assert response.status_code == 400
    assert response.json()["code"] == "too_many_fields"


def test_a_url_encoded_form_is_a_415(api: APIClient) -> None:
    # JSON, or multipart where a file is uploaded; no third body type.
    body = "kind=handler&payload=%7B%22name%22%3A%22noop%22%7D"
    response = api.post("/api/v1/tasks", body, content_type="application/x-www-form-urlencoded")

    assert response.status_code == 415


def chunked(api: APIClient, body: bytes, *, terminated: bool = True) -> object:
    """A request as a WSGI server hands over a chunked body: de-chunked, no Content-Length."""
    environ = {"wsgi.input": io.BytesIO(body), "HTTP_TRANSFER_ENCODING": "chunked"}
    if terminated:
        environ["wsgi.input_terminated"] = True
    return api.generic("POST", "/api/v1/tasks", b"", content_type="application/json", **environ)


def test_chunked_body_within_the_limit_is_read(api: APIClient) -> None:
    response = chunked(api, json.dumps(NOOP).encode())

    assert response.status_code == 201, response.content


def test_chunked_body_over_the_limit(api: APIClient) -> None:
    assert_413(chunked(api, padded(4_001)))
    assert not Task.objects.exists()


def test_chunked_body_the_server_did_not_terminate_is_refused(api: APIClient) -> None:
    response = chunked(api, json.dumps(NOOP).encode(), terminated=False)

    assert response.status_code == 411
    assert response.json()["code"] == "length_required"


@pytest.mark.processes
def test_chunked_and_oversized_bodies_through_gunicorn(gunicorn, user) -> None:
    """The real server: gunicorn de-chunks, the middleware reads up to the limit."""
    base = gunicorn(workers=1, SCHEDULER_MAX_JSON_BYTES="4000")
    login = {"username": user.username, "password": "password-123"}
    token = requests.post(f"{base}/api/v1/auth/token", json=login, timeout=30).json()["access"]
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def chunks(body: bytes) -> Iterator[bytes]:
        for start in range(0, len(body), 1000):
            yield body[start : start + 1000]

    small = requests.post(
        f"{base}/api/v1/tasks", data=chunks(json.dumps(NOOP).encode()), headers=headers, timeout=30
    )
    large = requests.post(
        f"{base}/api/v1/tasks", data=chunks(padded(50_000)), headers=headers, timeout=30
    )
    declared = requests.post(
        f"{base}/api/v1/tasks", data=padded(50_000), headers=headers, timeout=30
    )

    assert small.status_code == 201, small.text
    for response in (large, declared):
        assert response.status_code == 413
        assert response.json()["code"] == "request_too_large"
    assert Task.objects.count() == 1


# --- write rate -------------------------------------------------------------------------------
def test_writes_over_the_rate_get_429_with_retry_after(api, other_api, settings) -> None:
    settings.SCHEDULER_WRITE_RATE = "3/minute"
    for _ in range(3):
        assert api.post("/api/v1/tasks", NOOP, format="json").status_code == 201

    refused = api.post("/api/v1/tasks", NOOP, format="json")

    assert refused.status_code == 429
    assert refused.json()["code"] == "throttled"
    assert 0 < int(refused["Retry-After"]) <= 60
    assert Task.objects.count() == 3
    # Reads are not limited, and the budget is per user.
    assert api.get("/api/v1/tasks").status_code == 200
    assert other_api.post("/api/v1/tasks", NOOP, format="json").status_code == 201


def test_every_write_method_counts(api, settings) -> None:
    settings.SCHEDULER_WRITE_RATE = "2/minute"
    task = api.post("/api/v1/tasks", NOOP, format="json").json()
    assert api.patch(f"/api/v1/tasks/{task['id']}", {"name": "n"}, format="json").status_code == 200

    assert api.delete(f"/api/v1/tasks/{task['id']}").status_code == 429
    assert api.post(f"/api/v1/tasks/{task['id']}/pause").status_code == 429


def test_default_rate_leaves_room_for_scripts(settings) -> None:
    from scheduler_project.web.throttling import WriteRateThrottle

    count, seconds = WriteRateThrottle().parse_rate(settings.SCHEDULER_WRITE_RATE)
    assert count / seconds >= 10  # writes per second a script may sustain
