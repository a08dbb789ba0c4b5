"""The admin's teams: members see their team, admins change its members and make service
accounts and tokens, through the API's services (so every change is in the audit log with its
actor and address); a token's text is shown once and works against the API; a revoked one is
refused at the next request; nobody outside the team sees any of it."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import ApiToken, Membership, ServiceAccount, Team
from accounts.teams import create_service_account, create_team, set_member
from tasks.audit_log import AuditEntry
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
FROM = {"REMOTE_ADDR": "192.0.2.9", "HTTP_USER_AGENT": "Mozilla/5.0 team-admin-test"}


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def people():
    admin, viewer, outsider, newcomer = (
        UserFactory(username=name) for name in ("ada", "vic", "olga", "nina")
    )
    team = create_team(creator=admin, slug="data", name="Data")
    set_member(team=team, user=viewer, role="viewer")
    other = create_team(creator=outsider, slug="web", name="Web")
    named = {"admin": admin, "viewer": viewer, "outsider": outsider, "newcomer": newcomer}
    return {**named, "team": team, "other": other}


def test_a_member_sees_her_team_and_its_members_and_no_other_team(people) -> None:
    team = people["team"]
    viewer = signed_in(people["viewer"])

    listing = viewer.get(reverse("admin:accounts_team_changelist")).content.decode()
    page = viewer.get(reverse("admin:accounts_team_change", args=[team.pk]))

    assert ">data<" in listing and ">web<" not in listing
    assert page.status_code == 200
    text = page.content.decode()
    assert "ada" in text and "vic" in text and f"?team={team.slug}" in text
    other = reverse("admin:accounts_team_change", args=[people["other"].pk])
    assert viewer.get(other).status_code == 404
    membership = Membership.objects.get(team=people["other"])
    assert (
        viewer.get(reverse("admin:accounts_membership_change", args=[membership.pk])).status_code
        == 404
    )


def test_an_admin_adds_a_member_and_changes_her_role_each_recorded(people) -> None:
    team, admin = people["team"], signed_in(people["admin"])
    add = reverse("admin:accounts_membership_add")

    response = admin.post(add, {"team": team.pk, "username": "nina", "role": "viewer"}, **FROM)

    assert response.status_code == 302, response.content.decode()[-3000:]
    membership = Membership.objects.get(team=team, user=people["newcomer"])
    assert membership.role == "viewer"
    change = reverse("admin:accounts_membership_change", args=[membership.pk])
    assert admin.post(change, {"role": "editor"}, **FROM).status_code == 302
    membership.refresh_from_db()
    assert membership.role == "editor"
    entries = AuditEntry.objects.filter(object_type="team", team=team, actor_name="ada")
    done = [(e.action, e.changes["role"]) for e in entries.order_by("id")]
    assert done == [("add_member", [None, "viewer"]), ("change_role", ["viewer", "editor"])]
    assert {(e.client_address, e.user_agent) for e in entries} == {
        ("192.0.2.9", "Mozilla/5.0 team-admin-test")
    }


def test_a_viewer_cannot_change_members_nor_add_to_a_team_she_does_not_administer(people) -> None:
    team, viewer = people["team"], signed_in(people["viewer"])
    own = Membership.objects.get(team=team, user=people["viewer"])

    changed = viewer.post(
        reverse("admin:accounts_membership_change", args=[own.pk]), {"role": "admin"}
    )
    added = viewer.post(
        reverse("admin:accounts_membership_add"),
        {"team": team.pk, "username": "nina", "role": "admin"},
    )

    assert changed.status_code == 403
    assert added.status_code == 200 and "team" in added.context["adminform"].form.errors
    assert set(Membership.objects.filter(team=team).values_list("user__username", "role")) == {
        ("ada", "admin"),
        ("vic", "viewer"),
    }
    assert not AuditEntry.objects.filter(actor_name="vic").exists()


def test_the_last_admin_keeps_her_role_and_her_place(people) -> None:
    team, admin = people["team"], signed_in(people["admin"])
    own = Membership.objects.get(team=team, user=people["admin"])

    demoted = admin.post(
        reverse("admin:accounts_membership_change", args=[own.pk]), {"role": "editor"}
    )
    deleted = admin.post(
        reverse("admin:accounts_membership_delete", args=[own.pk]), {"post": "yes"}
    )

    assert demoted.status_code == 200
    assert "keeps at least one admin" in str(demoted.context["adminform"].form.errors)
    assert deleted.status_code == 302
    own.refresh_from_db()
    assert own.role == "admin"
    viewer = Membership.objects.get(team=team, user=people["viewer"])
    gone = admin.post(
        reverse("admin:accounts_membership_delete", args=[viewer.pk]), {"post": "yes"}, **FROM
    )
    assert gone.status_code == 302
    assert not Membership.objects.filter(pk=viewer.pk).exists()
    [entry] = AuditEntry.objects.filter(action="remove_member", team=team)
    assert (entry.changes["member"], entry.actor_name) == ("vic", "ada")


def test_a_token_made_in_the_admin_is_shown_once_works_and_is_revoked_at_the_next_request(
    people,
) -> None:
    team, admin = people["team"], signed_in(people["admin"])
    made = admin.post(
        reverse("admin:accounts_serviceaccount_add"),
        {"team": team.pk, "name": "ci", "role": "viewer"},
        **FROM,
    )
    assert made.status_code == 302, made.content.decode()[-3000:]
    account = ServiceAccount.objects.get(team=team, name="ci")

    page = admin.post(
        reverse("admin:accounts_apitoken_add"),
        {"account": account.pk, "name": "deploy", "scopes": ["read"], "expires_at": ""},
        **FROM,
    )

    assert page.status_code == 200, page.content.decode()[-3000:]
    assert "no-store" in page["Cache-Control"]
    text = re.search(r'id="token-text"[^>]*value="(sched_[^"]+)"', page.content.decode()).group(1)
    token = ApiToken.objects.get(account=account)
    assert token.scopes == ["read"] and text not in token.digest
    shown = admin.get(reverse("admin:accounts_apitoken_change", args=[token.pk])).content.decode()
    assert text not in shown and token.digest not in shown
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {text}")
    assert api.get("/api/v1/tasks").status_code == 200
    assert api.post("/api/v1/tasks", {}, format="json").status_code == 403

    listing = reverse("admin:accounts_apitoken_changelist")
    revoked = admin.post(listing, {"action": "revoke_selected", "_selected_action": [token.pk]})

    assert revoked.status_code == 302
    assert api.get("/api/v1/tasks").status_code == 401
    actions = AuditEntry.objects.filter(team=team, actor_name="ada").values_list(
        "action", flat=True
    )
    assert {"create", "create_token", "revoke_token"} <= set(actions)
    assert not AuditEntry.objects.filter(changes__icontains=text[7:20]).exists()


def test_service_accounts_and_tokens_are_a_team_admins_alone(people) -> None:
    account = create_service_account(team=people["team"], name="ci", role="editor")
    viewer, outsider = signed_in(people["viewer"]), signed_in(people["outsider"])
    page = reverse("admin:accounts_serviceaccount_change", args=[account.pk])

    assert viewer.get(page).status_code == 404
    assert outsider.get(page).status_code == 404
    listing = outsider.get(reverse("admin:accounts_serviceaccount_changelist")).content.decode()
    assert ">ci<" not in listing
    form = outsider.get(reverse("admin:accounts_apitoken_add")).context["adminform"].form
    assert list(form.fields["account"].queryset) == []


def test_anyone_makes_a_team_and_is_its_admin_and_a_bad_slug_is_named(people) -> None:
    newcomer = signed_in(people["newcomer"])
    add = reverse("admin:accounts_team_add")

    taken = newcomer.post(add, {"slug": "data", "name": "Again"})
    bad = newcomer.post(add, {"slug": "Has Space", "name": ""})
    made = newcomer.post(add, {"slug": "ml", "name": "Machine learning"}, **FROM)

    assert "slug" in taken.context["adminform"].form.errors
    assert "slug" in bad.context["adminform"].form.errors
    assert made.status_code == 302
    team = Team.objects.get(slug="ml")
    assert Membership.objects.get(team=team).user == people["newcomer"]
    [entry] = AuditEntry.objects.filter(team=team, action="create")
    assert (entry.actor_name, entry.client_address) == ("nina", "192.0.2.9")
