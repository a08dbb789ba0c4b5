"""Team, member, service account and token changes are in the audit log (tasks/audit.py): each
action through the API appears in GET /api/v1/audit with its actor, address and diff, as the
team's entry (its members read it, another team's do not), and no entry holds a token's text
or its hash."""

from __future__ import annotations

import pytest
from django.db import connection

from accounts.models import ApiToken, ServiceAccount, Team
from accounts.teams import sync_team_groups
from tasks.audit_log import AuditEntry
from tests.conftest import client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

FROM = {"REMOTE_ADDR": "10.9.8.7", "HTTP_USER_AGENT": "teams-audit/1.0"}
ACCOUNTS = "/api/v1/teams/data/service-accounts"


@pytest.fixture
def people():
    users = {name: UserFactory(username=name) for name in ("lead", "vi", "other", "out")}
    clients = {name: client_for(user) for name, user in users.items()}
    made = clients["lead"].post(
        "/api/v1/teams", {"slug": "data", "name": "Data"}, format="json", **FROM
    )
    assert made.status_code == 201, made.content
    assert clients["other"].post("/api/v1/teams", {"slug": "web"}, format="json").status_code == 201
    return clients


def post(client, path: str, body: dict, status: int = 201) -> dict:
    answer = client.post(path, body, format="json", **FROM)
    assert answer.status_code == status, answer.content
    return answer.json()


def log(client, **params: str) -> list[dict]:
    answer = client.get("/api/v1/audit", params)
    assert answer.status_code == 200, answer.content
    return answer.json()["results"]


def test_every_member_change_is_the_teams_entry_with_actor_address_and_role_diff(people) -> None:
    post(people["lead"], "/api/v1/teams/data/members", {"user": "vi", "role": "viewer"})
    changed = people["lead"].patch(
        "/api/v1/teams/data/members/vi", {"role": "editor"}, format="json", **FROM
    )
    assert changed.status_code == 200, changed.content
    same = people["lead"].patch("/api/v1/teams/data/members/vi", {"role": "editor"}, format="json")
    assert same.status_code == 200  # no change: no entry
    assert people["lead"].delete("/api/v1/teams/data/members/vi", **FROM).status_code == 204

    removed, role, added, created = log(people["lead"], team="data")
    assert [e["action"] for e in (removed, role, added, created)] == [
        "remove_member",
        "change_role",
        "add_member",
        "create",
    ]
    assert created["changes"] == {"name": "Data", "admin": "lead"}
    assert added["changes"] == {"member": "vi", "role": [None, "viewer"]}
    assert role["changes"] == {"member": "vi", "role": ["viewer", "editor"]}
    assert removed["changes"] == {"member": "vi", "role": ["editor", None]}
    team = Team.objects.get(slug="data")
    for entry in (removed, role, added, created):
        assert entry["object"] == {"type": "team", "id": str(team.pk), "name": "data"}
        assert entry["team"] == "data"
        assert entry["actor"]["username"] == "lead"
        assert (entry["client_address"], entry["user_agent"]) == ("10.9.8.7", "teams-audit/1.0")


def test_a_teams_entries_are_its_members_and_no_one_elses(people) -> None:
    post(people["lead"], "/api/v1/teams/data/members", {"user": "vi", "role": "viewer"})

    seen = {e["action"] for e in log(people["vi"], team="data")}
    assert seen == {"create", "add_member"}
    assert log(people["other"], team="data") == []
    assert {e["team"] for e in log(people["other"])} == {"web"}
    assert log(people["out"]) == []


def test_service_account_and_token_changes_are_recorded_without_the_token(people) -> None:
    post(people["lead"], "/api/v1/teams/data/members", {"user": "vi", "role": "viewer"})
    post(people["lead"], ACCOUNTS, {"name": "ci", "role": "editor"})
    made = post(people["lead"], f"{ACCOUNTS}/ci/tokens", {"name": "deploy", "scopes": ["read"]})
    text = made["token"]
    revoked = people["lead"].delete(f"{ACCOUNTS}/ci/tokens/{made['id']}", **FROM)
    assert revoked.status_code == 200, revoked.content
    again = people["lead"].delete(f"{ACCOUNTS}/ci/tokens/{made['id']}", **FROM)
    assert again.status_code == 200  # already revoked: no second entry

    revoke, create, created_account = log(people["vi"], team="data", object_type="token") + log(
        people["vi"], team="data", object_type="service_account"
    )
    assert created_account["action"] == "create"
    assert created_account["object"] == {
        "type": "service_account",
        "id": str(ServiceAccount.objects.get(name="ci").pk),
        "name": "ci",
    }
    assert created_account["changes"] == {"user": "ci@data.service", "role": [None, "editor"]}
    token = {"type": "token", "id": str(made["id"]), "name": "deploy"}
    assert (create["action"], create["object"]) == ("create_token", token)
    assert create["changes"]["scopes"] == ["read"] and create["changes"]["service_account"] == "ci"
    assert (revoke["action"], revoke["object"]) == ("revoke_token", token)
    assert revoke["changes"]["revoked_at"][0] is None and revoke["changes"]["revoked_at"][1]
    for entry in (revoke, create, created_account):
        assert entry["actor"]["username"] == "lead" and entry["client_address"] == "10.9.8.7"
    assert log(people["other"], object_type="token") == []

    # Neither the token's text nor its hash is in any column of any entry.
    digest = ApiToken.objects.get(pk=made["id"]).digest
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), string_agg(e::text, ' ') FROM tasks_auditentry e")
        count, rows = cursor.fetchone()
    assert count == AuditEntry.objects.count() > 0
    assert text not in rows and text.removeprefix("sched_") not in rows and digest not in rows


def test_a_refused_change_records_nothing(people) -> None:
    before = AuditEntry.objects.count()
    demoted = people["lead"].patch(
        "/api/v1/teams/data/members/lead", {"role": "viewer"}, format="json"
    )
    assert demoted.status_code == 400  # the last admin stays
    assert people["lead"].delete("/api/v1/teams/data/members/lead").status_code == 400
    assert AuditEntry.objects.count() == before


def test_the_providers_groups_record_their_membership_changes() -> None:
    person = UserFactory(username="ana")
    mapping = {"g-data": ("data", "editor"), "g-data-admins": ("data", "admin")}

    sync_team_groups(person, groups=["g-data"], mapping=mapping)
    sync_team_groups(person, groups=["g-data"], mapping=mapping)  # nothing changes
    sync_team_groups(person, groups=["g-data-admins"], mapping=mapping)
    sync_team_groups(person, groups=[], mapping=mapping)

    entries = AuditEntry.objects.order_by("id")
    assert [(e.action, e.object_name, e.changes) for e in entries] == [
        ("create", "data", {"name": "", "source": "groups"}),
        ("add_member", "data", {"member": "ana", "role": [None, "editor"], "source": "groups"}),
        (
            "change_role",
            "data",
            {"member": "ana", "role": ["editor", "admin"], "source": "groups"},
        ),
        ("remove_member", "data", {"member": "ana", "role": ["admin", None], "source": "groups"}),
    ]
    assert {e.team_id for e in entries} == {Team.objects.get(slug="data").pk}
