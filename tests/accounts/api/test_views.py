"""The team routes (accounts/api/views.py): a team is its members' (404 for anyone else), its
admins change it (403 for other roles), and a team keeps an admin."""

from __future__ import annotations

import pytest

from accounts.models import Membership
from tests.conftest import client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def people():
    users = {name: UserFactory(username=name) for name in ("lead", "ed", "vi", "out")}
    clients = {name: client_for(user) for name, user in users.items()}
    assert clients["lead"].post("/api/v1/teams", {"slug": "data"}, format="json").status_code == 201
    for name, role in (("ed", "editor"), ("vi", "viewer")):
        body = {"user": name, "role": role}
        added = clients["lead"].post("/api/v1/teams/data/members", body, format="json")
        assert added.status_code == 201, added.content
    return clients


def test_a_team_is_listed_and_read_by_its_members_only(people) -> None:
    listed = people["vi"].get("/api/v1/teams").json()["results"]
    assert [(team["slug"], team["role"]) for team in listed] == [("data", "viewer")]
    assert people["out"].get("/api/v1/teams").json()["results"] == []
    assert people["out"].get("/api/v1/teams/data").status_code == 404
    assert people["out"].get("/api/v1/teams/data/members").status_code == 404
    members = people["ed"].get("/api/v1/teams/data/members").json()
    assert {(m["user"], m["role"]) for m in members} == {
        ("lead", "admin"),
        ("ed", "editor"),
        ("vi", "viewer"),
    }


def test_a_taken_slug_is_a_400_on_slug(people) -> None:
    answer = people["out"].post("/api/v1/teams", {"slug": "data"}, format="json")
    assert answer.status_code == 400 and "slug" in answer.json()


def test_only_admins_change_members(people) -> None:
    body = {"user": "out", "role": "viewer"}
    assert people["ed"].post("/api/v1/teams/data/members", body, format="json").status_code == 403
    assert people["out"].post("/api/v1/teams/data/members", body, format="json").status_code == 404
    changed = people["lead"].patch(
        "/api/v1/teams/data/members/vi", {"role": "editor"}, format="json"
    )
    assert changed.status_code == 200 and changed.json()["role"] == "editor"
    assert people["vi"].delete("/api/v1/teams/data/members/ed").status_code == 403
    assert people["lead"].delete("/api/v1/teams/data/members/ed").status_code == 204
    assert not Membership.objects.filter(user__username="ed").exists()


def test_the_last_admin_stays(people) -> None:
    demoted = people["lead"].patch(
        "/api/v1/teams/data/members/lead", {"role": "editor"}, format="json"
    )
    assert demoted.status_code == 400 and "role" in demoted.json()
    assert people["lead"].delete("/api/v1/teams/data/members/lead").status_code == 400


def test_an_unknown_person_is_a_400_on_user(people) -> None:
    body = {"user": "nobody", "role": "viewer"}
    answer = people["lead"].post("/api/v1/teams/data/members", body, format="json")
    assert answer.status_code == 400 and "user" in answer.json()


def test_service_accounts_and_tokens_are_the_admins(people) -> None:
    base = "/api/v1/teams/data/service-accounts"
    assert people["ed"].post(base, {"name": "ci"}, format="json").status_code == 403
    assert people["lead"].post(base, {"name": "ci"}, format="json").status_code == 201
    bad = people["lead"].post(
        f"{base}/ci/tokens", {"name": "t", "scopes": ["admin"]}, format="json"
    )
    assert bad.status_code == 400 and "scopes" in bad.json()
    past = {"name": "t", "scopes": ["read"], "expires_at": "2020-01-01T00:00:00Z"}
    assert "expires_at" in people["lead"].post(f"{base}/ci/tokens", past, format="json").json()
    made = people["lead"].post(
        f"{base}/ci/tokens", {"name": "t", "scopes": ["read"]}, format="json"
    )
    assert made.status_code == 201 and made.json()["token"].startswith("sched_")
    [listed] = people["lead"].get(f"{base}/ci/tokens").json()
    assert "token" not in listed and listed["scopes"] == ["read"]
