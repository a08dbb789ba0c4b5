"""PUT/GET/DELETE /api/v1/tasksets/{name} and its drift: a set declared whole, all or nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from tasks.models import Task
from tests.conftest import client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/tasksets/nightly"


def entry(key: str, expression: str = "0 3 * * *", **fields: object) -> dict:
    return {
        "key": key,
        "kind": "handler",
        "payload": {"name": "noop"},
        "schedule": {"type": "cron", "expression": expression},
        **fields,
    }


THREE = [entry("report"), entry("cleanup", "0 4 * * *"), entry("backup", "30 2 * * *")]


def put(api: APIClient, tasks: list[dict], url: str = URL, **params: str) -> dict:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    response = api.put(f"{url}?{query}", {"tasks": tasks}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_dry_run_plans_creates_and_changes_nothing(api) -> None:
    plan = put(api, THREE, dry_run="true")
    assert [c["key"] for c in plan["create"]] == ["report", "cleanup", "backup"]
    assert all(c["id"] is None for c in plan["create"])
    assert plan["create"][0]["task"]["schedule"]["expression"] == "0 3 * * *"
    assert (plan["update"], plan["delete"], plan["unchanged"]) == ([], [], 0)
    assert not Task.objects.exists()
    assert api.get(URL).status_code == 404


def test_apply_creates_then_plans_nothing(api) -> None:
    applied = put(api, THREE)
    ids = {c["key"]: c["id"] for c in applied["create"]}
    assert applied["version"] == 1
    task = api.get(f"/api/v1/tasks/{ids['cleanup']}").json()
    assert (task["taskset"], task["key"], task["name"]) == ("nightly", "cleanup", "cleanup")
    again = put(api, THREE, dry_run="true")
    assert (again["create"], again["update"], again["delete"], again["unchanged"]) == (
        [],
        [],
        [],
        3,
    )
    shown = api.get(URL).json()
    assert [t["key"] for t in shown["tasks"]] == ["backup", "cleanup", "report"]
    api.post("/api/v1/tasks", {"kind": "handler", "payload": {"name": "noop"}}, format="json")
    listed = api.get("/api/v1/tasks?taskset=nightly").json()
    assert sorted(t["key"] for t in listed["results"]) == ["backup", "cleanup", "report"]


def test_edit_and_removal_plan_one_update_and_one_delete(api) -> None:
    ids = {c["key"]: c["id"] for c in put(api, THREE)["create"]}
    edited = [entry("report", "0 5 * * *"), THREE[1]]
    plan = put(api, edited, dry_run="true")
    assert plan["unchanged"] == 1
    [update] = plan["update"]
    assert update["key"] == "report"
    change = update["changes"]["schedule"]
    assert (change["from"]["expression"], change["to"]["expression"]) == ("0 3 * * *", "0 5 * * *")
    assert set(update["changes"]) == {"schedule"}
    assert plan["delete"] == [{"key": "backup", "id": ids["backup"]}]
    put(api, edited)
    assert Task.objects.get(pk=ids["report"]).schedule["expression"] == "0 5 * * *"
    backup = Task.objects.get(pk=ids["backup"])
    assert (backup.status, backup.taskset) == ("cancelled", None)
    assert put(api, edited, dry_run="true")["unchanged"] == 2


def test_bad_entry_is_a_400_naming_it_and_changes_nothing(api) -> None:
    put(api, THREE)
    before = list(Task.objects.order_by("pk").values_list("pk", "schedule", "status"))
    bad = [entry("report", "0 6 * * *"), entry("new"), entry("x"), entry("bad", "61 * * * *")]
    response = api.put(URL, {"tasks": bad}, format="json")
    assert response.status_code == 400
    assert "expression" in response.json()["tasks"]["3"]["schedule"]
    assert list(Task.objects.order_by("pk").values_list("pk", "schedule", "status")) == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"key": "a", "kind": "handler", "payload": {"name": "noop"}, "priorty": 3}, "priorty"),
        ({"kind": "handler", "payload": {"name": "noop"}}, "key"),
        ({**entry("a"), "dedup_key": "d"}, "dedup_key"),
        ({**entry("a"), "kind": "executable", "payload": {}}, "kind"),
        ({**entry("a"), "ignore_changes": ["colour"]}, "ignore_changes"),
    ],
)
def test_entry_errors_name_the_field(api, body, field) -> None:
    response = api.put(URL, {"tasks": [entry("ok"), body]}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["tasks"]["1"]
    assert not Task.objects.exists()


def test_duplicate_key_is_refused(api) -> None:
    response = api.put(URL, {"tasks": [entry("a"), entry("a")]}, format="json")
    assert response.status_code == 400
    assert "twice" in response.json()["tasks"]["1"]["key"][0]


def test_sets_are_per_owner(api, other_api) -> None:
    put(api, THREE)
    assert other_api.get(URL).status_code == 404
    plan = put(other_api, THREE[:1], dry_run="true")
    assert len(plan["create"]) == 1


def test_delete_dry_run_then_delete(api) -> None:
    put(api, THREE)
    response = api.delete(f"{URL}?dry_run=true")
    assert response.status_code == 200
    assert sorted(d["key"] for d in response.json()["delete"]) == ["backup", "cleanup", "report"]
    assert Task.objects.filter(status="active").count() == 3
    assert api.delete(URL).status_code == 200
    assert set(Task.objects.values_list("status", flat=True)) == {"cancelled"}
    assert api.get(URL).status_code == 404
    assert api.delete(URL).status_code == 404


def test_a_change_through_the_api_is_drift_planned_back(api) -> None:
    ids = {c["key"]: c["id"] for c in put(api, THREE)["create"]}
    patched = api.patch(f"/api/v1/tasks/{ids['report']}", {"priority": 9}, format="json")
    assert patched.status_code == 200
    drift = api.get(f"{URL}/drift").json()["drift"]
    assert drift == [
        {
            "key": "report",
            "id": ids["report"],
            "deleted": False,
            "fields": {"priority": {"declared": 5, "actual": 9, "ignored": False}},
        }
    ]
    plan = put(api, THREE, dry_run="true")
    assert plan["update"] == [
        {"key": "report", "id": ids["report"], "changes": {"priority": {"from": 9, "to": 5}}}
    ]
    put(api, THREE)
    assert Task.objects.get(pk=ids["report"]).priority == 5
    assert api.get(f"{URL}/drift").json()["drift"] == []


def test_relative_schedules_are_not_redeclared_at_each_plan(api) -> None:
    tasks = [
        {**entry("every"), "schedule": {"type": "interval", "every": 600}},
        {**entry("later"), "schedule": {"type": "once", "delay": 3600}},
    ]
    put(api, tasks)
    assert put(api, tasks, dry_run="true")["unchanged"] == 2


def test_a_pause_is_drift_unless_status_is_ignored(api) -> None:
    ids = {c["key"]: c["id"] for c in put(api, THREE)["create"]}
    assert api.post(f"/api/v1/tasks/{ids['backup']}/pause").status_code == 200
    plan = put(api, THREE, dry_run="true")
    assert plan["update"][0]["changes"] == {"status": {"from": "paused", "to": "active"}}
    kept = [*THREE[:2], {**THREE[2], "ignore_changes": ["status"]}]
    put(api, kept)
    assert Task.objects.get(pk=ids["backup"]).status == "paused"
    [drift] = api.get(f"{URL}/drift").json()["drift"]
    kept_pause = {"declared": "active", "actual": "paused", "ignored": True}
    assert drift["fields"] == {"status": kept_pause}
    put(api, THREE)
    assert Task.objects.get(pk=ids["backup"]).status == "active"


def test_a_task_deleted_outside_the_set_is_drift_and_created_again(api) -> None:
    ids = {c["key"]: c["id"] for c in put(api, THREE)["create"]}
    assert api.delete(f"/api/v1/tasks/{ids['cleanup']}").status_code == 204
    [drift] = api.get(f"{URL}/drift").json()["drift"]
    assert (drift["key"], drift["deleted"]) == ("cleanup", True)
    plan = put(api, THREE)
    assert [c["key"] for c in plan["create"]] == ["cleanup"]
    assert plan["create"][0]["id"] != ids["cleanup"]
    assert api.get(f"{URL}/drift").json()["drift"] == []


def test_a_file_change_to_an_ignored_field_is_kept_out(api) -> None:
    put(api, [{**entry("a"), "ignore_changes": ["schedule"]}])
    plan = put(api, [{**entry("a", "0 9 * * *"), "ignore_changes": ["schedule"]}], dry_run="true")
    assert (plan["update"], plan["unchanged"]) == ([], 1)


def test_an_admin_edit_is_drift(client) -> None:
    operator = UserFactory(is_staff=True, is_superuser=True)
    api = client_for(operator)
    [created] = put(api, THREE[:1])["create"]
    client.force_login(operator)
    form = {
        "owner": operator.pk,
        "name": "renamed",
        "kind": "handler",
        "payload": '{"name": "noop"}',
        "schedule_type": "cron",
        "expression": "0 3 * * *",
        "timezone": "UTC",
        "misfire": "run_once",
        "overlap": "allow",
        "priority": "5",
        "max_attempts": "5",
        "backoff_base": "2",
        "backoff_cap": "600",
        "notify": "[]",
        "runs-TOTAL_FORMS": "0",
        "runs-INITIAL_FORMS": "0",
    }
    changed = client.post(reverse("admin:tasks_task_change", args=[created["id"]]), form)
    assert changed.status_code == 302
    [drift] = api.get(f"{URL}/drift").json()["drift"]
    assert drift["fields"]["name"] == {"declared": "report", "actual": "renamed", "ignored": False}
    plan = put(api, THREE[:1])
    assert plan["update"][0]["changes"]["name"] == {"from": "renamed", "to": "report"}
    assert Task.objects.get(pk=created["id"]).name == "report"
