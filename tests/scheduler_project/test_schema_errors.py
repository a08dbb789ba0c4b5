"""The served schema documents the errors every operation can give (scheduler_project/schema.py);
the fuzz test (tests/system/test_fuzz.py, `make test-fuzz`) then holds every real answer to it."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

WRITES = {"post", "put", "patch", "delete"}
PUBLIC = {
    "/health",
    "/health/live",
    "/api/v1/auth/token",
    "/api/v1/auth/token/refresh",
    "/api/v1/tasksets/schema",
    # Calendar feeds: their `?token=` is the credential (a wrong one is a 404), never a JWT.
    "/api/v1/calendar.ics",
    "/api/v1/tasks/{id}/calendar.ics",
}


@pytest.fixture
def operations(anon: APIClient, db) -> list[tuple[str, str, dict]]:
    schema = anon.get("/api/schema/?format=json").json()
    return [
        (path, method, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    ]


def test_every_protected_operation_documents_401(operations) -> None:
    for path, method, operation in operations:
        if path in PUBLIC - {"/api/v1/auth/token", "/api/v1/auth/token/refresh"}:
            assert "401" not in operation["responses"], (method, path)
            continue
        error = operation["responses"]["401"]["content"]["application/json"]["schema"]
        assert error == {"$ref": "#/components/schemas/Error"}, (method, path)


def test_writes_document_413_and_429_with_retry_after(operations) -> None:
    writes = [(p, m, o) for p, m, o in operations if m in WRITES]
    assert len(writes) >= 20
    for path, method, operation in writes:
        responses = operation["responses"]
        assert "413" in responses, (method, path)
        if path not in PUBLIC:
            assert "Retry-After" in responses["429"]["headers"], (method, path)


def test_ids_and_bodies_document_404_400_and_415(operations) -> None:
    for path, method, operation in operations:
        responses = operation["responses"]
        if "{id}" in path:
            assert "404" in responses, (method, path)
        if "requestBody" in operation:
            assert {"400", "415"} <= set(responses), (method, path)


def test_error_shapes_are_components(anon: APIClient, db) -> None:
    schemas = anon.get("/api/schema/?format=json").json()["components"]["schemas"]

    assert schemas["Error"]["required"] == ["detail", "code"]
    assert schemas["ValidationError"]["type"] == "object"
