"""Task sets take every field a task's create takes, and a task read and PUT back is no drift."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tasks.task_fields import BODY_FIELDS

pytestmark = pytest.mark.django_db

URL = "/api/v1/tasksets/limits"
ENTRY = {
    "key": "sync",
    "kind": "handler",
    "payload": {"name": "noop"},
    "schedule": {"type": "cron", "expression": "0 3 * * *"},
}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("concurrency", {"key": "db", "limit": 2, "scope": "owner"}),
        ("rate_limit", {"key": "crm", "limit": 5, "per": 60, "scope": "owner"}),
    ],
)
@pytest.mark.parametrize("dry_run", [True, False])
def test_an_entry_with_a_key_applies(
    api: APIClient, field: str, value: dict, dry_run: bool
) -> None:
    query = "?dry_run=true" if dry_run else ""
    response = api.put(URL + query, {"tasks": [{**ENTRY, field: value}]}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["create"][0]["task"][field] == value
    if not dry_run:
        again = api.put(URL, {"tasks": [{**ENTRY, field: value}]}, format="json").json()
        assert (again["unchanged"], again["update"]) == (1, [])


def test_a_task_read_and_put_back_is_no_drift(api: APIClient) -> None:
    created = api.put(URL, {"tasks": [ENTRY]}, format="json").json()["create"][0]["id"]
    shown = api.get(f"/api/v1/tasks/{created}").json()

    body = {name: shown[name] for name in BODY_FIELDS}
    assert api.put(f"/api/v1/tasks/{created}", body, format="json").status_code == 200

    assert api.get(URL + "/drift").json()["drift"] == []
