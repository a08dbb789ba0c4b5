"""GET /api/v1/tasksets/schema: the task set file's JSON Schema, equal to the copy schedctl ships,
accepting what the API accepts and refusing misspelt fields."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from tests.conftest import ROOT

pytestmark = pytest.mark.django_db

SHIPPED = ROOT / "cli" / "schedctl" / "taskset.schema.json"
ENTRY = {
    "key": "report",
    "kind": "http",
    "payload": {"method": "POST", "url": "http://127.0.0.1:9/hook", "body": {"a": 1}},
    "schedule": {"type": "weekly", "days": ["mon"], "at": "09:00", "timezone": "Europe/Berlin"},
    "priority": "high",
    "retry_backoff": {"base": 1, "cap": 60},
    "timeout": None,
    "resources": {"cpu": "500m"},
    "ignore_changes": ["status"],
}


@pytest.fixture
def served(anon) -> dict:
    response = anon.get("/api/v1/tasksets/schema")
    assert response.status_code == 200
    return response.json()


def test_the_shipped_copy_is_what_the_service_serves(served) -> None:
    assert json.loads(SHIPPED.read_text()) == served, "`make taskset-schema` rewrites the copy"


def test_the_shipped_cron_parser_is_the_services() -> None:
    shipped = ROOT / "cli" / "schedctl" / "schedule_cron.py"
    served = ROOT / "tasks" / "schedule_cron.py"
    assert shipped.read_text() == served.read_text(), "`make taskset-schema` rewrites the copy"


def test_what_the_api_takes_the_schema_takes(served, api) -> None:
    body = {"name": "n", "tasks": [ENTRY]}
    Draft202012Validator(served).validate(body)
    Draft202012Validator(served).validate({"tasksets": [body]})
    response = api.put("/api/v1/tasksets/n?dry_run=true", {"tasks": [ENTRY]}, format="json")
    assert response.status_code == 200, response.content


@pytest.mark.parametrize(
    "entry",
    [
        {**ENTRY, "priorty": 1},
        {**ENTRY, "dedup_key": "d"},
        {**ENTRY, "schedule": {"type": "weekly", "days": ["mon"], "at": "09:00", "zone": "UTC"}},
        {**ENTRY, "ignore_changes": ["colour"]},
        {key: value for key, value in ENTRY.items() if key != "key"},
    ],
)
def test_the_schema_refuses_what_the_api_refuses(served, api, entry) -> None:
    assert not Draft202012Validator(served).is_valid({"name": "n", "tasks": [entry]})
    response = api.put("/api/v1/tasksets/n?dry_run=true", {"tasks": [entry]}, format="json")
    assert response.status_code == 400
