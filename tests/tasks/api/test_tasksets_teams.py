"""A team's task set (`?team=<slug>` on the task set routes): its tasks are the team's, any
editor applies it, a viewer reads it, and its tasks notify the team's channels only."""

from __future__ import annotations

import pytest

from accounts.models import Membership, Team
from notifications.models import Channel
from tasks.models import Task
from tests.conftest import client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/tasksets/nightly?team=data"


def entry(**fields) -> dict:
    return {"key": "report", "kind": "handler", "payload": {"name": "noop"}, **fields}


@pytest.fixture
def members():
    team = Team.objects.create(slug="data")
    people = {role: UserFactory() for role in ("editor", "other_editor", "viewer")}
    for role, user in people.items():
        Membership.objects.create(team=team, user=user, role=role.removeprefix("other_"))
    return team, people


def test_any_editor_applies_the_teams_set_and_a_viewer_reads_it(members) -> None:
    team, people = members
    applied = client_for(people["editor"]).put(URL, {"tasks": [entry()]}, format="json")
    assert applied.status_code == 200, applied.content
    [task] = Task.objects.filter(taskset__name="nightly")
    assert task.team == team
    again = client_for(people["other_editor"]).put(
        URL, {"tasks": [entry(priority=7)]}, format="json"
    )
    assert again.status_code == 200 and len(again.json()["update"]) == 1
    assert client_for(people["viewer"]).get(URL).json()["version"] == 2
    refused = client_for(people["viewer"]).put(URL, {"tasks": []}, format="json")
    assert refused.status_code == 403
    assert client_for(UserFactory()).get(URL).status_code == 404


def test_an_entry_takes_no_team_and_notifies_only_the_teams_channels(members) -> None:
    team, people = members
    client = client_for(people["editor"])
    refused = client.put(URL, {"tasks": [entry(team="data")]}, format="json")
    assert refused.status_code == 400 and "team" in str(refused.json())
    own = Channel.objects.create(
        owner=people["editor"], kind="email", config={"address": "me@example.com"}
    )
    ours = Channel.objects.create(
        owner=people["viewer"], team=team, kind="email", config={"address": "us@example.com"}
    )
    mine = entry(notify=[{"channel": str(own.pk), "events": ["failed"]}])
    refused = client.put(URL, {"tasks": [mine]}, format="json")
    assert refused.status_code == 400 and "notify" in str(refused.json())
    theirs = entry(notify=[{"channel": str(ours.pk), "events": ["failed"]}])
    assert client.put(URL, {"tasks": [theirs]}, format="json").status_code == 200
