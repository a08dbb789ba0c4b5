"""A task set's `workflows:` entries: planned (dry run), applied (created, updated, deleted with
the set's other changes, all or nothing), read back, and drift (a change or a deletion made
outside the set)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from notifications.models import Channel
from tasks.models import Task, Workflow, WorkflowRun

pytestmark = pytest.mark.django_db

URL = "/api/v1/tasksets/nightly"
NOOP = {"kind": "handler", "payload": {"name": "noop"}}
TASKS = [{"key": "report", **NOOP, "schedule": {"type": "cron", "expression": "0 3 * * *"}}]


def etl(key: str = "etl", **fields: object) -> dict:
    return {
        "key": key,
        "steps": [
            {"id": "extract", "task": NOOP},
            {"id": "load", "after": ["extract"], "task": NOOP},
        ],
        **fields,
    }


def put(api: APIClient, workflows: list[dict], status: int = 200, **params: str) -> dict:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    body = {"tasks": TASKS, "workflows": workflows}
    response = api.put(f"{URL}?{query}", body, format="json")
    assert response.status_code == status, response.content
    return response.json()


def test_dry_run_plans_the_workflows_and_apply_creates_them_once(api) -> None:
    plan = put(api, [etl()], dry_run="true")
    [create] = plan["workflows"]["create"]
    assert (create["key"], create["id"], create["workflow"]["name"]) == ("etl", None, "etl")
    assert [s["after"] for s in create["workflow"]["steps"]] == [[], ["extract"]]
    assert not Workflow.objects.exists() and not Task.objects.exists()

    applied = put(api, [etl()])
    workflow_id = applied["workflows"]["create"][0]["id"]
    workflow = api.get(f"/api/v1/workflows/{workflow_id}").json()
    assert [s["id"] for s in workflow["steps"]] == ["extract", "load"]
    assert [c["key"] for c in applied["create"]] == ["report"]
    again = put(api, [etl()], dry_run="true")
    assert again["workflows"] == {"create": [], "update": [], "delete": [], "unchanged": 1}
    shown = api.get(URL).json()
    assert shown["workflows"] == [
        {"key": "etl", "id": workflow_id, "entry": {"steps": etl()["steps"]}}
    ]
    assert Workflow.objects.get().taskset_key == "etl"


def test_a_changed_entry_updates_the_workflow_and_a_removed_one_deletes_it(api) -> None:
    created = put(api, [etl(), etl("other")])["workflows"]["create"]
    ids = {c["key"]: c["id"] for c in created}
    changed = etl(steps=[{"id": "extract", "task": NOOP}], name="ETL nightly")
    plan = put(api, [changed])["workflows"]
    [update] = plan["update"]
    assert update["id"] == ids["etl"]
    assert set(update["changes"]) == {"name", "steps"}
    assert update["changes"]["name"] == {"from": "etl", "to": "ETL nightly"}
    assert plan["delete"] == [{"key": "other", "id": ids["other"]}]
    workflow = Workflow.objects.get()
    assert (workflow.pk.hex, workflow.name) == (ids["etl"].replace("-", ""), "ETL nightly")
    assert [s["id"] for s in workflow.steps] == ["extract"]


def test_removing_a_workflow_with_a_running_run_needs_force(api) -> None:
    workflow_id = put(api, [etl()])["workflows"]["create"][0]["id"]
    started = api.post(f"/api/v1/workflows/{workflow_id}/run")
    assert started.status_code == 201
    refused = put(api, [], status=409)
    assert "force" in str(refused)
    assert Workflow.objects.filter(pk=workflow_id).exists()
    put(api, [], force="true")
    assert not Workflow.objects.exists()
    assert not WorkflowRun.objects.exists()  # deleted with its workflow, cancelled first


def test_a_change_or_deletion_outside_the_set_is_drift_planned_back(api, user) -> None:
    channel = Channel.objects.create(owner=user, kind="webhook", config={"url": "http://x/"})
    ids = {c["key"]: c["id"] for c in put(api, [etl(), etl("other")])["workflows"]["create"]}
    Workflow.objects.filter(pk=ids["etl"]).update(name="renamed by hand")
    assert api.delete(f"/api/v1/workflows/{ids['other']}").status_code == 204
    drift = api.get(f"{URL}/drift").json()
    assert drift["drift"] == []  # the tasks did not drift
    assert drift["workflows"] == [
        {
            "key": "etl",
            "id": ids["etl"],
            "deleted": False,
            "fields": {"name": {"declared": "etl", "actual": "renamed by hand", "ignored": False}},
        },
        {"key": "other", "id": ids["other"], "deleted": True, "fields": {}},
    ]
    plan = put(api, [etl(), etl("other")])["workflows"]
    assert plan["update"][0]["changes"] == {"name": {"from": "renamed by hand", "to": "etl"}}
    assert [c["key"] for c in plan["create"]] == ["other"]
    assert api.get(f"{URL}/drift").json()["workflows"] == []
    # A notify naming the owner's channel is compared as validated (canonical id).
    notify = [{"channel": str(channel.id).upper(), "events": ["workflow_failed"]}]
    plan = put(api, [etl(notify=notify), etl("other")])["workflows"]
    assert plan["update"][0]["changes"]["notify"]["to"] == [
        {"channel": str(channel.id), "events": ["workflow_failed"]}
    ]
    assert (
        put(api, [etl(notify=notify), etl("other")], dry_run="true")["workflows"]["unchanged"] == 2
    )


def test_bad_entries_answer_400_naming_the_entry_and_change_nothing(api) -> None:
    cycle = etl(
        steps=[{"id": "a", "after": ["b"], "task": NOOP}, {"id": "b", "after": ["a"], "task": NOOP}]
    )
    answer = put(api, [etl("fine"), cycle], status=400)
    assert answer == {
        "workflows": {
            "1": {
                "steps": {
                    "0": {"after": ["Forms a cycle with the steps it waits for."]},
                    "1": {"after": ["Forms a cycle with the steps it waits for."]},
                }
            }
        }
    }
    answer = put(api, [etl(), etl()], status=400)
    assert answer["workflows"]["1"]["key"] == [
        '"etl" is declared twice; keys are unique within a set.'
    ]
    answer = put(api, [{**etl(), "schedule": {"type": "cron"}}], status=400)
    assert "schedule" in answer["workflows"]["0"]
    assert not Workflow.objects.exists() and not Task.objects.exists()


def test_deleting_the_set_deletes_its_workflows(api) -> None:
    workflow_id = put(api, [etl()])["workflows"]["create"][0]["id"]
    planned = api.delete(f"{URL}?dry_run=true").json()
    assert planned["workflows"]["delete"] == [{"key": "etl", "id": workflow_id}]
    assert Workflow.objects.exists()
    assert api.delete(URL).status_code == 200
    assert not Workflow.objects.exists()


def test_a_workflows_priority_is_declared_planned_and_drifts(api) -> None:
    [created] = put(api, [etl(priority=7)])["workflows"]["create"]
    assert Workflow.objects.get().priority == 7
    assert put(api, [etl(priority=7)], dry_run="true")["workflows"]["unchanged"] == 1
    [update] = put(api, [etl(priority=2)], dry_run="true")["workflows"]["update"]
    assert update["changes"] == {"priority": {"from": 7, "to": 2}}
    Workflow.objects.filter(pk=created["id"]).update(priority=0)
    [drifted] = api.get(f"{URL}/drift").json()["workflows"]
    assert drifted["fields"] == {"priority": {"declared": 7, "actual": 0, "ignored": False}}


def test_a_workflows_expect_is_declared_and_planned(api) -> None:
    put(api, [etl(expect={"success_within": 3600})])
    assert Workflow.objects.get().expect == {"success_within": 3600.0}
    assert (
        put(api, [etl(expect={"success_within": 3600})], dry_run="true")["workflows"]["unchanged"]
        == 1
    )
    [update] = put(api, [etl()], dry_run="true")["workflows"]["update"]
    assert update["changes"] == {"expect": {"from": {"success_within": 3600.0}, "to": {}}}
