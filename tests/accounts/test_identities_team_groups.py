"""OIDC_TEAM_GROUPS with a real provider (tests/oidc_provider/, its own process) and gunicorn:
a person whose provider groups map to a team as editor changes its tasks; after their group
changes at the provider, their next request has the new rights."""

from __future__ import annotations

import sqlite3

import pytest
import requests

from accounts.models import Membership, Team
from tests.factories import TaskFactory, UserFactory
from tests.gunicorn_server import gunicorn  # noqa: F401  (the fixture)
from tests.oidc_server import oidc_provider, provider_key  # noqa: F401

pytestmark = pytest.mark.processes

ALICE = {
    "username": "alice",
    "password": "alice-pass-1",
    "email": "alice@example.com",
    "groups": ["data-eng"],
}
MAPPING = "data-eng=data:editor,data-oncall=data:viewer"


def regroup(provider, tmp_path, username: str, groups: list[str]) -> None:
    """Change `username`'s groups in the provider's own database, as its admin would."""
    port = provider.base.rsplit(":", 1)[1]
    with sqlite3.connect(tmp_path / f"provider-{port}.sqlite3") as db:
        [(user_id,)] = db.execute("SELECT id FROM auth_user WHERE username = ?", [username])
        db.execute("DELETE FROM auth_user_groups WHERE user_id = ?", [user_id])
        for name in groups:
            db.execute("INSERT OR IGNORE INTO auth_group (name) VALUES (?)", [name])
            [(group_id,)] = db.execute("SELECT id FROM auth_group WHERE name = ?", [name])
            db.execute(
                "INSERT INTO auth_user_groups (user_id, group_id) VALUES (?, ?)",
                [user_id, group_id],
            )


def patch(site: str, token: str, task_id: str) -> requests.Response:
    return requests.patch(
        f"{site}/api/v1/tasks/{task_id}",
        json={"priority": 7},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )


def test_provider_groups_give_team_roles_at_the_next_request(
    oidc_provider,  # noqa: F811
    gunicorn,  # noqa: F811
    tmp_path,
) -> None:
    provider = oidc_provider([ALICE])
    site = gunicorn(workers=1, **provider.scheduler_env(OIDC_TEAM_GROUPS=MAPPING))
    team = Team.objects.create(slug="data")
    task = TaskFactory(owner=UserFactory(), team=team)

    changed = patch(site, provider.access_token("alice"), str(task.pk))
    assert changed.status_code == 200, changed.text
    assert changed.json()["priority"] == 7
    assert Membership.objects.get(team=team, user__username="alice").role == "editor"

    regroup(provider, tmp_path, "alice", ["data-oncall"])  # now only a viewer of `data`
    refused = patch(site, provider.access_token("alice"), str(task.pk))
    assert refused.status_code == 403, refused.text
    assert "viewer" in refused.json()["detail"]

    regroup(provider, tmp_path, "alice", [])  # out of every mapped group: out of the team
    gone = patch(site, provider.access_token("alice"), str(task.pk))
    assert gone.status_code == 404
    assert not Membership.objects.filter(team=team, user__username="alice").exists()
