"""accounts/teams.py: the provider's groups set the mapped teams' memberships, and leave every
other team alone; OIDC_TEAM_GROUPS is read strictly."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from accounts.models import Membership, Team
from accounts.teams import sync_team_groups
from scheduler_project.settings import env_team_groups
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

MAPPING = {
    "data-eng": ("data", "editor"),
    "data-oncall": ("data", "viewer"),
    "data-leads": ("data", "admin"),
    "web-eng": ("web", "editor"),
}


def roles(user) -> dict[str, str]:
    return dict(Membership.objects.filter(user=user).values_list("team__slug", "role"))


def test_the_highest_role_a_group_gives_wins_and_a_missing_team_is_made() -> None:
    user = UserFactory()
    sync_team_groups(user, groups=["data-oncall", "data-eng", "other"], mapping=MAPPING)
    assert roles(user) == {"data": "editor"}
    sync_team_groups(user, groups=["data-leads", "web-eng"], mapping=MAPPING)
    assert roles(user) == {"data": "admin", "web": "editor"}


def test_leaving_every_group_of_a_team_leaves_the_team_and_no_other() -> None:
    user = UserFactory()
    handmade = Team.objects.create(slug="ops")
    Membership.objects.create(team=handmade, user=user, role="viewer")
    sync_team_groups(user, groups=["data-eng", "web-eng"], mapping=MAPPING)
    sync_team_groups(user, groups=["web-eng"], mapping=MAPPING)
    assert roles(user) == {"ops": "viewer", "web": "editor"}


@pytest.mark.parametrize(
    "value", ["data-eng", "data-eng=data", "data-eng=data:owner", "=data:editor"]
)
def test_a_malformed_mapping_stops_the_process(monkeypatch, value: str) -> None:
    monkeypatch.setenv("OIDC_TEAM_GROUPS", value)
    with pytest.raises(ImproperlyConfigured, match="OIDC_TEAM_GROUPS"):
        env_team_groups("OIDC_TEAM_GROUPS")


def test_a_mapping_is_read(monkeypatch) -> None:
    monkeypatch.setenv("OIDC_TEAM_GROUPS", "a=data:editor, b=web:viewer")
    assert env_team_groups("OIDC_TEAM_GROUPS") == {"a": ("data", "editor"), "b": ("web", "viewer")}
