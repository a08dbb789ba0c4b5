"""The isolation matrix (accounts/access.py): every main route x every relation of the caller
to the object x a personal and a team object answers the status docs/api.md documents in its
table "Who may see and change what"; no list shows anyone an object they may not see, and the
audit log shows an object's entries exactly to those who may read the object."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Membership, Team
from notifications.models import Channel
from tasks import audit
from tasks.models import Calendar, ConcurrencyKey, RateKey, Run, TaskSet
from tests.conftest import ROOT, client_for
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db

CALLERS = ["owner", "team admin", "editor", "viewer", "other team's member", "no team"]
KINDS = ["personal", "team"]


def documented() -> dict[tuple[str, str, str], str]:
    """(caller, personal|team, read|write) -> "2xx" or a status, from docs/api.md's table."""
    text = (ROOT / "docs" / "api.md").read_text()
    table = text.split("<!-- access-matrix -->", 1)[1].strip().split("\n\n", 1)[0]
    found = {}
    for line in table.splitlines()[2:]:
        caller, *cells = [cell.strip() for cell in line.strip("|").split("|")]
        for (kind, access), cell in zip(
            [(k, a) for k in KINDS for a in ("read", "write")], cells, strict=True
        ):
            found[(caller, kind, access)] = cell
    return found


@dataclass
class Objects:
    task: Any
    run: Any
    channel: Any
    calendar: Any
    ckey: Any
    rkey: Any
    taskset: Any
    team: str | None


def objects(owner: Any, team: Team | None) -> Objects:
    daily = {"type": "daily", "at": "09:00:00", "timezone": "UTC"}
    task = TaskFactory(owner=owner, team=team, schedule=daily, schedule_type="daily")
    suffix = team.slug if team else "own"  # a key's name is unique among its owner's
    return Objects(
        task=task,
        run=RunFactory(task=task, status=Run.Status.SCHEDULED),
        channel=Channel.objects.create(
            owner=owner, team=team, kind="webhook", config={"url": "https://example.com/h"}
        ),
        calendar=Calendar.objects.create(owner=owner, team=team, name="holidays"),
        ckey=ConcurrencyKey.objects.create(
            owner=owner, team=team, name=f"db-{suffix}", max_running=2
        ),
        rkey=RateKey.objects.create(
            owner=owner, team=team, name=f"crm-{suffix}", rate_limit=5, per_seconds=60
        ),
        taskset=TaskSet.objects.create(owner=owner, team=team, name="nightly"),
        team=team.slug if team else None,
    )


# (name, read|write, method, path, body, the success status)
ROUTES: list[tuple[str, str, str, str, Any, int]] = [
    ("task", "read", "get", "/api/v1/tasks/{task}", None, 200),
    ("task-runs", "read", "get", "/api/v1/tasks/{task}/runs", None, 200),
    ("task-patch", "write", "patch", "/api/v1/tasks/{task}", {"priority": 3}, 200),
    ("task-pause", "write", "post", "/api/v1/tasks/{task}/pause", None, 200),
    (
        "task-backfill",
        "write",
        "post",
        "/api/v1/tasks/{task}/backfill",
        {"start": "2020-01-01T00:00:00Z", "end": "2020-01-02T00:00:00Z"},
        201,
    ),
    ("task-delete", "write", "delete", "/api/v1/tasks/{task}", None, 204),
    ("run", "read", "get", "/api/v1/runs/{run}", None, 200),
    ("run-cancel", "write", "post", "/api/v1/runs/{run}/cancel", None, 200),
    ("channel", "read", "get", "/api/v1/channels/{channel}", None, 200),
    ("channel-patch", "write", "patch", "/api/v1/channels/{channel}", {"name": "x"}, 200),
    ("channel-delete", "write", "delete", "/api/v1/channels/{channel}", None, 204),
    ("calendar", "read", "get", "/api/v1/calendars/{calendar}", None, 200),
    ("calendar-patch", "write", "patch", "/api/v1/calendars/{calendar}", {"name": "y"}, 200),
    ("calendar-delete", "write", "delete", "/api/v1/calendars/{calendar}", None, 204),
    ("ckey", "read", "get", "/api/v1/concurrency-keys/{ckey}", None, 200),
    ("ckey-patch", "write", "patch", "/api/v1/concurrency-keys/{ckey}", {"limit": 3}, 200),
    ("rkey", "read", "get", "/api/v1/rate-limits/{rkey}", None, 200),
    ("rkey-patch", "write", "patch", "/api/v1/rate-limits/{rkey}", {"limit": 4}, 200),
    ("taskset", "read", "get", "/api/v1/tasksets/nightly{set_team}", None, 200),
    ("taskset-drift", "read", "get", "/api/v1/tasksets/nightly/drift{set_team}", None, 200),
    ("taskset-put", "write", "put", "/api/v1/tasksets/nightly{set_team}", {"tasks": []}, 200),
    ("taskset-delete", "write", "delete", "/api/v1/tasksets/nightly{set_team}", None, 200),
]


@pytest.fixture
def world() -> tuple[dict[str, APIClient], dict[str, Objects]]:
    """The callers, the team (the owner its editor), another team, and both kinds of objects."""
    team, other = Team.objects.create(slug="data"), Team.objects.create(slug="web")
    users = {caller: UserFactory() for caller in CALLERS}
    roles = {"owner": "editor", "team admin": "admin", "editor": "editor", "viewer": "viewer"}
    for caller, role in roles.items():
        Membership.objects.create(team=team, user=users[caller], role=role)
    Membership.objects.create(team=other, user=users["other team's member"], role="admin")
    owner = users["owner"]
    made = {"personal": objects(owner, None), "team": objects(owner, team)}
    return {caller: client_for(user) for caller, user in users.items()}, made


def path_of(template: str, made: Objects) -> str:
    ids = {
        name: str(getattr(made, name).pk)
        for name in ("task", "run", "channel", "calendar", "ckey", "rkey")
    }
    ids["set_team"] = f"?team={made.team}" if made.team else ""
    return template.format(**ids)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("route", ROUTES, ids=[route[0] for route in ROUTES])
def test_each_cell_answers_as_documented(world, route, caller: str, kind: str) -> None:
    clients, made = world
    name, access, method, template, body, success = route
    expected = documented()[(caller, kind, access)]
    response = getattr(clients[caller], method)(path_of(template, made[kind]), body, format="json")
    if name == "taskset-put" and kind == "personal" and caller != "owner":
        # A set is named within its owner's sets: this PUT makes the caller's own "nightly".
        assert response.status_code == 200, response.content[:300]
        assert TaskSet.objects.get(pk=made[kind].taskset.pk).version == 0
        return
    want = success if expected == "2xx" else int(expected)
    assert response.status_code == want, (name, caller, kind, response.content[:300])
    if want == 404:
        # A 404 says nothing of the object: the same body as an id nobody has.
        assert re.search(rb"not.found|no such|no \w+ matches", response.content, re.I)


LISTS = {
    "task": "/api/v1/tasks",
    "run": "/api/v1/runs",
    "channel": "/api/v1/channels",
    "calendar": "/api/v1/calendars",
    "ckey": "/api/v1/concurrency-keys",
    "rkey": "/api/v1/rate-limits",
}


@pytest.mark.parametrize("caller", CALLERS)
def test_no_list_shows_an_object_its_caller_may_not_read(world, caller: str) -> None:
    clients, made = world
    table = documented()
    for name, url in LISTS.items():
        listed = {item["id"] for item in clients[caller].get(url).json()["results"]}
        for kind in KINDS:
            mine = str(getattr(made[kind], name).pk) in {str(i) for i in listed}
            assert mine == (table[(caller, kind, "read")] == "2xx"), (name, caller, kind)


# The objects' names in Objects, and their type in the audit log.
AUDITED = {
    "task": "task",
    "run": "run",
    "channel": "channel",
    "calendar": "calendar",
    "ckey": "concurrency_key",
    "rkey": "rate_key",
    "taskset": "taskset",
}


@pytest.mark.parametrize("caller", CALLERS)
def test_the_audit_log_shows_each_entry_to_whom_its_object_shows(world, caller: str) -> None:
    clients, made = world
    audit.record_all(
        audit.entry("update", kind, getattr(made[which], name))
        for which in KINDS
        for name, kind in AUDITED.items()
    )
    table = documented()

    def logged(**params: str) -> set[tuple[str, str]]:
        response = clients[caller].get("/api/v1/audit", {"page_size": 100, **params})
        assert response.status_code == 200, response.content[:300]
        return {(e["object"]["type"], e["object"]["id"]) for e in response.json()["results"]}

    def readable(*kinds: str) -> set[tuple[str, str]]:
        return {
            (kind, str(getattr(made[which], name).pk))
            for which in kinds
            if table[(caller, which, "read")] == "2xx"
            for name, kind in AUDITED.items()
        }

    assert logged() == readable(*KINDS)
    assert logged(team="data") == readable("team")
    assert logged(team="web") == set()


def test_a_list_filters_by_team(world) -> None:
    clients, made = world
    listed = clients["owner"].get("/api/v1/tasks", {"team": "data"}).json()["results"]
    assert [item["id"] for item in listed] == [str(made["team"].task.pk)]
    assert listed[0]["team"] == "data"
    assert clients["viewer"].get("/api/v1/tasks", {"team": "web"}).json()["results"] == []


def test_the_table_covers_every_caller_and_kind() -> None:
    table = documented()
    assert {(c, k, a) for c in CALLERS for k in KINDS for a in ("read", "write")} == set(table)
