"""Rate limits through the API: a task's `rate_limit` (create, update, batch), its 400s naming
the field, and /api/v1/rate-limits (list with the window's use, declare, change)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from tasks.models import RateKey, Run, Task
from tasks.transitions import claim
from tests.conftest import client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

CRM = {"key": "crm-api", "limit": 10, "per": 60}


def test_a_task_names_a_rate_key_of_its_owner_and_its_runs_carry_it(create: Callable) -> None:
    body = create(rate_limit=CRM)
    assert body["rate_limit"] == {**CRM, "scope": "owner"}
    task = Task.objects.get(pk=body["id"])
    key = RateKey.objects.get(pk=task.rate_key_id)
    assert (key.name, key.rate_limit, key.per_seconds, key.declared) == ("crm-api", 10, 60, False)
    assert set(Run.objects.filter(task=task).values_list("rate_key_id", flat=True)) == {key.pk}
    assert create()["rate_limit"] is None
    # The latest task naming an undeclared key sets its limit and window.
    create(rate_limit={**CRM, "limit": 4, "per": 30})
    key.refresh_from_db()
    assert (key.rate_limit, key.per_seconds) == (4, 30)


@pytest.mark.parametrize(
    ("rate_limit", "field", "message"),
    [
        ({"limit": 2, "per": 1}, "key", "This field is required."),
        ({"key": "crm", "per": 60}, "limit", "This field is required."),
        ({"key": "crm", "limit": 2}, "per", "This field is required."),
        ({"key": "crm", "limit": 0, "per": 60}, "limit", "greater than or equal to 1."),
        ({"key": "crm", "limit": 1, "per": 0}, "per", "greater than or equal to 1."),
        ({"key": "crm", "limit": 1, "per": 1.5}, "per", "A valid integer is required."),
        ({"key": "no spaces", "limit": 1, "per": 1}, "key", None),
        ({"key": "crm", "scope": "global"}, "key", "No global rate key 'crm' is declared."),
        ({"key": "crm", "limit": 1, "per": 1, "burst": 3}, "burst", None),
    ],
)
def test_bad_rate_limit_is_a_400_naming_the_field(
    api: APIClient, rate_limit: dict, field: str, message: str | None
) -> None:
    response = api.post(
        "/api/v1/tasks",
        {"kind": "handler", "payload": {"name": "noop"}, "rate_limit": rate_limit},
        format="json",
    )
    assert response.status_code == 400, response.content
    errors = response.json()
    assert field in errors["rate_limit"], errors
    if message:
        assert message in str(errors["rate_limit"][field])
    assert not Task.objects.exists() and not RateKey.objects.exists()


def test_a_batch_names_the_item_and_field(api: APIClient) -> None:
    good = {"kind": "handler", "payload": {"name": "noop"}, "rate_limit": CRM}
    bad = {**good, "rate_limit": {"key": "crm-api", "limit": 1}}
    response = api.post("/api/v1/tasks/batch", {"tasks": [good, bad]}, format="json")
    assert response.status_code == 400
    assert response.json() == {"tasks": {"1": {"rate_limit": {"per": ["This field is required."]}}}}
    response = api.post("/api/v1/tasks/batch", {"tasks": [good, good]}, format="json")
    assert response.status_code == 201, response.content
    assert RateKey.objects.count() == 1
    assert Run.objects.filter(rate_key_id__isnull=True).count() == 0


def test_an_update_moves_the_unclaimed_runs_to_the_new_key(
    api: APIClient, create: Callable
) -> None:
    body = create(rate_limit=CRM)
    other = {"key": "mail", "limit": 1, "per": 5}
    response = api.patch(f"/api/v1/tasks/{body['id']}", {"rate_limit": other}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["rate_limit"] == {**other, "scope": "owner"}
    mail = RateKey.objects.get(name="mail")
    runs = Run.objects.filter(task_id=body["id"])
    assert set(runs.values_list("rate_key_id", flat=True)) == {mail.pk}
    response = api.patch(f"/api/v1/tasks/{body['id']}", {"rate_limit": None}, format="json")
    assert response.status_code == 200 and response.json()["rate_limit"] is None
    assert not runs.filter(rate_key_id__isnull=False).exists()


def test_keys_are_listed_with_the_windows_use(api: APIClient, create: Callable) -> None:
    for _ in range(3):
        create(rate_limit={**CRM, "limit": 2})
    [key] = api.get("/api/v1/rate-limits").json()["results"]
    shown = ("key", "scope", "limit", "per", "declared", "used", "next_start_at", "waiting")
    assert {k: key[k] for k in shown} == {
        "key": "crm-api",
        "scope": "owner",
        "limit": 2,
        "per": 60,
        "declared": False,
        "used": 0,
        "next_start_at": None,
        "waiting": 3,
    }
    assert len(claim.claim_runs(worker="w", limit=8, prefetch_seconds=0, owner_cap=0)) == 2
    key = api.get(f"/api/v1/rate-limits/{key['id']}").json()
    row = RateKey.objects.get()
    assert (key["used"], key["waiting"]) == (2, 1)
    assert key["next_start_at"] == row.held_until.astimezone(UTC).isoformat().replace("+00:00", "Z")
    assert datetime.fromisoformat(key["next_start_at"]) - datetime.now(UTC) > timedelta(seconds=50)


def test_a_change_on_the_key_wins_over_the_tasks_and_applies_at_the_next_claim(
    api: APIClient, create: Callable
) -> None:
    for _ in range(3):
        create(rate_limit={**CRM, "limit": 1})
    assert len(claim.claim_runs(worker="w", limit=8, prefetch_seconds=0, owner_cap=0)) == 1
    key = RateKey.objects.get()
    response = api.patch(f"/api/v1/rate-limits/{key.pk}", {"limit": 3}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["limit"], body["per"], body["declared"], body["next_start_at"]) == (
        3,
        60,
        True,
        None,
    )
    create(rate_limit={**CRM, "limit": 1})
    key.refresh_from_db()
    assert (key.rate_limit, key.declared) == (3, True)
    assert len(claim.claim_runs(worker="w", limit=8, prefetch_seconds=0, owner_cap=0)) == 2
    response = api.patch(f"/api/v1/rate-limits/{key.pk}", {"per": 0}, format="json")
    assert response.status_code == 400 and "per" in response.json()


def test_global_keys_are_declared_by_operators_and_named_by_anyone(
    api: APIClient, create: Callable
) -> None:
    body = {"key": "crm", "limit": 3, "per": 10, "scope": "global"}
    assert api.post("/api/v1/rate-limits", body, format="json").status_code == 403
    operator = client_for(UserFactory(is_staff=True))
    response = operator.post("/api/v1/rate-limits", body, format="json")
    assert response.status_code == 201, response.content
    assert operator.post("/api/v1/rate-limits", body, format="json").status_code == 200
    task = create(rate_limit={"key": "crm", "scope": "global"})
    key = RateKey.objects.get(owner__isnull=True)
    assert Task.objects.get(pk=task["id"]).rate_key_id == key.pk
    [listed] = api.get("/api/v1/rate-limits").json()["results"]
    assert (listed["scope"], listed["limit"], listed["per"]) == ("global", 3, 10)
    assert (
        api.patch(f"/api/v1/rate-limits/{key.pk}", {"limit": 1}, format="json").status_code == 403
    )


def test_another_owners_key_is_a_404(create: Callable, other_api: APIClient) -> None:
    create(rate_limit=CRM)
    key = RateKey.objects.get()
    assert other_api.get(f"/api/v1/rate-limits/{key.pk}").status_code == 404
    response = other_api.patch(f"/api/v1/rate-limits/{key.pk}", {"limit": 9}, format="json")
    assert response.status_code == 404
