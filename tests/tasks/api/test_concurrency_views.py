"""Concurrency keys through the API: a task's `concurrency` (create, update, batch, seed),
its 400s naming the field, and /api/v1/concurrency-keys (list, declare, change a limit)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

from tasks.models import ConcurrencyKey, Run, Task
from tests.conftest import client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

DB = {"key": "warehouse-db", "limit": 2}


def test_a_task_names_a_key_of_its_owner_and_its_runs_carry_it(create: Callable) -> None:
    body = create(concurrency=DB)
    assert body["concurrency"] == {**DB, "scope": "owner"}
    task = Task.objects.get(pk=body["id"])
    key = ConcurrencyKey.objects.get(pk=task.concurrency_key_id)
    assert (key.name, key.max_running, key.declared) == ("warehouse-db", 2, False)
    assert set(Run.objects.filter(task=task).values_list("concurrency_key_id", flat=True)) == {
        key.pk
    }
    assert create()["concurrency"] is None


def test_two_owners_get_two_keys_and_a_task_limit_follows_the_latest_task(
    create: Callable, other_api: APIClient
) -> None:
    create(concurrency=DB)
    create(concurrency={**DB, "limit": 3})
    other = other_api.post(
        "/api/v1/tasks",
        {"kind": "handler", "payload": {"name": "noop"}, "concurrency": DB},
        format="json",
    )
    assert other.status_code == 201
    assert sorted(ConcurrencyKey.objects.values_list("max_running", flat=True)) == [2, 3]


@pytest.mark.parametrize(
    ("concurrency", "field", "message"),
    [
        ({"limit": 2}, "key", "This field is required."),
        ({"key": "db"}, "limit", "This field is required."),
        ({"key": "db", "limit": 0}, "limit", "Ensure this value is greater than or equal to 1."),
        ({"key": "no spaces", "limit": 1}, "key", None),
        ({"key": "db", "limit": 1, "scope": "team"}, "scope", None),
        ({"key": "db", "scope": "global"}, "key", "No global concurrency key 'db' is declared."),
        ({"key": "db", "limit": 1, "color": "red"}, "color", None),
    ],
)
def test_bad_concurrency_is_a_400_naming_the_field(
    api: APIClient, concurrency: dict, field: str, message: str | None
) -> None:
    response = api.post(
        "/api/v1/tasks",
        {"kind": "handler", "payload": {"name": "noop"}, "concurrency": concurrency},
        format="json",
    )
    assert response.status_code == 400, response.content
    errors = response.json()["errors"] if "errors" in response.json() else response.json()
    text = str(errors)
    assert "concurrency" in text and field in text
    if message:
        assert message in text
    assert not Task.objects.exists() and not ConcurrencyKey.objects.exists()


def test_a_batch_names_the_item_and_field(api: APIClient) -> None:
    good = {"kind": "handler", "payload": {"name": "noop"}, "concurrency": DB}
    bad = {**good, "concurrency": {"key": "db"}}
    response = api.post("/api/v1/tasks/batch", {"tasks": [good, bad]}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "tasks": {"1": {"concurrency": {"limit": ["This field is required."]}}}
    }
    response = api.post("/api/v1/tasks/batch", {"tasks": [good, good]}, format="json")
    assert response.status_code == 201, response.content
    assert ConcurrencyKey.objects.count() == 1
    assert Run.objects.filter(concurrency_key_id__isnull=True).count() == 0


def test_an_update_moves_the_unclaimed_runs_to_the_new_key(
    api: APIClient, create: Callable
) -> None:
    body = create(concurrency=DB)
    response = api.patch(
        f"/api/v1/tasks/{body['id']}", {"concurrency": {"key": "other", "limit": 1}}, format="json"
    )
    assert response.status_code == 200, response.content
    other = ConcurrencyKey.objects.get(name="other")
    assert set(
        Run.objects.filter(task_id=body["id"]).values_list("concurrency_key_id", flat=True)
    ) == {other.pk}
    response = api.patch(f"/api/v1/tasks/{body['id']}", {"concurrency": None}, format="json")
    assert response.status_code == 200 and response.json()["concurrency"] is None
    assert not Run.objects.filter(task_id=body["id"], concurrency_key_id__isnull=False).exists()


def test_the_seed_route_takes_concurrency_too(api: APIClient) -> None:
    response = api.post(
        "/task",
        {"kind": "handler", "payload": {"name": "noop"}, "concurrency": {"key": "db"}},
        format="json",
    )
    assert response.status_code == 400 and "limit" in response.content.decode()


def test_keys_are_listed_with_what_runs_and_waits(api: APIClient, create: Callable) -> None:
    create(concurrency=DB)
    [key] = api.get("/api/v1/concurrency-keys").json()["results"]
    assert {k: key[k] for k in ("key", "scope", "limit", "declared", "running", "waiting")} == {
        "key": "warehouse-db",
        "scope": "owner",
        "limit": 2,
        "declared": False,
        "running": 0,
        "waiting": 1,
    }


def test_a_limit_set_on_the_key_wins_over_the_tasks(api: APIClient, create: Callable) -> None:
    create(concurrency=DB)
    key = ConcurrencyKey.objects.get()
    response = api.patch(f"/api/v1/concurrency-keys/{key.pk}", {"limit": 5}, format="json")
    assert response.status_code == 200 and response.json()["limit"] == 5
    create(concurrency={**DB, "limit": 1})
    key.refresh_from_db()
    assert (key.max_running, key.declared) == (5, True)
    response = api.patch(f"/api/v1/concurrency-keys/{key.pk}", {"limit": 0}, format="json")
    assert response.status_code == 400 and "limit" in response.content.decode()


def test_global_keys_are_declared_by_operators_and_named_by_anyone(
    api: APIClient, create: Callable
) -> None:
    body = {"key": "crm", "limit": 3, "scope": "global"}
    assert api.post("/api/v1/concurrency-keys", body, format="json").status_code == 403
    operator = client_for(UserFactory(is_staff=True))
    response = operator.post("/api/v1/concurrency-keys", body, format="json")
    assert response.status_code == 201, response.content
    task = create(concurrency={"key": "crm", "scope": "global"})
    key = ConcurrencyKey.objects.get(owner__isnull=True)
    assert Task.objects.get(pk=task["id"]).concurrency_key_id == key.pk
    [listed] = api.get("/api/v1/concurrency-keys").json()["results"]
    assert (listed["scope"], listed["limit"]) == ("global", 3)
    assert (
        api.patch(f"/api/v1/concurrency-keys/{key.pk}", {"limit": 1}, format="json").status_code
        == 403
    )


def test_another_owners_key_is_a_404(create: Callable, other_api: APIClient) -> None:
    create(concurrency=DB)
    key = ConcurrencyKey.objects.get()
    assert other_api.get(f"/api/v1/concurrency-keys/{key.pk}").status_code == 404
    assert (
        other_api.patch(
            f"/api/v1/concurrency-keys/{key.pk}", {"limit": 9}, format="json"
        ).status_code
        == 404
    )
