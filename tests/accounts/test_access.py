"""accounts/access.py through the API: placing objects in teams, moving them between teams,
a team's task naming only its team's channels, and a member's task list read and counted part
by part."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts import access
from accounts.models import Membership, Team
from notifications.models import Channel
from tasks.api.views import TaskFilter
from tasks.models import Calendar, Task, TaskHealth, TaskSet
from tests.conftest import client_for
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db

HANDLER = {"kind": "handler", "payload": {"name": "noop"}}


@pytest.fixture
def teams():
    data, web = Team.objects.create(slug="data"), Team.objects.create(slug="web")
    return data, web


def member(team: Team, role: str, user=None):
    user = user or UserFactory()
    Membership.objects.create(team=team, user=user, role=role)
    return user


def test_a_task_is_made_in_a_team_by_its_editors_only(teams) -> None:
    data, _ = teams
    editor, viewer = member(data, "editor"), member(data, "viewer")
    made = client_for(editor).post("/api/v1/tasks", {**HANDLER, "team": "data"}, format="json")
    assert made.status_code == 201 and made.json()["team"] == "data"
    as_viewer = client_for(viewer).post("/api/v1/tasks", {**HANDLER, "team": "data"}, format="json")
    assert as_viewer.status_code == 403
    assert as_viewer.json()["code"] == "role" and "viewer" in as_viewer.json()["detail"]
    foreign = client_for(editor).post("/api/v1/tasks", {**HANDLER, "team": "web"}, format="json")
    assert foreign.status_code == 400 and "team" in foreign.json()
    # The other members read it with its owner's name, not their own.
    shown = client_for(viewer).get(f"/api/v1/tasks/{made.json()['id']}").json()
    assert shown["owner"] == editor.username


def test_moving_a_task_between_teams_needs_editor_rights_in_both(teams) -> None:
    data, web = teams
    user = member(data, "editor")
    member(web, "viewer", user)
    task = TaskFactory(owner=UserFactory(), team=data)
    refused = client_for(user).patch(f"/api/v1/tasks/{task.pk}", {"team": "web"}, format="json")
    assert refused.status_code == 403
    Membership.objects.filter(team=web, user=user).update(role="editor")
    moved = client_for(user).patch(f"/api/v1/tasks/{task.pk}", {"team": "web"}, format="json")
    assert moved.status_code == 200 and moved.json()["team"] == "web"
    # Out of any team: its owner's alone, so only its owner may.
    out = client_for(user).patch(f"/api/v1/tasks/{task.pk}", {"team": None}, format="json")
    assert out.status_code == 403
    out = client_for(task.owner).patch(f"/api/v1/tasks/{task.pk}", {"team": None}, format="json")
    assert out.status_code == 404  # the owner is no member of `web`: they do not see it


def test_a_teams_task_cannot_use_another_teams_channel(teams) -> None:
    data, web = teams
    user = member(data, "editor")
    member(web, "editor", user)
    theirs = Channel.objects.create(
        owner=user, team=web, kind="webhook", config={"url": "https://e.x/h"}
    )
    ours = Channel.objects.create(
        owner=user, team=data, kind="webhook", config={"url": "https://e.x/h"}
    )
    own = Channel.objects.create(owner=user, kind="webhook", config={"url": "https://e.x/h"})
    client = client_for(user)
    for channel in (theirs, own):
        body = {
            **HANDLER,
            "team": "data",
            "notify": [{"channel": str(channel.pk), "events": ["failed"]}],
        }
        refused = client.post("/api/v1/tasks", body, format="json")
        assert refused.status_code == 400
        assert "channel" in refused.json()["notify"]["0"]
    body = {**HANDLER, "team": "data", "notify": [{"channel": str(ours.pk), "events": ["failed"]}]}
    made = client.post("/api/v1/tasks", body, format="json")
    assert made.status_code == 201, made.content
    # Moving it to `web` would leave it naming `data`'s channel: refused on `notify`.
    moved = client.patch(f"/api/v1/tasks/{made.json()['id']}", {"team": "web"}, format="json")
    assert moved.status_code == 400 and "notify" in moved.json()


def test_a_channel_and_a_calendar_are_made_in_a_team(teams) -> None:
    data, _ = teams
    editor = member(data, "editor")
    client = client_for(editor)
    body = {"kind": "email", "address": "ops@example.com", "team": "data"}
    channel = client.post("/api/v1/channels", body, format="json")
    assert channel.status_code == 201, channel.content
    assert Channel.objects.get(pk=channel.json()["id"]).team == data
    calendar = client.post("/api/v1/calendars", {"name": "off", "team": "data"}, format="json")
    assert calendar.status_code == 201 and calendar.json()["team"] == "data"
    key = client.post(
        "/api/v1/concurrency-keys", {"key": "db", "limit": 2, "team": "data"}, format="json"
    )
    assert key.status_code == 201 and key.json()["team"] == "data"


def test_a_teams_calendar_and_feed_serve_its_members(teams) -> None:
    data, _ = teams
    editor, other = member(data, "editor"), member(data, "viewer")
    calendar = Calendar.objects.create(owner=other, team=data, name="off")
    schedule = {"type": "daily", "at": "09:00:00", "exclude": [str(calendar.pk)]}
    body = {**HANDLER, "team": "data", "schedule": schedule}
    made = client_for(editor).post("/api/v1/tasks", body, format="json")
    assert made.status_code == 201, made.content
    # Another member's calendar_url of the team's task opens its feed; an outsider's does not.
    url = client_for(other).get(f"/api/v1/tasks/{made.json()['id']}").json()["calendar_url"]
    assert client_for(other).get(url).status_code == 200
    outsider = client_for(UserFactory())
    outsider_url = outsider.get("/api/v1/calendar-feed").json()["url"]
    token = outsider_url.split("token=")[1]
    assert outsider.get(url.split("?")[0] + f"?token={token}").status_code == 404


def test_a_members_list_pages_their_own_and_their_teams_tasks_as_one_list(teams) -> None:
    data, web = teams
    me, someone = member(data, "viewer"), UserFactory()
    member(web, "editor", me)
    ops = Team.objects.create(slug="ops")
    start = timezone.now() - timedelta(days=1)
    made = []
    for i in range(26):
        # Interleaved in time: mine, data's, web's, another team's, someone's own.
        team = [None, data, web, ops, None][i % 5]
        task = TaskFactory(
            owner=me if i % 5 == 0 else someone, team=team, name=f"t{(7 * i) % 26:02}"
        )
        Task.objects.filter(pk=task.pk).update(created_at=start + timedelta(minutes=i))
        made.append(Task.objects.get(pk=task.pk))
    seen_by_me = [task for i, task in enumerate(made) if i % 5 in (0, 1, 2)]
    api = client_for(me)

    def listed(**params: object) -> tuple[list[str], int]:
        ids, page = [], 1
        while True:
            body = api.get("/api/v1/tasks", {"page_size": 4, "page": page, **params}).json()
            ids += [item["id"] for item in body["results"]]
            if not body["next"]:
                return ids, body["count"]
            page += 1

    newest = sorted(seen_by_me, key=lambda t: t.created_at, reverse=True)
    assert listed() == ([str(t.pk) for t in newest], len(seen_by_me))
    by_name = sorted(seen_by_me, key=lambda t: t.name)
    assert listed(ordering="name") == ([str(t.pk) for t in by_name], len(seen_by_me))
    named = [t for t in newest if t.name.startswith("t1")]
    assert listed(name="t1") == ([str(t.pk) for t in named], len(named))
    only_web = [str(t.pk) for t in newest if t.team_id == web.pk]
    assert listed(team="web") == (only_web, len(only_web))
    # An order no index serves, and one by an alias (the next fire time): the same tasks.
    for ordering in ("-priority", "next_run_at"):
        ids, count = listed(ordering=ordering)
        assert (sorted(ids), count) == (sorted(str(t.pk) for t in seen_by_me), len(seen_by_me))
    assert api.get("/api/v1/tasks", {"page_size": 4, "page": 99}).status_code == 404


def test_a_members_list_is_counted_by_parts_as_the_or_counts_it(teams, monkeypatch) -> None:
    """The list's count and pages for a member of teams, with every filter the list has, equal
    the OR of the user's scopes (`visible`) filtered alike: their own tasks in a team of theirs
    are counted once (by the team's part, not by their own), theirs in a team they are no member
    of (left) not at all, and each of their teams counted."""
    data, web = teams
    me, someone = member(data, "viewer"), UserFactory()
    member(web, "editor", me)
    ops = Team.objects.create(slug="ops")
    mine_set = TaskSet.objects.create(owner=me, name="nightly")
    web_set = TaskSet.objects.create(owner=someone, team=web, name="nightly")
    start = timezone.now() - timedelta(days=1)
    made = []
    for i in range(40):
        # Mine alone, mine in my team, mine in a team I left, a colleague's in each of my
        # teams, a colleague's in a team not mine, a colleague's own.
        owner, team = [
            (me, None),
            (me, data),
            (me, ops),
            (someone, data),
            (someone, web),
            (someone, ops),
            (someone, None),
            (me, web),
        ][i % 8]
        taskset = mine_set if team is None and owner == me else web_set if team == web else None
        task = TaskFactory(
            owner=owner,
            team=team,
            name=f"t{(7 * i) % 40:02}",
            priority=i % 3 * 4,
            status=["active", "paused", "completed"][i % 3],
            taskset=taskset,
            taskset_key=f"k{i}" if taskset else None,
        )
        Task.objects.filter(pk=task.pk).update(created_at=start + timedelta(minutes=i))
        if i % 4 == 1:
            at = {f: start for f in ("succeeded_at", "changed_at", "late_through", "slow_through")}
            TaskHealth.objects.create(task=task, health="late", **at)
        if i % 5 == 2:
            RunFactory(task=task, status="failed", finished_at=start)
        made.append(task)
    api = client_for(me)

    def listed(params: dict[str, object]) -> tuple[list[str], int]:
        ids, page = [], 1
        while True:
            body = api.get("/api/v1/tasks", {"page_size": 3, "page": page, **params}).json()
            ids += [item["id"] for item in body["results"]]
            if not body["next"]:
                return ids, body["count"]
            page += 1

    def by_the_or(params: dict[str, object]) -> tuple[list[str], int]:
        scopes = Q(owner=me, team__isnull=True) | Q(team__in=[data, web])
        found = TaskFilter(params, queryset=Task.objects.filter(scopes)).qs
        ids = [str(pk) for pk in found.order_by("-created_at", "id").values_list("id", flat=True)]
        return ids, len(ids)

    filters: list[dict[str, object]] = [
        {},
        {"status": "paused"},
        {"name": "t1"},
        {"priority": "4"},
        {"team": "web"},
        {"team": "ops"},
        {"taskset": "nightly"},
        {"health": "late"},
        {"health": "up"},
        {"last_run_status": "failed"},
        {"status": "active", "name": "t", "health": "up"},
    ]
    for params in filters:
        expected = by_the_or(params)
        assert listed(params) == expected, params
        listing = TaskFilter(params, queryset=Task.objects.all()).qs.values_list("id", flat=True)
        assert access.visible_counted(listing, me).count() == expected[1], params
    seen = by_the_or({})[1]
    assert seen == 25  # mine alone, mine in data, mine in web, the colleague's in both: 5 each
    assert seen == len(
        [t for t in made if t.team in (data, web) or (t.owner, t.team) == (me, None)]
    )
    # Past PAGE_PARTS_MAX teams the list is read and counted with the OR: the same.
    monkeypatch.setattr(access, "PAGE_PARTS_MAX", 1)
    for params in filters[:4]:
        assert listed(params) == by_the_or(params), params


def test_memberships_are_read_once_per_request_and_again_by_the_next(teams) -> None:
    """A member's filtered task list reads their memberships once (its bounds, page and count
    ask three times); the next request reads them again, so a member removed no longer sees the
    team's tasks; a membership changed while a request is served is read again by its later
    checks. The default list reads them inside its one statement (`tasks_visible_page`)."""
    data, web = teams
    me, someone = member(data, "viewer"), UserFactory()
    TaskFactory(owner=me)
    theirs = TaskFactory(owner=someone, team=data)
    api = client_for(me)
    with CaptureQueriesContext(connection) as queries:
        body = api.get("/api/v1/tasks", {"status": "active"}).json()
    assert body["count"] == 2
    read = [q["sql"] for q in queries.captured_queries if '"accounts_membership"' in q["sql"]]
    assert len(read) == 1, read
    with CaptureQueriesContext(connection) as queries:
        body = api.get("/api/v1/tasks").json()
    assert body["count"] == 2
    assert len(queries.captured_queries) == 1, [q["sql"] for q in queries.captured_queries]
    assert "accounts_membership m" in queries.captured_queries[0]["sql"]
    Membership.objects.filter(user=me, team=data).delete()
    assert api.get("/api/v1/tasks").json()["count"] == 1
    assert api.get("/api/v1/tasks", {"status": "active"}).json()["count"] == 1
    assert api.get(f"/api/v1/tasks/{theirs.pk}").status_code == 404

    def served(request: object) -> list[str | None]:
        seen = [access.role_in(me, web.pk)]
        Membership.objects.create(team=web, user=me, role="viewer")
        seen.append(access.role_in(me, web.pk))
        Membership.objects.filter(team=web, user=me).get().delete()
        return [*seen, access.role_in(me, web.pk)]

    assert access.MembershipsPerRequest(served)(object()) == [None, "viewer", None]  # type: ignore[arg-type]


def test_a_batchs_bodies_read_the_default_team_and_a_named_team_once(teams) -> None:
    """A service account's batch without `team` goes to its team, and one naming a team goes
    to that team, each body alike; the account and the team are read once for the request,
    not once per body."""
    from accounts.teams import create_service_account

    data, _ = teams
    account = create_service_account(team=data, name="ci", role="editor")
    api = client_for(account.user)
    for named in ({}, {"team": "data"}):
        body = {**HANDLER, **named}
        with CaptureQueriesContext(connection) as queries:
            made = api.post("/api/v1/tasks/batch", {"tasks": [body] * 3}, format="json")
        assert made.status_code == 201, made.content
        assert Task.objects.filter(pk__in=made.json()["ids"], team=data).count() == 3
        for table in ('"accounts_serviceaccount"', '"accounts_team"'):
            read = [q["sql"] for q in queries.captured_queries if f"FROM {table}" in q["sql"]]
            assert len(read) <= 1, read
