"""The OpenAPI schema and the interactive docs.

drf-spectacular's defaults apply (SPECTACULAR_SETTINGS sets no SERVE_PERMISSIONS): the schema
and docs are public, but a request carrying a bad token is still refused by JWT authentication.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

JSON = {"HTTP_ACCEPT": "application/vnd.oai.openapi+json"}


@pytest.fixture
def schema(anon: APIClient, db) -> dict:
    response = anon.get("/api/schema/", **JSON)
    assert response.status_code == 200
    return response.json()


def test_schema_is_openapi_3_without_a_token(schema: dict) -> None:
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "Scheduler API"


def test_schema_is_served_to_a_signed_in_user(api: APIClient) -> None:
    response = api.get("/api/schema/", **JSON)

    assert response.status_code == 200
    assert "/api/v1/tasks" in response.json()["paths"]


def test_schema_refuses_a_garbage_token(anon: APIClient, db) -> None:
    anon.credentials(HTTP_AUTHORIZATION="Bearer garbage")

    assert anon.get("/api/schema/", **JSON).status_code == 401


def test_schema_yaml_by_default(anon: APIClient, db) -> None:
    response = anon.get("/api/schema/")

    assert response.status_code == 200
    assert response.content.startswith(b"openapi: 3.")


def test_schema_lists_the_task_and_run_routes(schema: dict) -> None:
    paths = schema["paths"]

    assert set(paths["/api/v1/tasks"]) >= {"get", "post"}
    assert set(paths["/api/v1/tasks/{id}"]) >= {"get", "patch", "put", "delete"}
    for route in ("pause", "resume", "run-now", "skip-next", "runs"):
        assert f"/api/v1/tasks/{{id}}/{route}" in paths
    for route in ("/api/v1/runs/{id}", "/api/v1/runs/{id}/cancel", "/api/v1/runs/{id}/retry"):
        assert route in paths
    assert "/api/v1/schedules/preview" in paths
    assert {"/task", "/task/{id}", "/task/status", "/tasks"} <= set(paths)


def test_schema_documents_create_as_json_and_multipart(schema: dict) -> None:
    post = schema["paths"]["/api/v1/tasks"]["post"]

    assert {"application/json", "multipart/form-data"} <= set(post["requestBody"]["content"])
    assert {"200", "201", "400", "401"} <= set(post["responses"])


def test_schema_documents_conflicts_and_bearer_auth(schema: dict) -> None:
    assert "409" in schema["paths"]["/api/v1/tasks/{id}"]["delete"]["responses"]
    assert "409" in schema["paths"]["/api/v1/runs/{id}/retry"]["post"]["responses"]
    scheme = schema["components"]["securitySchemes"]["jwtAuth"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")


def test_task_output_has_the_api_md_fields(schema: dict) -> None:
    fields = set(schema["components"]["schemas"]["TaskOutput"]["properties"])

    assert fields >= {"id", "owner", "status", "next_run_at", "next_runs", "runs", "created_at"}


def test_docs_render(anon: APIClient, db) -> None:
    response = anon.get("/api/docs/")

    assert response.status_code == 200
    assert b"swagger" in response.content.lower()
    assert b"/api/schema/" in response.content
