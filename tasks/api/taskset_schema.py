"""GET /api/v1/tasksets/schema: the JSON Schema of a task set file, for editors and `schedctl
validate` (which ships a copy: cli/schedctl/taskset.schema.json, held equal to this by a test).

Built from the served OpenAPI schema's `TaskSetEntryRequest`, so a field the API takes is a field
the file takes: OpenAPI's `nullable` becomes a null alternative, every object with properties
refuses others (the API does, tasks/api/strict.py), and handler names are any string (each
deployment registers its own).
"""

from __future__ import annotations

import functools
from typing import Any

from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduler_project.schema import GENERATING
from tasks.api.tasksets import NAME

ENTRY = "TaskSetEntryRequest"
WORKFLOW_ENTRY = "TaskSetWorkflowEntryRequest"
REF = "#/components/schemas/"
NOT_IN_A_SET = ("dedup_key",)


def _convert(node: Any) -> Any:
    if isinstance(node, list):
        return [_convert(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {
        key: _convert(value)
        for key, value in node.items()
        if key not in ("nullable", "discriminator", "example", "format", "readOnly")
    }
    if "$ref" in converted:
        converted["$ref"] = "#/$defs/" + converted["$ref"].removeprefix(REF)
    if "properties" in converted and "additionalProperties" not in converted:
        converted["additionalProperties"] = False
    if node.get("nullable"):
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


def _reachable(components: dict[str, Any], name: str, found: set[str]) -> set[str]:
    found.add(name)
    stack = [components[name]]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(REF):
                target = ref.removeprefix(REF)
                if target not in found:
                    found.add(target)
                    stack.append(components[target])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


@functools.cache
def taskset_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of a task set file: one set (`name`, `tasks`, `workflows`) or
    several under `tasksets`."""
    with GENERATING:  # as the served schema (scheduler_project/schema.py)
        schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    reachable = _reachable(components, WORKFLOW_ENTRY, _reachable(components, ENTRY, set()))
    defs = {name: _convert(components[name]) for name in sorted(reachable)}
    for name in NOT_IN_A_SET:
        defs[ENTRY]["properties"].pop(name, None)
    defs["HandlerName"] = {"type": "string", "description": "A handler registered in the service."}
    defs["TaskSetFile"] = {
        "type": "object",
        "description": "One task set: the service makes the set `name` exactly `tasks` and "
        "`workflows` (none when absent).",
        "properties": {
            "$schema": {"type": "string"},
            "name": {"type": "string", "pattern": NAME.pattern},
            "tasks": {"type": "array", "items": {"$ref": f"#/$defs/{ENTRY}"}},
            "workflows": {"type": "array", "items": {"$ref": f"#/$defs/{WORKFLOW_ENTRY}"}},
        },
        "required": ["name", "tasks"],
        "additionalProperties": False,
    }
    several = {
        "type": "object",
        "properties": {
            "$schema": {"type": "string"},
            "tasksets": {"type": "array", "items": {"$ref": "#/$defs/TaskSetFile"}},
        },
        "required": ["tasksets"],
        "additionalProperties": False,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Task set file",
        "oneOf": [{"$ref": "#/$defs/TaskSetFile"}, several],
        "$defs": defs,
    }


class TaskSetSchemaView(APIView):
    permission_classes = [AllowAny]
    authentication_classes: list[type] = []

    @extend_schema(
        summary="The JSON Schema of a task set file",
        description="For editors (autocomplete, validation) and `schedctl validate`: every field "
        "a task set entry takes, as PUT /api/v1/tasksets/{name} takes it. No token needed.",
        responses={200: OpenApiResponse(description="A JSON Schema (2020-12).")},
    )
    def get(self, request: Request) -> Response:
        return Response(taskset_schema())
