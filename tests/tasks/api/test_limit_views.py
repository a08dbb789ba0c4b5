"""Limit keys through the API, both kinds through the same code: a task's `concurrency` or
`rate_limit` (create, update, batch, seed), its 400s naming the field, and /concurrency-keys and
/rate-limits (list, declare, change). Tests of a rule one kind has alone name that kind."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rest_framework.test import APIClient

from tasks.models import ConcurrencyKey, RateKey, Run, Task
from tasks.transitions import claim
from tests.conftest import client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@dataclass
class Kind:
    field: str  # the task's
    route: str
    model: type[ConcurrencyKey | RateKey]
    value: dict  # a task's key of its owner
    other: dict  # another key, other limits
    limits: Callable[[Any], tuple]  # a key row's limits, in the API's order

    @property
    def run_column(self) -> str:
        return "concurrency_key_id" if self.field == "concurrency" else "rate_key_id"


CONCURRENCY = Kind(
    field="concurrency",
    route="/api/v1/concurrency-keys",
    model=ConcurrencyKey,
    value={"key": "warehouse-db", "limit": 2},
    other={"key": "other", "limit": 1},
    limits=lambda key: (key.max_running,),
)
RATE = Kind(
    field="rate_limit",
    route="/api/v1/rate-limits",
    model=RateKey,
    value={"key": "crm-api", "limit": 10, "per": 60},
    other={"key": "mail", "limit": 1, "per": 5},
    limits=lambda key: (key.rate_limit, key.per_seconds),
)


@pytest.fixture(params=[CONCURRENCY, RATE], ids=["concurrency", "rate"])
def kind(request: pytest.FixtureRequest) -> Kind:
    return request.param


def _limits(value: dict) -> tuple:
    return tuple(v for k, v in value.items() if k in ("limit", "per"))


def test_a_task_names_a_key_of_its_owner_and_its_runs_carry_it(
    kind: Kind, create: Callable, other_api: APIClient
) -> None:
    body = create(**{kind.field: kind.value})
    assert body[kind.field] == {**kind.value, "scope": "owner"}
    task = Task.objects.get(pk=body["id"])
    key = kind.model.objects.get(pk=getattr(task, kind.run_column))
    assert (key.name, kind.limits(key), key.declared) == (
        kind.value["key"],
        _limits(kind.value),
        False,
    )
    runs = Run.objects.filter(task=task)
    assert set(runs.values_list(kind.run_column, flat=True)) == {key.pk}
    assert create()[kind.field] is None
    # The latest task naming a key no one declared sets its limits; another owner's is another.
    changed = {**kind.other, "key": kind.value["key"]}
    create(**{kind.field: changed})
    key.refresh_from_db()
    assert kind.limits(key) == _limits(kind.other)
    other = other_api.post(
        "/api/v1/tasks",
        {"kind": "handler", "payload": {"name": "noop"}, kind.field: kind.value},
        format="json",
    )
    assert other.status_code == 201
    assert sorted(kind.limits(k) for k in kind.model.objects.all()) == sorted(
        [_limits(kind.other), _limits(kind.value)]
    )


@pytest.mark.parametrize(
    ("field", "value", "error", "message"),
    [
        ("concurrency", {"limit": 2}, "key", "This field is required."),
        ("concurrency", {"key": "db"}, "limit", "This field is required."),
        ("concurrency", {"key": "db", "limit": 0}, "limit", "greater than or equal to 1."),
        ("concurrency", {"key": "no spaces", "limit": 1}, "key", None),
        ("concurrency", {"key": "db", "limit": 1, "scope": "team"}, "scope", None),
        ("concurrency", {"key": "db", "scope": "global"}, "key", "No global concurrency key"),
        ("concurrency", {"key": "db", "limit": 1, "color": "red"}, "color", None),
        ("rate_limit", {"limit": 2, "per": 1}, "key", "This field is required."),
        ("rate_limit", {"key": "crm", "per": 60}, "limit", "This field is required."),
        ("rate_limit", {"key": "crm", "limit": 2}, "per", "This field is required."),
        ("rate_limit", {"key": "crm", "limit": 0, "per": 60}, "limit", "greater than or equal"),
        ("rate_limit", {"key": "crm", "limit": 1, "per": 0}, "per", "greater than or equal to 1."),
        ("rate_limit", {"key": "crm", "limit": 1, "per": 1.5}, "per", "valid integer is required"),
        ("rate_limit", {"key": "no spaces", "limit": 1, "per": 1}, "key", None),
        ("rate_limit", {"key": "crm", "scope": "global"}, "key", "No global rate key 'crm' is"),
        ("rate_limit", {"key": "crm", "limit": 1, "per": 1, "burst": 3}, "burst", None),
    ],
)
def test_a_bad_key_is_a_400_naming_the_field(
    api: APIClient, field: str, value: dict, error: str, message: str | None
) -> None:
    response = api.post(
        "/api/v1/tasks",
        {"kind": "handler", "payload": {"name": "noop"}, field: value},
        format="json",
    )
    assert response.status_code == 400, response.content
    errors = response.json()
    assert error in errors[field], errors
    if message:
        assert message in str(errors[field][error])
    assert not Task.objects.exists()
    assert not ConcurrencyKey.objects.exists() and not RateKey.objects.exists()


def test_a_batch_names_the_item_and_field(kind: Kind, api: APIClient) -> None:
    good = {"kind": "handler", "payload": {"name": "noop"}, kind.field: kind.value}
    missing = "limit" if kind is CONCURRENCY else "per"  # a concurrency key has no `per`
    bad = {**good, kind.field: {k: v for k, v in kind.value.items() if k != missing}}
    response = api.post("/api/v1/tasks/batch", {"tasks": [good, bad]}, format="json")
    assert response.status_code == 400
    assert response.json() == {"tasks": {"1": {kind.field: {missing: ["This field is required."]}}}}
    response = api.post("/api/v1/tasks/batch", {"tasks": [good, good]}, format="json")
    assert response.status_code == 201, response.content
    assert kind.model.objects.count() == 1
    assert not Run.objects.filter(**{f"{kind.run_column}__isnull": True}).exists()


def test_an_update_moves_the_unclaimed_runs_to_the_new_key(
    kind: Kind, api: APIClient, create: Callable
) -> None:
    body = create(**{kind.field: kind.value})
    url = f"/api/v1/tasks/{body['id']}"
    response = api.patch(url, {kind.field: kind.other}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()[kind.field] == {**kind.other, "scope": "owner"}
    other = kind.model.objects.get(name=kind.other["key"])
    runs = Run.objects.filter(task_id=body["id"])
    assert set(runs.values_list(kind.run_column, flat=True)) == {other.pk}
    response = api.patch(url, {kind.field: None}, format="json")
    assert response.status_code == 200 and response.json()[kind.field] is None
    assert not runs.filter(**{f"{kind.run_column}__isnull": False}).exists()


def test_the_seed_route_takes_keys_too(kind: Kind, api: APIClient) -> None:
    response = api.post(
        "/task",
        {"kind": "handler", "payload": {"name": "noop"}, kind.field: {"key": "db"}},
        format="json",
    )
    assert response.status_code == 400 and "limit" in response.content.decode()


def test_concurrency_keys_are_listed_with_what_runs_and_waits(
    api: APIClient, create: Callable
) -> None:
    create(concurrency=CONCURRENCY.value)
    [key] = api.get("/api/v1/concurrency-keys").json()["results"]
    assert {k: key[k] for k in ("key", "scope", "limit", "declared", "running", "waiting")} == {
        "key": "warehouse-db",
        "scope": "owner",
        "limit": 2,
        "declared": False,
        "running": 0,
        "waiting": 1,
    }
    assert api.get(f"/api/v1/concurrency-keys/{key['id']}").json() == key


def test_rate_keys_are_listed_with_the_windows_use(api: APIClient, create: Callable) -> None:
    for _ in range(3):
        create(rate_limit={**RATE.value, "limit": 2})
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


def test_limits_set_on_the_key_win_over_the_tasks(
    kind: Kind, api: APIClient, create: Callable
) -> None:
    create(**{kind.field: kind.value})
    key = kind.model.objects.get()
    response = api.patch(f"{kind.route}/{key.pk}", {"limit": 5}, format="json")
    assert response.status_code == 200 and response.json()["limit"] == 5
    assert response.json()["declared"] is True
    create(**{kind.field: {**kind.value, "limit": 1}})
    key.refresh_from_db()
    assert (kind.limits(key)[0], key.declared) == (5, True)
    for bad in ({"limit": 0}, {"limit": "x"}):
        response = api.patch(f"{kind.route}/{key.pk}", bad, format="json")
        assert response.status_code == 400 and "limit" in response.json()


def test_a_rate_keys_change_applies_at_the_next_claim(api: APIClient, create: Callable) -> None:
    for _ in range(3):
        create(rate_limit={**RATE.value, "limit": 1})
    assert len(claim.claim_runs(worker="w", limit=8, prefetch_seconds=0, owner_cap=0)) == 1
    key = RateKey.objects.get()
    response = api.patch(f"/api/v1/rate-limits/{key.pk}", {"limit": 3}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    # The window is recomputed from the log of starts: 1 start of 3 leaves it free.
    assert (body["limit"], body["per"], body["declared"], body["next_start_at"]) == (
        3,
        60,
        True,
        None,
    )
    assert len(claim.claim_runs(worker="w", limit=8, prefetch_seconds=0, owner_cap=0)) == 2
    response = api.patch(f"/api/v1/rate-limits/{key.pk}", {"per": 0}, format="json")
    assert response.status_code == 400 and "per" in response.json()
    response = api.patch(f"/api/v1/rate-limits/{key.pk}", {"per": 30}, format="json")
    assert (response.json()["limit"], response.json()["per"]) == (3, 30)


def test_global_keys_are_declared_by_operators_and_named_by_anyone(
    kind: Kind, api: APIClient, create: Callable
) -> None:
    body = {**kind.value, "key": "crm", "scope": "global"}
    assert api.post(kind.route, body, format="json").status_code == 403
    operator = client_for(UserFactory(is_staff=True))
    response = operator.post(kind.route, body, format="json")
    assert response.status_code == 201, response.content
    assert operator.post(kind.route, body, format="json").status_code == 200
    task = create(**{kind.field: {"key": "crm", "scope": "global"}})
    key = kind.model.objects.get(owner__isnull=True)
    assert getattr(Task.objects.get(pk=task["id"]), kind.run_column) == key.pk
    [listed] = api.get(kind.route).json()["results"]
    assert (listed["scope"], *(listed[k] for k in ("limit", "per") if k in kind.value)) == (
        "global",
        *_limits(kind.value),
    )
    assert api.patch(f"{kind.route}/{key.pk}", {"limit": 1}, format="json").status_code == 403


def test_another_owners_key_is_a_404(kind: Kind, create: Callable, other_api: APIClient) -> None:
    create(**{kind.field: kind.value})
    key = kind.model.objects.get()
    assert other_api.get(f"{kind.route}/{key.pk}").status_code == 404
    response = other_api.patch(f"{kind.route}/{key.pk}", {"limit": 9}, format="json")
    assert response.status_code == 404


def test_a_task_set_naming_keys_plans_without_writing_one_and_applies_them(api: APIClient) -> None:
    entry = {
        "key": "nightly-export",
        "kind": "handler",
        "payload": {"name": "noop"},
        "schedule": {"type": "cron", "expression": "0 3 * * *"},
        CONCURRENCY.field: CONCURRENCY.value,
        RATE.field: RATE.value,
    }
    url = "/api/v1/tasksets/nightly"
    response = api.put(f"{url}?dry_run=true", {"tasks": [entry]}, format="json")
    assert response.status_code == 200, response.content
    assert not ConcurrencyKey.objects.exists() and not RateKey.objects.exists()
    response = api.put(url, {"tasks": [entry]}, format="json")
    assert response.status_code == 200, response.content
    task = Task.objects.get()
    assert task.concurrency_key == ConcurrencyKey.objects.get(name="warehouse-db")
    assert task.rate_key == RateKey.objects.get(name="crm-api")


def test_a_teams_tasks_share_the_teams_key_whichever_member_made_them(kind: Kind) -> None:
    from accounts.models import Membership, Team

    data, web = Team.objects.create(slug="data"), Team.objects.create(slug="web")
    ana, ben = UserFactory(), UserFactory()
    for team, user in ((data, ana), (data, ben), (web, ana)):
        Membership.objects.create(team=team, user=user, role="editor")
    handler = {"kind": "handler", "payload": {"name": "noop"}}

    def made(user: Any, **body: Any) -> Task:
        response = client_for(user).post(
            "/api/v1/tasks", {**handler, kind.field: kind.value, **body}, format="json"
        )
        assert response.status_code == 201, response.content
        return Task.objects.get(pk=response.json()["id"])

    def key_of(task: Task) -> Any:
        return kind.model.objects.get(pk=getattr(task, kind.run_column))

    anas, bens = made(ana, team="data"), made(ben, team="data")
    shared = key_of(anas)
    assert (key_of(bens).pk, shared.team_id, shared.owner_id) == (shared.pk, data.pk, ana.pk)
    # The same name is another key in another team and in a member's own space.
    own, webs = key_of(made(ana)), key_of(made(ana, team="web"))
    assert len({shared.pk, own.pk, webs.pk}) == 3
    assert (own.team_id, webs.team_id) == (None, web.pk)
    # Declared by another member in the team: the team's key, its limits now declared.
    declared = client_for(ben).post(
        kind.route, {**kind.other, "key": kind.value["key"], "team": "data"}, format="json"
    )
    assert declared.status_code == 200, declared.content
    assert declared.json()["id"] == shared.pk
    # Moved to another team, a task names the key of that name there, its runs too.
    moved = client_for(ana).patch(f"/api/v1/tasks/{anas.pk}", {"team": "web"}, format="json")
    assert moved.status_code == 200, moved.content
    anas.refresh_from_db()
    assert key_of(anas).pk == webs.pk
    unstarted = Run.objects.filter(task=anas, status="scheduled")
    assert unstarted.exists()
    assert set(unstarted.values_list(kind.run_column, flat=True)) == {webs.pk}
