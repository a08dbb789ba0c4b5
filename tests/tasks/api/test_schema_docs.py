"""The schema describes a task's `payload` and `schedule` so that a reader (or a generator) can
use it: a `oneOf` per kind and per schedule type, each branch described with an example, every
example valid against the schema and accepted by the service, and every operation summarised.

Values are checked with an OpenAPI 3.0 validator against the served document itself, so a
`oneOf` that two branches would match (an ambiguous schema) fails here as it fails a client.
"""

from __future__ import annotations

import copy
import ipaddress
import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from jsonschema.exceptions import ValidationError
from openapi_schema_validator import OAS30Validator
from rest_framework.test import APIClient

from scheduler_project import outbound_http
from tasks import handlers, schedules

JSON = {"HTTP_ACCEPT": "application/vnd.oai.openapi+json"}
PAYLOADS = {"handler": "HandlerPayload", "http": "HttpPayload", "executable": "ExecutablePayload"}
SCHEDULES = {kind: f"{kind.capitalize()}Schedule" for kind in schedules.TYPES}
# Where a task's payload and schedule appear, in requests and in answers.
TASK_SCHEMAS = ("TaskInputRequest", "PatchedTaskInputRequest", "TaskOutput")
SCHEDULE_SCHEMAS = (*TASK_SCHEMAS, "PreviewRequest", "SchedulePreviewOutput")


@pytest.fixture
def doc(anon: APIClient, db) -> dict:
    response = anon.get("/api/schema/", **JSON)
    assert response.status_code == 200
    return response.json()


@pytest.fixture(autouse=True)
def public_dns(monkeypatch) -> None:
    # No DNS from a test: the examples' host names resolve to a public address.
    monkeypatch.setattr(
        outbound_http, "_resolve", lambda host, port: [ipaddress.ip_address("93.184.215.14")]
    )


def _null_allowed(node: Any) -> Any:
    """`node` with each `{"allOf": [...], "nullable": true}` (drf-spectacular's nullable nested
    object, which openapi-python-client and schemathesis read as "this or null") written as an
    anyOf with null: OAS30Validator applies `nullable` only beside a `type`."""
    if isinstance(node, list):
        return [_null_allowed(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _null_allowed(value) for key, value in node.items()}
    if node.get("nullable") is True and "allOf" in node and "type" not in node:
        rest = {key: value for key, value in node.items() if key not in ("allOf", "nullable")}
        return {**rest, "anyOf": [{"allOf": node["allOf"]}, {"enum": [None], "nullable": True}]}
    return node


def validator(doc: dict, schema: dict) -> OAS30Validator:
    """A validator of `schema` whose $refs resolve inside the served document."""
    # allOf: in JSON Schema draft 4 (OpenAPI 3.0's) a $ref's siblings are ignored.
    wrapped = {"allOf": [schema], "components": doc["components"]}
    return OAS30Validator(_null_allowed(wrapped))


def component(doc: dict, name: str) -> dict:
    return doc["components"]["schemas"][name]


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def matching_branches(doc: dict, one_of: list[dict], value: Any) -> list[str]:
    return [b["$ref"].rsplit("/", 1)[-1] for b in one_of if validator(doc, b).is_valid(value)]


def test_payload_is_one_of_the_kinds_wherever_a_task_shows(doc: dict) -> None:
    for name in TASK_SCHEMAS:
        payload = component(doc, name)["properties"]["payload"]
        assert payload["oneOf"] == [ref(branch) for branch in PAYLOADS.values()], name
        assert payload["description"]
    handler = component(doc, "HandlerPayload")
    assert handler["required"] == ["name"]
    # The handler names are the registered ones, as an enum a generated client offers.
    assert component(doc, "HandlerName")["enum"] == handlers.names()
    assert {"noop", "echo", "sleep", "fail"} <= set(handlers.names())
    assert set(component(doc, "HttpPayload")["properties"]) == {
        "url",
        "method",
        "headers",
        "body",
        "timeout",
        "expect_status",
    }
    assert set(component(doc, "ExecutablePayload")["properties"]) == {"args", "env"}


def test_schedule_is_one_of_the_types_told_apart_by_type(doc: dict) -> None:
    for name in SCHEDULE_SCHEMAS:
        schedule = component(doc, name)["properties"]["schedule"]
        assert schedule["oneOf"] == [ref(branch) for branch in SCHEDULES.values()], name
        assert schedule["discriminator"] == {
            "propertyName": "type",
            "mapping": {kind: ref(branch)["$ref"] for kind, branch in SCHEDULES.items()},
        }
    # A schedule may be left out or null on a create (once, now); an answer always has one.
    assert component(doc, "TaskInputRequest")["properties"]["schedule"]["nullable"] is True
    assert "nullable" not in component(doc, "TaskOutput")["properties"]["schedule"]
    recurring = component(doc, "CronSchedule")["properties"]
    assert {
        "timezone",
        "start_at",
        "end_at",
        "max_runs",
        "jitter",
        "misfire",
        "misfire_grace",
        "overlap",
        "anchor",
        "expression",
    } <= set(recurring)


def test_every_branch_is_described_with_an_example_that_matches_it_alone(doc: dict) -> None:
    for branches in (PAYLOADS.values(), SCHEDULES.values()):
        one_of = [ref(branch) for branch in branches]
        for branch in branches:
            schema = component(doc, branch)
            assert schema["description"] and schema["additionalProperties"] is False, branch
            assert matching_branches(doc, one_of, schema["example"]) == [branch]
            for prop, spec in schema["properties"].items():
                assert spec.get("description") or prop == "type", (branch, prop)


def test_every_example_in_the_schema_is_valid_against_it(doc: dict) -> None:
    found = 0
    for name, schema in doc["components"]["schemas"].items():
        if "example" in schema:
            validator(doc, ref(name)).validate(schema["example"])
            found += 1
    for operations in doc["paths"].values():
        for operation in operations.values():
            bodies = [operation.get("requestBody", {})]
            bodies += [answer for answer in operation["responses"].values()]
            for media in (m for body in bodies for m in body.get("content", {}).values()):
                for example in media.get("examples", {}).values():
                    validator(doc, media["schema"]).validate(example["value"])
                    found += 1
    answers = doc["paths"]["/api/v1/tasks"]["post"]["responses"]["201"]["content"]
    assert answers["application/json"]["examples"], "the create shows a task as answered"
    assert found >= len(PAYLOADS) + len(SCHEDULES) + 3


def test_every_request_example_is_accepted_and_answered_per_the_schema(
    doc: dict, api: APIClient
) -> None:
    sent: dict[tuple[str, str], set[str]] = {}
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {})
            for name, example in content.get("application/json", {}).get("examples", {}).items():
                response = api.generic(
                    method.upper(), path, json.dumps(example["value"]), "application/json"
                )
                where = (method.upper(), path, name)
                assert 200 <= response.status_code < 300, (where, response.content)
                answer = operation["responses"][str(response.status_code)]
                schema = answer["content"]["application/json"]["schema"]
                validator(doc, schema).validate(response.json())
                sent.setdefault((method.upper(), path), set()).add(name)
    creates = doc["paths"]["/api/v1/tasks"]["post"]["requestBody"]["content"]["application/json"]
    kinds = {example["value"]["kind"] for example in creates["examples"].values()}
    assert kinds >= {"handler", "http"} and len(sent[("POST", "/api/v1/tasks")]) >= 3
    assert ("POST", "/task") in sent
    previews = doc["paths"]["/api/v1/schedules/preview"]["post"]["requestBody"]["content"]
    types = {
        e["value"]["schedule"]["type"] for e in previews["application/json"]["examples"].values()
    }
    assert types == set(schedules.TYPES)


def test_each_branch_example_makes_a_task_whose_answer_matches_that_branch(
    doc: dict, api: APIClient
) -> None:
    payload_one_of = [ref(branch) for branch in PAYLOADS.values()]
    schedule_one_of = [ref(branch) for branch in SCHEDULES.values()]
    for kind, branch in PAYLOADS.items():
        body = {"kind": kind, "payload": component(doc, branch)["example"]}
        if kind == "executable":
            script = SimpleUploadedFile("job.sh", b"#!/bin/sh\necho hi\n")
            form = {"file": script, "payload": json.dumps(body["payload"])}
            response = api.post("/api/v1/tasks/upload", form, format="multipart")
        else:
            response = api.post("/api/v1/tasks", body, format="json")
        assert response.status_code == 201, (kind, response.content)
        assert matching_branches(doc, payload_one_of, response.json()["payload"]) == [branch]
    for kind, branch in SCHEDULES.items():
        body = {"kind": "handler", "payload": {"name": "noop"}}
        response = api.post(
            "/api/v1/tasks", {**body, "schedule": component(doc, branch)["example"]}, format="json"
        )
        assert response.status_code == 201, (kind, response.content)
        shown = response.json()["schedule"]
        assert matching_branches(doc, schedule_one_of, shown) == [branch]


def test_a_value_outside_its_branch_is_refused_by_the_schema(doc: dict) -> None:
    # What makes each oneOf unambiguous: closed branches, required discriminating fields.
    payload_one_of = [ref(branch) for branch in PAYLOADS.values()]
    assert matching_branches(doc, payload_one_of, {"name": "echo", "url": "https://x"}) == []
    assert matching_branches(doc, payload_one_of, {"name": "no-such-handler"}) == []
    assert matching_branches(doc, payload_one_of, {}) == ["ExecutablePayload"]
    cron = copy.deepcopy(component(doc, "CronSchedule")["example"])
    with pytest.raises(ValidationError):
        validator(doc, ref("CronSchedule")).validate({**cron, "every": 60})
    with pytest.raises(ValidationError):
        validator(doc, ref("IntervalSchedule")).validate({"type": "interval"})


def test_every_operation_has_a_summary_and_its_own_description(doc: dict) -> None:
    summaries = []
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            assert operation.get("summary"), where
            assert operation.get("description"), where
            # Not a view's docstring, which names routes for whoever reads the code.
            assert not operation["description"].startswith(("POST /", "GET /", "PUT /")), where
            summaries.append(operation["summary"])
    assert len(set(summaries)) == len(summaries)
