"""drf-spectacular: operation ids and tags by resource, and the error answers every operation
can give, documented once.

Operation ids read as `<resource>_<action>` (`tasks_create`, `tasks_list`, `runs_cancel`,
`seed_task_by_id_update`) and every operation is tagged with its resource (tasks, runs,
schedules, channels, notifications, auth, seed, health), so a generated client reads
`client.api.tasks.tasks_create` rather than DRF's `api_v1_tasks_create` under tag `api`.

Views document their own success answers and the errors only they produce (409 for a run in
flight). What applies across the board is added here, so the schema stays honest as views come
and go (issue 8; tests/security/test_fuzz.py holds every answer to the schema):

* 401 on every operation that needs a token, and on the token endpoints (wrong credentials);
* 400 wherever a body or a query parameter is read; 415 wherever a body is parsed;
* 404 wherever a path takes an id, and on paginated lists (a page past the end);
* 413 (body too large, scheduler_project.middleware) and 429 (write rate,
  scheduler_project.web.throttling) on every write.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular import openapi

API_PREFIX = "/api/v1/"
# A POST to a path ending in one of these does something to what the path names; it creates
# nothing, so its id is the path alone (`runs_cancel`, not `runs_cancel_create`).
ACTIONS = frozenset(
    {
        "pause",
        "resume",
        "run-now",
        "skip-next",
        "cancel",
        "retry",
        "preview",
        "token",
        "refresh",
        "upload",
    }
)


class AutoSchema(openapi.AutoSchema):
    """DEFAULT_SCHEMA_CLASS: readable operation ids and one tag per resource."""

    def _words(self) -> list[str]:
        if self.path.startswith(API_PREFIX):
            parts = self.path.removeprefix(API_PREFIX).split("/")
            return [p for p in parts if p and not p.startswith("{")]
        parts = [p for p in self.path.split("/") if p]
        if parts and parts[0] == "health":
            return parts
        # The seed routes: /task and /task/{id} differ only by the id, so it is named.
        return ["seed", *("by_id" if p.startswith("{") else p for p in parts)]

    def get_tags(self) -> list[str]:
        return self._words()[:1]

    def get_operation_id(self) -> str:
        words = [w.replace("-", "_") for w in self._words()]
        last = self.path.rstrip("/").rsplit("/", 1)[-1]
        if self.method == "POST" and last in ACTIONS:
            return "_".join(words)
        if self.method == "GET" and self._is_list_view():
            return "_".join([*words, "list"])
        return "_".join([*words, self.method_mapping[self.method.lower()]])


WRITES = frozenset({"post", "put", "patch", "delete"})
TOKEN_PATHS = frozenset({"/api/v1/auth/token", "/api/v1/auth/token/refresh"})

ERROR_SCHEMA = {
    "type": "object",
    "description": "DRF's error shape: a message and a machine-readable code.",
    "properties": {"detail": {"type": "string"}, "code": {"type": "string"}},
    "required": ["detail", "code"],
}
VALIDATION_ERROR_SCHEMA = {
    "type": "object",
    "description": (
        "Each offending field with its messages (nested for nested fields, keyed by index for "
        "lists), or `detail` and `code` for a body that could not be parsed at all."
    ),
    "additionalProperties": True,
}
DESCRIPTIONS = {
    "400": "Invalid input; the body names the field.",
    "401": "Missing, expired or invalid token (or wrong credentials on the token endpoints).",
    "404": "No such object among the caller's own (or a page past the end of a list).",
    "409": "Conflicts with the object's current state (a run in flight, a finished run).",
    "413": "The request body is larger than SCHEDULER_MAX_JSON_BYTES / _UPLOAD_BYTES allow.",
    "415": "The body's Content-Type is not one this operation accepts.",
    "429": "Too many writes by this user; retry after the `Retry-After` seconds.",
}
RETRY_AFTER = {
    "Retry-After": {
        "schema": {"type": "integer"},
        "description": "Seconds to wait before the next write.",
    }
}


def document_errors(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict:
    """POSTPROCESSING_HOOKS entry: add the shared error answers to every operation."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("Error", ERROR_SCHEMA)
    schemas.setdefault("ValidationError", VALIDATION_ERROR_SCHEMA)
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if isinstance(operation, dict) and "responses" in operation:
                _document(path, method, operation)
    return result


def _document(path: str, method: str, operation: dict[str, Any]) -> None:
    responses = operation["responses"]
    parameters = operation.get("parameters", [])
    in_query = any(p.get("in") == "query" for p in parameters)
    in_path = any(p.get("in") == "path" for p in parameters)
    has_body = "requestBody" in operation
    authenticated = any(option for option in operation.get("security", []))
    codes: set[str] = set()
    if authenticated or path in TOKEN_PATHS:
        codes.add("401")
    if has_body or in_query:
        codes.add("400")
    if has_body:
        codes.add("415")
    if in_path or any(p.get("name") == "page" and p.get("in") == "query" for p in parameters):
        codes.add("404")
    if method in WRITES:
        codes.add("413")
        if authenticated:
            codes.add("429")
    for code in codes:
        responses.setdefault(code, {"description": DESCRIPTIONS[code]})
    for code, response in responses.items():
        if code.isdigit() and 400 <= int(code) < 500 and "content" not in response:
            ref = "ValidationError" if code == "400" else "Error"
            response["content"] = {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}
            }
        if code == "429":
            response.setdefault("headers", {}).update(RETRY_AFTER)
