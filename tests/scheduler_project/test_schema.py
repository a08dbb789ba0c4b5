"""The OpenAPI schema and the interactive docs.

drf-spectacular's defaults apply (SPECTACULAR_SETTINGS sets no SERVE_PERMISSIONS): the schema
and docs are public, but a request carrying a bad token is still refused by JWT authentication.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rest_framework.test import APIClient

JSON = {"HTTP_ACCEPT": "application/vnd.oai.openapi+json"}
API_MD = Path(__file__).resolve().parents[2] / "docs" / "api.md"


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


def test_schema_documents_create_as_json_with_the_upload_described(schema: dict) -> None:
    post = schema["paths"]["/api/v1/tasks"]["post"]

    # One body type per operation: generators make one model; the multipart upload
    # of an executable still works and is described.
    assert set(post["requestBody"]["content"]) == {"application/json"}
    assert "multipart/form-data" in post["description"]
    assert "file" not in schema["components"]["schemas"]["TaskInputRequest"]["properties"]
    assert {"200", "201", "400", "401"} <= set(post["responses"])


def test_every_request_body_is_json_but_the_upload(schema: dict) -> None:
    types = {
        (path, method): set(operation["requestBody"]["content"])
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if "requestBody" in operation
    }
    upload = types.pop(("/api/v1/tasks/upload", "post"))
    assert upload == {"multipart/form-data"}
    assert types and all(found == {"application/json"} for found in types.values()), types


def test_operation_ids_and_tags_read_by_resource(schema: dict) -> None:
    operations = {
        (path, method): operation
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
    }
    ids = {key: operation["operationId"] for key, operation in operations.items()}
    assert ids[("/api/v1/tasks", "post")] == "tasks_create"
    assert ids[("/api/v1/tasks", "get")] == "tasks_list"
    assert ids[("/api/v1/tasks/{id}", "patch")] == "tasks_partial_update"
    assert ids[("/api/v1/tasks/{id}/run-now", "post")] == "tasks_run_now"
    assert ids[("/api/v1/tasks/{id}/runs", "get")] == "tasks_runs_list"
    assert ids[("/api/v1/runs/{id}/cancel", "post")] == "runs_cancel"
    assert ids[("/api/v1/schedules/preview", "post")] == "schedules_preview"
    assert ids[("/api/v1/calendars/{id}", "delete")] == "calendars_destroy"
    assert ids[("/api/v1/auth/token", "post")] == "auth_token"
    assert ids[("/api/v1/tasks/{id}/calendar.ics", "get")] == "tasks_calendar_ics"
    assert ids[("/api/v1/calendar-feed/rotate", "post")] == "calendar_feed_rotate"
    assert ids[("/api/v1/workflow-runs/{id}/cancel", "post")] == "workflow_runs_cancel"
    assert ids[("/api/v1/workflows/{id}", "patch")] == "workflows_partial_update"
    assert ids[("/task/{id}", "put")] == "seed_task_by_id_update"
    assert ids[("/api/v1/audit", "get")] == "audit_list"
    assert len(set(ids.values())) == len(ids), "operation ids are unique"
    tags = {operation["tags"][0] for operation in operations.values()}
    assert tags == {
        "tasks",
        "runs",
        "schedules",
        "channels",
        "notifications",
        "auth",
        "seed",
        "calendars",
        "calendar-feed",
        "tasksets",
        "concurrency-keys",
        "rate-limits",
        "audit",
        "health",
        "workflows",
        "workflow-runs",
        "teams",
    }
    assert operations[("/tasks", "get")]["tags"] == ["seed"]


def test_actions_declare_what_each_answers(schema: dict) -> None:
    def ok(path: str) -> dict:
        responses = schema["paths"][path]["post"]["responses"]
        return {
            code: responses[code]["content"]["application/json"]["schema"]["$ref"]
            for code in responses
            if code < "300"
        }

    task, run = "#/components/schemas/TaskOutput", "#/components/schemas/Run"
    assert ok("/api/v1/tasks/{id}/pause") == {"200": task}
    assert ok("/api/v1/tasks/{id}/run-now") == {"201": run}
    assert ok("/api/v1/tasks/{id}/skip-next") == {"200": run}
    assert ok("/api/v1/runs/{id}/retry") == {"200": run}
    preview = ok("/api/v1/schedules/preview")["200"].rsplit("/", 1)[-1]
    assert schema["components"]["schemas"][preview]["properties"]["next_runs"]["type"] == "array"


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


def test_every_id_is_a_uuid_string_but_those_the_api_docs_name_as_integers(schema: dict) -> None:
    conventions = API_MD.read_text().split("\n## Conventions\n")[1].split("\n## ")[0]
    conventions = " ".join(conventions.split())  # a route may be wrapped across lines
    integers = set()
    for path, operations in schema["paths"].items():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] != "path" or parameter["name"] != "id":
                    continue
                kind = (parameter["schema"]["type"], parameter["schema"].get("format"))
                if kind != ("string", "uuid"):
                    assert kind == ("integer", None), (path, kind)
                    integers.add(path.removesuffix("/{id}"))
    assert "/api/v1/concurrency-keys" in integers  # the check reads the schema's ids
    for route in integers:
        assert f"(`{route}`)" in conventions, route
    components = schema["components"]["schemas"]  # audit entries have no route by id
    assert components["AuditEntry"]["properties"]["id"]["type"] == "integer"
    assert "audit entries (`/api/v1/audit`)" in conventions
