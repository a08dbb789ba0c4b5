"""drf-spectacular: operation ids and tags by resource, and the error answers every operation
can give, documented once.

Operation ids read as `<resource>_<action>` (`tasks_create`, `tasks_list`, `runs_cancel`,
`seed_task_by_id_update`) and every operation is tagged with its resource (tasks, runs,
schedules, channels, notifications, auth, seed, health), so a generated client reads
`client.api.tasks.tasks_create` rather than DRF's `api_v1_tasks_create` under tag `api`.

Views document their own success answers and the errors only they produce (409 for a run in
flight). What applies across the board is added here, so the schema stays honest as views come
and go (tests/system/test_fuzz.py holds every answer to the schema):

* 401 on every operation that needs a token, and on the token endpoints (wrong credentials);
* 400 wherever a body or a query parameter is read; 415 wherever a body is parsed;
* 404 wherever a path takes an id, and on paginated lists (a page past the end);
* 413 (body too large, scheduler_project.middleware) and 429 (write rate,
  scheduler_project.web.throttling) on every write.

A task's `payload` and `schedule` are JSON fields to DRF; the field extensions below describe
them as a `oneOf` of named components (tasks/api/schema_docs.py), built when the schema is
generated so that the handler names are those registered then.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from drf_spectacular import openapi
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import OpenApiExample

from tasks.api import schema_docs

# Held while a schema is generated (scheduler_project/web/schema.py, the task set file's
# schema): drf-spectacular loads each extension's target class on first use without a lock of
# its own, and a thread that met another's half-loaded extension failed (the first schema
# requests a new gthread worker served at once answered 500).
GENERATING = threading.Lock()

API_PREFIX = "/api/v1/"
# A POST to a path ending in one of these does something to what the path names; it creates
# nothing, so its id is the path alone (`runs_cancel`, not `runs_cancel_create`).
ACTIONS = frozenset(
    {
        "pause",
        "resume",
        "run-now",
        "skip-next",
        "backfill",
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

    # Each operation's summary and description (tasks/api/schema_docs.py OPERATIONS), so a
    # view's docstring, written for whoever reads the code, does not become its documentation.
    # An operation's own extend_schema(summary=..., description=...) still comes first.
    def get_summary(self) -> str | None:
        known = schema_docs.OPERATIONS.get(self.get_operation_id())
        return known[0] if known else super().get_summary()

    def get_description(self) -> str:  # type: ignore[override]  # as drf-spectacular's
        known = schema_docs.OPERATIONS.get(self.get_operation_id())
        return known[1] if known else super().get_description()

    def get_examples(self) -> list[OpenApiExample]:
        operation = self.get_operation_id()
        requests = schema_docs.OPERATION_EXAMPLES.get(operation, {})
        answers = schema_docs.RESPONSE_EXAMPLES.get(operation, {})
        own = [
            *(
                OpenApiExample(name, summary=summary, value=value, request_only=True)
                for name, (summary, value) in requests.items()
            ),
            *(
                OpenApiExample(name, summary=summary, value=value, response_only=True)
                for name, (summary, value) in answers.items()
            ),
        ]
        return [*super().get_examples(), *own]


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
    "403": (
        "The caller's role in the object's team does not allow it (a viewer's write), or a "
        "service token's scopes do not include what the operation needs; `detail` says which."
    ),
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
    if authenticated:
        codes.add("403")  # a team role or a service token's scopes (docs/api.md, Teams)
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


def _one_of(auto_schema: Any, components: dict[str, dict]) -> list[dict]:
    """Register the components (and the choice sets they name); their references. Copies:
    the enum hook rewrites a schema in place, which would leave the next generation with a
    reference to a component it no longer makes."""
    for name, schema in schema_docs.enum_components().items():
        component = ResolvedComponent(
            name=name, type=ResolvedComponent.SCHEMA, schema=schema, object=name
        )
        auto_schema.registry.register_on_missing(component)
    refs = []
    for name, schema in components.items():
        component = ResolvedComponent(
            name=name, type=ResolvedComponent.SCHEMA, schema=copy.deepcopy(schema), object=name
        )
        auto_schema.registry.register_on_missing(component)
        refs.append(component.ref)
    return refs


class PayloadFieldSchema(OpenApiSerializerFieldExtension):
    """tasks.api.serializers.PayloadField: one of the payloads, by the task's `kind`."""

    target_class = "tasks.api.serializers.PayloadField"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict:
        return {
            "oneOf": _one_of(auto_schema, schema_docs.payload_components()),
            "description": schema_docs.PAYLOAD_DESCRIPTION,
        }


class ScheduleFieldSchema(OpenApiSerializerFieldExtension):
    """tasks.api.serializers.ScheduleField: one of the schedule types, told apart by `type`."""

    target_class = "tasks.api.serializers.ScheduleField"

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict:
        refs = _one_of(auto_schema, schema_docs.schedule_components())
        mapping = dict(zip(schema_docs.SCHEDULES, (ref["$ref"] for ref in refs), strict=True))
        return {
            "type": "object",  # else ReDoc labels it "any"
            "oneOf": refs,
            "discriminator": {"propertyName": "type", "mapping": mapping},
            "description": schema_docs.SCHEDULE_DESCRIPTION,
        }
