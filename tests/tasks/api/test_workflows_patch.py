"""PATCH /workflows/{id} and a workflow's schedule: validated as a create (a bad step named by
its index, a bad schedule as a task's), applied to the workflow runs started afterwards."""

from __future__ import annotations

from datetime import timedelta

import pytest
from rest_framework.test import APIClient

from tasks.db import db_now
from tasks.models import Run, Workflow, WorkflowStep

NOOP = {"kind": "handler", "payload": {"name": "noop"}}
TWO = [{"id": "a", "task": NOOP}, {"id": "b", "after": ["a"], "task": NOOP}]


def create(api: APIClient, **body: object) -> dict:
    response = api.post("/api/v1/workflows", {"name": "wf", "steps": TWO, **body}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def patch(api: APIClient, workflow: dict, body: dict):
    return api.patch(f"/api/v1/workflows/{workflow['id']}", body, format="json")


@pytest.mark.django_db
def test_a_schedule_is_normalized_and_sets_the_next_run(api) -> None:
    workflow = create(api, schedule={"type": "cron", "expression": "0 3 * * *"})
    assert workflow["schedule"]["type"] == "cron"
    assert workflow["schedule"]["misfire"] == "run_once"  # the defaults, shown as a task's
    assert workflow["schedule"]["overlap"] == "allow"
    stored = Workflow.objects.get(pk=workflow["id"])
    assert stored.next_run_at is not None and stored.next_run_at > db_now()
    assert (stored.next_run_at.hour, stored.next_run_at.minute) == (3, 0)
    assert create(api)["schedule"] is None  # none: started on demand only
    assert create(api)["next_run_at"] is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("schedule", "field"),
    [
        ({"type": "cron", "expression": "61 * * * *"}, "expression"),
        ({"type": "cron", "expression": "* * * * * *"}, "expression"),  # every second: opt in
        ({"type": "daily", "at": "09:00", "overlap": "never"}, "overlap"),
        ({"type": "daily", "at": "09:00", "misfire": "sometimes"}, "misfire"),
        ({"type": "daily", "at": "09:00", "exclude": ["no-such-calendar"]}, "exclude[0]"),
        ({"type": "weekly"}, "days"),
    ],
)
def test_a_bad_schedule_is_a_400_naming_its_field(api, schedule, field) -> None:
    response = api.post(
        "/api/v1/workflows", {"name": "wf", "steps": TWO, "schedule": schedule}, format="json"
    )
    assert response.status_code == 400, response.content
    assert field in response.json()["schedule"], response.json()
    workflow = create(api)
    changed = patch(api, workflow, {"schedule": schedule})
    assert changed.status_code == 400, changed.content
    assert field in changed.json()["schedule"]
    assert Workflow.objects.get(pk=workflow["id"]).schedule is None


@pytest.mark.django_db
def test_every_second_needs_the_opt_in(api) -> None:
    every_second = {"type": "cron", "expression": "* * * * * *", "allow_every_second": True}
    assert create(api, schedule=every_second)["schedule"]["allow_every_second"] is True


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("steps", "errors"),
    [
        (
            [{"id": "a", "task": NOOP}, {"id": "b", "after": ["x"], "task": NOOP}],
            {"1": {"after": ["Names no step: 'x'."]}},
        ),
        (
            [{"id": "a", "task": NOOP}, {"id": "a", "task": NOOP}],
            {"1": {"id": ["Duplicate step id 'a'."]}},
        ),
        (
            [{"id": "a", "after": ["b"], "task": NOOP}, {"id": "b", "after": ["a"], "task": NOOP}],
            {
                "0": {"after": ["Forms a cycle with the steps it waits for."]},
                "1": {"after": ["Forms a cycle with the steps it waits for."]},
            },
        ),
        ([{"after": ["a"], "task": NOOP}], {"0": {"id": ["This field is required."]}}),
        ([{"id": "a", "task": {"kind": "handler", "priority": 11}}], None),
    ],
)
def test_patch_validates_steps_as_create_does(api, steps, errors) -> None:
    workflow = create(api)
    response = patch(api, workflow, {"steps": steps})
    assert response.status_code == 400, response.content
    if errors is not None:
        assert response.json() == {"steps": errors}
    else:
        assert "priority" in response.json()["steps"]["0"]["task"]
    assert Workflow.objects.get(pk=workflow["id"]).steps == workflow["steps"]


@pytest.mark.django_db
def test_patch_refuses_unknown_fields_and_empty_steps(api) -> None:
    workflow = create(api)
    assert patch(api, workflow, {"colour": "red"}).json() == {
        "colour": [
            "Unknown field; this object takes expect, name, notify, priority, schedule, steps."
        ]
    }
    assert "steps" in patch(api, workflow, {"steps": []}).json()
    assert "name" in patch(api, workflow, {"name": ""}).json()


@pytest.mark.django_db
def test_patch_changes_what_it_names_and_keeps_the_rest(api) -> None:
    workflow = create(api)
    renamed = patch(api, workflow, {"name": "nightly"})
    assert renamed.status_code == 200, renamed.content
    assert (renamed.json()["name"], renamed.json()["steps"]) == ("nightly", workflow["steps"])

    daily = {"type": "daily", "at": "04:30", "timezone": "Europe/Berlin"}
    scheduled = patch(api, workflow, {"schedule": daily}).json()
    assert scheduled["schedule"]["at"] == "04:30:00" and scheduled["name"] == "nightly"
    first = Workflow.objects.get(pk=workflow["id"]).next_run_at
    assert first is not None and db_now() < first <= db_now() + timedelta(days=1, hours=1)

    # A schedule sent, even the same one as shown, starts again from its first occurrence.
    Workflow.objects.filter(pk=workflow["id"]).update(next_run_at=first + timedelta(days=7))
    assert patch(api, workflow, {"schedule": scheduled["schedule"]}).status_code == 200
    assert Workflow.objects.get(pk=workflow["id"]).next_run_at == first
    # A change of name alone leaves the schedule's progress as it is.
    Workflow.objects.filter(pk=workflow["id"]).update(next_run_at=first + timedelta(days=7))
    patch(api, workflow, {"name": "nightly-2"})
    assert Workflow.objects.get(pk=workflow["id"]).next_run_at == first + timedelta(days=7)

    cleared = patch(api, workflow, {"schedule": None}).json()
    assert (cleared["schedule"], cleared["next_run_at"]) == (None, None)


@pytest.mark.django_db
def test_a_workflow_run_in_flight_keeps_the_steps_it_started_with(api) -> None:
    workflow = create(api)
    started = api.post(f"/api/v1/workflows/{workflow['id']}/run").json()
    steps = [
        {"id": "x", "task": NOOP},
        {"id": "y", "after": ["x"], "on": "always", "task": NOOP},
        {"id": "z", "after": ["x"], "task": NOOP},
    ]
    assert patch(api, workflow, {"steps": steps}).status_code == 200

    shown = api.get(f"/api/v1/workflow-runs/{started['id']}").json()
    assert [s["id"] for s in shown["steps"]] == ["a", "b"]
    held = WorkflowStep.objects.get(workflow_run=started["id"], step_id="b")
    assert held.after == ["a"] and held.run is not None
    assert held.run.status == Run.Status.WAITING_FOR_RESOURCE

    again = api.post(f"/api/v1/workflows/{workflow['id']}/run").json()
    assert [s["id"] for s in again["steps"]] == ["x", "y", "z"]
    assert WorkflowStep.objects.get(workflow_run=again["id"], step_id="y").run_on == "always"


@pytest.mark.django_db
def test_another_users_workflow_is_404_to_patch(api, other_api) -> None:
    workflow = create(api)
    assert patch(other_api, workflow, {"name": "mine"}).status_code == 404
    assert Workflow.objects.get(pk=workflow["id"]).name == "wf"


@pytest.mark.django_db
def test_patch_changes_the_priority_of_the_runs_started_afterwards(api) -> None:
    workflow = create(api)
    before = api.post(f"/api/v1/workflows/{workflow['id']}/run").json()
    response = patch(api, workflow, {"priority": "high"})
    assert response.status_code == 200, response.content
    assert response.json()["priority"] == 9
    after = api.post(f"/api/v1/workflows/{workflow['id']}/run").json()
    assert {Run.objects.get(pk=s["run"]).priority for s in before["steps"]} == {5}
    assert {Run.objects.get(pk=s["run"]).priority for s in after["steps"]} == {9}
    assert patch(api, workflow, {"priority": -1}).status_code == 400
