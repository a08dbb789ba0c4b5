"""GET /workflows: the caller's workflows, filtered by name, health, schedule and task set."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tasks.models import Workflow

NOOP = {"kind": "handler", "payload": {"name": "noop"}}
DAILY = {"type": "daily", "at": "03:00"}


def create(api: APIClient, name: str, **body: object) -> str:
    steps = [{"id": "a", "task": NOOP}]
    response = api.post("/api/v1/workflows", {"name": name, "steps": steps, **body}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def names(api: APIClient, query: str) -> list[str]:
    response = api.get(f"/api/v1/workflows?{query}")
    assert response.status_code == 200, response.content
    return [workflow["name"] for workflow in response.json()["results"]]


@pytest.mark.django_db
def test_filters_narrow_the_list_and_other_users_never_show(api, other_api) -> None:
    create(api, "export nightly", schedule=DAILY)
    late = create(api, "load warehouse")
    create(api, "on demand")
    create(other_api, "export elsewhere", schedule=DAILY)
    Workflow.objects.filter(pk=late).update(health="overdue")

    assert names(api, "") == ["on demand", "load warehouse", "export nightly"]
    assert names(api, "name=EXPORT") == ["export nightly"]
    assert names(api, "scheduled=true") == ["export nightly"]
    assert names(api, "scheduled=false") == ["on demand", "load warehouse"]
    assert names(api, "health=overdue") == ["load warehouse"]
    assert names(api, "ordering=name") == ["export nightly", "load warehouse", "on demand"]


@pytest.mark.django_db
def test_a_bad_filter_value_is_a_400_naming_it(api) -> None:
    response = api.get("/api/v1/workflows?health=sick")
    assert response.status_code == 400
    assert "health" in response.json()
    response = api.get("/api/v1/workflows?ordering=colour")
    assert response.status_code == 400 and "ordering" in response.json()
