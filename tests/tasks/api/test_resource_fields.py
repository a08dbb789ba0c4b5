"""Resource requests per task: Kubernetes quantities, errors naming the field."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from tasks import resources
from tasks.models import Task

NOOP = {"kind": "handler", "payload": {"name": "noop"}}


@pytest.mark.parametrize(
    ("text", "millis"),
    [("500m", 500), ("2", 2000), ("1.5", 1500), ("0.1", 100), ("1e3", 10**6), ("1k", 10**6)],
)
def test_cpu_quantities(text: str, millis: int) -> None:
    assert resources.cpu_millis(text) == millis


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("256Mi", 256 * 2**20),
        ("1G", 10**9),
        ("1e3", 1000),
        ("0.5Ki", 512),
        ("128974848", 128974848),
        ("1500m", 2),
    ],
)
def test_memory_quantities(text: str, size: int) -> None:
    assert resources.memory_bytes(text) == size


def test_requests_are_stored_and_shown(api: APIClient) -> None:
    body = NOOP | {"resources": {"cpu": "500m", "memory": "256Mi"}}

    response = api.post("/api/v1/tasks", body, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["resources"] == {"cpu": "500m", "memory": "256Mi"}
    assert Task.objects.get().resources == {"cpu": "500m", "memory": "256Mi"}
    shown = api.get(f"/api/v1/tasks/{response.json()['id']}").json()
    assert shown["resources"] == {"cpu": "500m", "memory": "256Mi"}


def test_numbers_are_kept_as_quantity_text(api: APIClient) -> None:
    response = api.post(
        "/api/v1/tasks", NOOP | {"resources": {"cpu": 2, "memory": 0.5}}, format="json"
    )

    assert response.json()["resources"] == {"cpu": "2", "memory": "0.5"}


def test_no_requests_by_default_and_null_clears_them(api: APIClient) -> None:
    created = api.post("/api/v1/tasks", NOOP | {"resources": {"cpu": "1"}}, format="json").json()
    assert api.post("/api/v1/tasks", NOOP, format="json").json()["resources"] == {}

    changed = api.patch(f"/api/v1/tasks/{created['id']}", {"resources": None}, format="json")

    assert changed.status_code == 200, changed.content
    assert changed.json()["resources"] == {}


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"cpu": "half"}, "cpu"),
        ({"cpu": "-1"}, "cpu"),
        ({"cpu": "0.0001"}, "cpu"),
        ({"cpu": "1e99"}, "cpu"),
        ({"cpu": True}, "cpu"),
        ({"memory": "256MB"}, "memory"),
        ({"memory": "1e30"}, "memory"),
        ({"memory": ["1Gi"]}, "memory"),
        ({"gpu": "1"}, "gpu"),
        ("2 cores", "non_field_errors"),
    ],
)
def test_bad_quantities_name_the_field(api: APIClient, given: object, field: str) -> None:
    response = api.post("/api/v1/tasks", NOOP | {"resources": given}, format="json")

    assert response.status_code == 400, response.content
    assert list(response.json()["resources"]) == [field]
    assert not Task.objects.exists()


def test_seed_route_takes_resources_as_a_multipart_json_field(api: APIClient) -> None:
    upload = SimpleUploadedFile("job.sh", b"#!/bin/sh\necho hi\n")
    body = {"file": upload, "resources": json.dumps({"cpu": "250m", "memory": "64Mi"})}

    response = api.post("/task", body, format="multipart")

    assert response.status_code == 201, response.content
    assert response.json()["resources"] == {"cpu": "250m", "memory": "64Mi"}


def test_seed_route_names_a_bad_quantity_in_a_form(api: APIClient) -> None:
    upload = SimpleUploadedFile("job.sh", b"#!/bin/sh\necho hi\n")

    response = api.post(
        "/task", {"file": upload, "resources": '{"cpu": "lots"}'}, format="multipart"
    )

    assert response.status_code == 400
    assert "cpu" in response.json()["resources"]


def test_seed_route_json_body(api: APIClient) -> None:
    response = api.post("/task", NOOP | {"resources": {"memory": "1Gi"}}, format="json")

    assert response.status_code == 201
    assert response.json()["resources"] == {"memory": "1Gi"}


def test_upload_route_takes_resources_and_on_zombie_as_form_fields(api: APIClient) -> None:
    upload = SimpleUploadedFile("job.sh", b"#!/bin/sh\necho hi\n")
    body = {"file": upload, "resources": '{"cpu": "2"}', "on_zombie": "cancel"}

    response = api.post("/api/v1/tasks/upload", body, format="multipart")

    assert response.status_code == 201, response.content
    assert response.json()["resources"] == {"cpu": "2"}
    assert response.json()["on_zombie"] == "cancel"
