"""Service accounts' tokens at the API (accounts/token_auth.py, accounts/tokens.py): scopes,
revocation at the next request, expiry, the account's role as the ceiling, stored hashed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken, Membership, Team
from tests.conftest import client_for
from tests.factories import TaskFactory, UserFactory

pytestmark = pytest.mark.django_db

HANDLER = {"kind": "handler", "payload": {"name": "noop"}}


@pytest.fixture
def admin() -> APIClient:
    """A person who made the team `data` (its admin)."""
    client = client_for(UserFactory(username="lead"))
    assert client.post("/api/v1/teams", {"slug": "data"}, format="json").status_code == 201
    return client


def token(admin: APIClient, scopes: list[str], *, role: str = "editor", account: str = "ci") -> str:
    base = "/api/v1/teams/data/service-accounts"
    if account not in {made["name"] for made in admin.get(base).json()}:
        made = admin.post(base, {"name": account, "role": role}, format="json")
        assert made.status_code == 201, made.content
    answer = admin.post(
        f"{base}/{account}/tokens", {"name": "pipeline", "scopes": scopes}, format="json"
    )
    assert answer.status_code == 201, answer.content
    return answer.json()["token"]


def bearer(text: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {text}")
    return client


def test_a_read_token_lists_the_teams_tasks_and_gets_403_on_a_create(admin) -> None:
    team_task = TaskFactory(owner=UserFactory(), team=Team.objects.get(slug="data"))
    TaskFactory()  # someone else's, of no team
    client = bearer(token(admin, ["read"]))
    listed = client.get("/api/v1/tasks")
    assert listed.status_code == 200
    assert [item["id"] for item in listed.json()["results"]] == [str(team_task.pk)]
    refused = client.post("/api/v1/tasks", HANDLER, format="json")
    assert refused.status_code == 403
    assert refused.json()["code"] == "token_scope" and "`write`" in refused.json()["detail"]


def test_a_write_token_creates_in_its_team_and_needs_run_to_run(admin) -> None:
    client = bearer(token(admin, ["read", "write"]))
    made = client.post("/api/v1/tasks", HANDLER, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["team"] == "data"  # a service account's objects go to its team
    ran = client.post(f"/api/v1/tasks/{made.json()['id']}/run-now")
    assert ran.status_code == 403 and "`run`" in ran.json()["detail"]


def test_a_revoked_token_gets_401_on_the_next_request(admin) -> None:
    text = token(admin, ["read"])
    client = bearer(text)
    assert client.get("/api/v1/tasks").status_code == 200
    [listed] = admin.get("/api/v1/teams/data/service-accounts/ci/tokens").json()
    revoked = admin.delete(f"/api/v1/teams/data/service-accounts/ci/tokens/{listed['id']}")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    refused = client.get("/api/v1/tasks")
    assert refused.status_code == 401
    assert refused.json()["code"] == "token_revoked"


def test_an_expired_or_unknown_token_gets_401_naming_why(admin) -> None:
    text = token(admin, ["read"])
    ApiToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    expired = bearer(text).get("/api/v1/tasks")
    assert (expired.status_code, expired.json()["code"]) == (401, "token_expired")
    unknown = bearer(text[:-2] + "xx").get("/api/v1/tasks")
    assert (unknown.status_code, unknown.json()["code"]) == (401, "token_unknown")


def test_a_token_never_grants_more_than_its_accounts_role(admin) -> None:
    client = bearer(token(admin, ["read", "write"], role="viewer"))
    refused = client.post("/api/v1/tasks", HANDLER, format="json")
    assert refused.status_code == 403 and "viewer" in refused.json()["detail"]


def test_a_token_cannot_manage_teams(admin) -> None:
    client = bearer(token(admin, ["read", "write", "run", "tasksets:apply"]))
    assert client.get("/api/v1/teams").status_code == 403
    made = client.post("/api/v1/teams/data/service-accounts", {"name": "x"}, format="json")
    assert made.status_code == 403


def test_the_database_holds_no_token_text(admin) -> None:
    text = token(admin, ["read"])
    assert bearer(text).get("/api/v1/tasks").status_code == 200
    secret = text.removeprefix("sched_")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name"
        )
        tables = [row[0] for row in cursor.fetchall()]
        holding = []
        for table in tables:
            cursor.execute(
                f'SELECT count(*) FROM "{table}" t WHERE strpos(t::text, %s) > 0', [secret]
            )
            if cursor.fetchone()[0]:
                holding.append(table)
    assert holding == []
    assert ApiToken.objects.get().digest != text


def test_last_used_at_is_written_at_most_once_a_minute(admin) -> None:
    client = bearer(token(admin, ["read"]))
    assert client.get("/api/v1/tasks").status_code == 200
    first = ApiToken.objects.get().last_used_at
    assert first is not None
    assert client.get("/api/v1/tasks").status_code == 200
    assert ApiToken.objects.get().last_used_at == first
    ApiToken.objects.update(last_used_at=first - timedelta(minutes=2))
    assert client.get("/api/v1/tasks").status_code == 200
    assert ApiToken.objects.get().last_used_at > first


def test_a_membership_removed_is_seen_by_the_next_request(admin) -> None:
    editor = UserFactory(username="ed")
    body = {"user": "ed", "role": "editor"}
    added = admin.post("/api/v1/teams/data/members", body, format="json")
    assert added.status_code == 201
    task = TaskFactory(owner=UserFactory(), team=Team.objects.get(slug="data"))
    client = client_for(editor)
    assert client.get(f"/api/v1/tasks/{task.pk}").status_code == 200
    assert admin.delete("/api/v1/teams/data/members/ed").status_code == 204
    assert not Membership.objects.filter(user=editor).exists()
    assert client.get(f"/api/v1/tasks/{task.pk}").status_code == 404
