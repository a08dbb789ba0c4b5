"""The workflow API: validation that names the step, reads, lists, delete, per-user isolation."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tasks.models import Run, Workflow, WorkflowRun

NOOP = {"kind": "handler", "payload": {"name": "noop"}}


def create(api: APIClient, steps: list[dict], name: str = "wf"):
    return api.post("/api/v1/workflows", {"name": name, "steps": steps}, format="json")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("steps", "errors"),
    [
        (
            [{"id": "a", "task": NOOP}, {"id": "b", "after": ["a", "x"], "task": NOOP}],
            {"1": {"after": ["Names no step: 'x'."]}},
        ),
        (
            [{"id": "a", "task": NOOP}, {"id": "a", "task": NOOP}],
            {"1": {"id": ["Duplicate step id 'a'."]}},
        ),
        (
            [
                {"id": "a", "task": NOOP},
                {"id": "b", "after": ["a", "c"], "task": NOOP},
                {"id": "c", "after": ["b"], "task": NOOP},
            ],
            {
                "1": {"after": ["Forms a cycle with the steps it waits for."]},
                "2": {"after": ["Forms a cycle with the steps it waits for."]},
            },
        ),
        (
            [{"id": "a", "after": ["a"], "task": NOOP}],
            {"0": {"after": ["Forms a cycle with the steps it waits for."]}},
        ),
        (
            [{"id": "a", "task": {**NOOP, "schedule": {"type": "once", "delay": 1}}}],
            {"0": {"task": {"schedule": ["Not allowed in a workflow step."]}}},
        ),
    ],
)
def test_an_invalid_workflow_is_a_400_naming_the_step(api, steps, errors) -> None:
    response = create(api, steps)
    assert response.status_code == 400, response.content
    assert response.json() == {"steps": errors}
    assert not Workflow.objects.exists()


@pytest.mark.django_db
def test_a_step_body_is_validated_as_a_task_body(api) -> None:
    response = create(api, [{"id": "a", "task": {"kind": "handler", "priority": 11}}])
    assert response.status_code == 400
    assert set(response.json()["steps"]["0"]["task"]) == {"priority"}


@pytest.mark.django_db
def test_an_unknown_on_is_a_400_naming_the_step(api) -> None:
    response = create(api, [{"id": "a", "on": "sometimes", "task": NOOP}])
    assert response.status_code == 400
    assert set(response.json()["steps"]["0"]) == {"on"}


@pytest.mark.django_db
def test_create_read_list_run_and_delete(api) -> None:
    created = create(api, [{"id": "a", "task": NOOP}, {"id": "b", "after": ["a"], "task": NOOP}])
    assert created.status_code == 201
    body = created.json()
    assert body["steps"] == [
        {"id": "a", "after": [], "on": "success", "task": NOOP},
        {"id": "b", "after": ["a"], "on": "success", "task": NOOP},
    ]
    assert api.get(f"/api/v1/workflows/{body['id']}").json()["name"] == "wf"
    assert [w["id"] for w in api.get("/api/v1/workflows").json()["results"]] == [body["id"]]
    started = api.post(f"/api/v1/workflows/{body['id']}/run").json()
    assert started["status"] == "running" and started["finished_at"] is None
    assert [(s["id"], s["status"]) for s in started["steps"]] == [
        ("a", "scheduled"),
        ("b", "waiting_for_resource"),
    ]
    listed = api.get(f"/api/v1/workflows/{body['id']}/runs").json()["results"]
    assert [r["id"] for r in listed] == [started["id"]]
    assert api.get(f"/api/v1/workflow-runs/{started['id']}").json() == started
    assert api.delete(f"/api/v1/workflows/{body['id']}").status_code == 204
    assert not WorkflowRun.objects.exists()
    # The running workflow run was cancelled first: none of its steps is left to run.
    assert set(Run.objects.values_list("status", flat=True)) == {"cancelled"}


@pytest.mark.django_db
def test_another_users_workflows_and_runs_are_404(api, other_api) -> None:
    workflow = create(api, [{"id": "a", "task": NOOP}]).json()
    workflow_run = api.post(f"/api/v1/workflows/{workflow['id']}/run").json()
    assert other_api.get(f"/api/v1/workflows/{workflow['id']}").status_code == 404
    assert other_api.post(f"/api/v1/workflows/{workflow['id']}/run").status_code == 404
    assert other_api.get(f"/api/v1/workflows/{workflow['id']}/runs").status_code == 404
    assert other_api.delete(f"/api/v1/workflows/{workflow['id']}").status_code == 404
    assert other_api.get(f"/api/v1/workflow-runs/{workflow_run['id']}").status_code == 404
    assert other_api.post(f"/api/v1/workflow-runs/{workflow_run['id']}/cancel").status_code == 404
    assert other_api.post(f"/api/v1/workflow-runs/{workflow_run['id']}/retry").status_code == 404
    assert other_api.get("/api/v1/workflows").json()["results"] == []
    assert WorkflowRun.objects.get().status == "running"


@pytest.mark.django_db
def test_a_step_without_priority_runs_at_the_workflows(api) -> None:
    steps = [
        {"id": "a", "task": NOOP},
        {"id": "b", "after": ["a"], "task": {**NOOP, "priority": 2}},
    ]
    response = api.post(
        "/api/v1/workflows", {"name": "wf", "steps": steps, "priority": 8}, format="json"
    )
    assert response.status_code == 201, response.content
    workflow = response.json()
    assert workflow["priority"] == 8
    assert api.get(f"/api/v1/workflows/{workflow['id']}").json()["priority"] == 8
    started = api.post(f"/api/v1/workflows/{workflow['id']}/run").json()
    runs = {s["id"]: Run.objects.get(pk=s["run"]) for s in started["steps"]}
    assert (runs["a"].priority, runs["a"].task.priority) == (8, 8)
    assert (runs["b"].priority, runs["b"].task.priority) == (2, 2)  # the step's own wins


@pytest.mark.django_db
def test_a_workflows_priority_defaults_to_5_and_is_validated(api) -> None:
    created = create(api, [{"id": "a", "task": NOOP}]).json()
    assert created["priority"] == 5
    started = api.post(f"/api/v1/workflows/{created['id']}/run").json()
    assert Run.objects.get(pk=started["steps"][0]["run"]).priority == 5
    response = api.post(
        "/api/v1/workflows",
        {"name": "wf", "steps": [{"id": "a", "task": NOOP}], "priority": 10},
        format="json",
    )
    assert response.status_code == 400
    assert set(response.json()) == {"priority"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("expect", "errors"),
    [
        ({"success_within": 0}, {"success_within"}),
        ({"success_within": "soon"}, {"success_within"}),
        ({"start_within": 10}, {"start_within"}),
    ],
)
def test_a_bad_expect_is_a_400_naming_its_member(api, expect, errors) -> None:
    body = {"name": "wf", "steps": [{"id": "a", "task": NOOP}], "expect": expect}
    response = api.post("/api/v1/workflows", body, format="json")
    assert response.status_code == 400
    assert set(response.json()["expect"]) == errors
    assert not Workflow.objects.exists()


@pytest.mark.django_db
def test_expect_defaults_to_none_and_health_to_ok(api) -> None:
    created = create(api, [{"id": "a", "task": NOOP}]).json()
    assert (created["expect"], created["health"]) == ({}, "ok")
    url = f"/api/v1/workflows/{created['id']}"
    changed = api.patch(url, {"expect": {"success_within": 3600}}, format="json").json()
    assert (changed["expect"], changed["health"]) == ({"success_within": 3600.0}, "ok")
    assert api.get(url).json()["expect"] == {"success_within": 3600.0}
