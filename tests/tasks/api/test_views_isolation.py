"""Isolation matrix: users see only their own objects; anonymous sees nothing.

For users A and B: every endpoint that takes an id answers B exactly as it answers an id that
does not exist (404, same body), changes nothing of A's, and no list or filter of B's ever
contains an object of A's. Anonymous requests get 401 on every route but a short, deliberate
public list; the admin refuses anyone not signed in (what a signed-in user sees there is
scoped to their own objects: tests/tasks/test_admin_scope.py).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from notifications.models import Channel, Notification
from tasks import schedules
from tasks.models import Run, Task
from tests.factories import RunFactory, TaskFactory, UserFactory
from tests.notifications.conftest import ChannelFactory

pytestmark = pytest.mark.django_db
UNKNOWN = uuid.UUID("00000000-0000-7000-8000-000000000000")


@pytest.fixture
def a_objects(user) -> dict[str, Any]:
    """User A (the `api` fixture's user) owns one object of every kind."""
    now = datetime.now(UTC)
    channel = ChannelFactory(owner=user, kind="email", config={"address": "a@example.com"})
    task = TaskFactory(
        owner=user,
        name="a-secret-task",
        schedule=schedules.normalize({"type": "interval", "every": 60}, now=now),
        schedule_type="interval",
        notify=[{"channel": str(channel.id), "events": ["failed"]}],
    )
    scheduled = RunFactory(task=task, scheduled_at=now + timedelta(hours=1))
    failed = RunFactory(task=task, status="failed", attempt=1, finished_at=now)
    notification = Notification.objects.create(
        channel=channel,
        run=failed,
        task=task,
        attempt=1,
        event="failed",
        retry_until=now + timedelta(hours=1),
    )
    return {
        "task": task,
        "scheduled": scheduled,
        "failed": failed,
        "channel": channel,
        "notification": notification,
    }


def id_requests(objs: dict[str, Any]) -> list[tuple[str, str, dict]]:
    """(method, path, body) for every endpoint that takes an id, aimed at `objs`."""
    task, run, channel = objs["task"].id, objs["scheduled"].id, objs["channel"].id
    failed, notification = objs["failed"].id, objs["notification"].id
    noop = {"kind": "handler", "payload": {"name": "noop"}}
    requests = [
        ("get", f"/api/v1/tasks/{task}", {}),
        ("patch", f"/api/v1/tasks/{task}", {"name": "taken"}),
        ("put", f"/api/v1/tasks/{task}", noop),
        ("delete", f"/api/v1/tasks/{task}?force=true", {}),
        ("get", f"/api/v1/tasks/{task}/runs", {}),
        ("get", f"/api/v1/runs/{run}", {}),
        ("post", f"/api/v1/runs/{run}/cancel", {}),
        ("post", f"/api/v1/runs/{failed}/retry", {}),
        ("get", f"/api/v1/channels/{channel}", {}),
        ("patch", f"/api/v1/channels/{channel}", {"name": "taken"}),
        ("delete", f"/api/v1/channels/{channel}", {}),
        ("get", f"/api/v1/notifications/{notification}", {}),
        ("get", f"/task?id={task}", {}),
        ("delete", f"/task?id={task}", {}),
        ("put", "/task", {"task_id": str(task), "name": "taken"}),
        ("put", "/task/status", {"task_id": str(task), "status": "disable"}),
        ("get", f"/task/{task}", {}),
        ("put", f"/task/{task}", {"name": "taken", "cancel_next": True}),
        ("delete", f"/task/{task}", {}),
    ]
    for action in ("pause", "resume", "run-now", "skip-next"):
        requests.append(("post", f"/api/v1/tasks/{task}/{action}", {}))
    return requests


def unknown_objects() -> dict[str, Any]:
    """Stand-ins with ids nobody owns, for the "exactly as an unknown id" comparison."""

    class Stub:
        id = UNKNOWN

    return dict.fromkeys(("task", "scheduled", "failed", "channel", "notification"), Stub())


def state_of(objs: dict[str, Any]) -> list[Any]:
    task = Task.objects.get(pk=objs["task"].pk)
    runs = sorted(Run.objects.filter(task=task).values_list("id", "status", "attempt"))
    channel = Channel.objects.get(pk=objs["channel"].pk)
    return [task.name, task.status, task.payload, runs, channel.name, channel.config]


def call(client: APIClient, method: str, path: str, body: dict) -> Any:
    if method in ("get", "delete"):
        return getattr(client, method)(path)
    return getattr(client, method)(path, body, format="json")


def test_b_gets_404_for_every_one_of_a_s_objects(api, other_api, a_objects) -> None:
    before = state_of(a_objects)
    mine = zip(id_requests(a_objects), id_requests(unknown_objects()), strict=True)
    for (method, path, body), (_, unknown_path, unknown_body) in mine:
        response = call(other_api, method, path, body)
        unknown = call(other_api, method, unknown_path, unknown_body)
        assert response.status_code == 404, (method, path, response.content)
        # Indistinguishable from an id that does not exist: no existence oracle.
        assert response.json() == unknown.json(), (method, path)
    assert state_of(a_objects) == before


def test_a_reaches_its_own_objects_through_the_same_requests(api, a_objects) -> None:
    """The matrix above is meaningful: the owner gets past the 404 on every one of them."""
    for method, path, body in id_requests(a_objects):
        if method == "delete":
            continue  # one would cancel the task for the rest
        response = call(api, method, path, body)
        assert response.status_code != 404, (method, path, response.content)


def test_no_list_or_filter_of_b_contains_a_s_objects(other_api, a_objects) -> None:
    task, channel, run = a_objects["task"].id, a_objects["channel"].id, a_objects["failed"].id
    lists = [
        "/api/v1/tasks",
        "/tasks",
        f"/api/v1/tasks?name={a_objects['task'].name}",
        "/api/v1/channels",
        "/api/v1/notifications",
        f"/api/v1/notifications?task={task}",
        f"/api/v1/notifications?channel={channel}",
        f"/api/v1/notifications?run={run}",
    ]
    a_ids = {str(obj.id) for obj in a_objects.values()}
    for path in lists:
        response = other_api.get(path)
        assert response.status_code == 200, (path, response.content)
        assert response.json()["count"] == 0, path
        assert not a_ids & set(str(value) for value in _walk(response.json())), path


def _walk(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [v for child in value.values() for v in _walk(child)]
    if isinstance(value, list):
        return [v for child in value for v in _walk(child)]
    return [value]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/tasks", {"kind": "handler", "payload": {"name": "noop"}}),
        ("/task", {"kind": "handler", "payload": {"name": "noop"}}),
        ("/api/v1/tasks/batch", None),
    ],
)
def test_b_cannot_subscribe_a_task_to_a_s_channel(
    other_api, other_user, a_objects, path, body
) -> None:
    notify = [{"channel": str(a_objects["channel"].id), "events": ["failed"]}]
    task = {"kind": "handler", "payload": {"name": "noop"}, "notify": notify}
    payload = {"tasks": [task]} if body is None else {**body, "notify": notify}

    response = other_api.post(path, payload, format="json")

    assert response.status_code == 400, response.content
    assert "notify" in response.content.decode()
    assert not Task.objects.filter(owner=other_user).exists()


def test_b_cannot_point_its_own_task_at_a_s_channel(other_api, other_user, a_objects) -> None:
    own = TaskFactory(owner=other_user)
    notify = [{"channel": str(a_objects["channel"].id), "events": ["failed"]}]

    response = other_api.patch(f"/api/v1/tasks/{own.id}", {"notify": notify}, format="json")

    assert response.status_code == 400
    assert Task.objects.get(pk=own.pk).notify == []


# --- anonymous and staff ------------------------------------------------------------------------
# Deliberately public: the token endpoints (how one gets a token), the probes (/health/live says
# "the process answers"; /health reports component status and process counts, never user data),
# the Prometheus scrape (open unless SCHEDULER_METRICS_TOKEN is set, for scrapers inside the
# network), the API schema and its docs pages (descriptions of the API, no data), and the root
# (a redirect to the admin, which asks for a login).
PUBLIC = {
    "",
    "api/v1/auth/token",
    "api/v1/auth/token/refresh",
    "health",
    "health/live",
    "metrics",
    "api/schema/",
    "api/docs/",
    "api/redoc/",
    "api/v1/tasksets/schema",
}


# Calendar feeds: calendar apps send no Authorization header, so these take the owner's feed
# token in `?token=` instead (tests/tasks/api/test_calendar_feed.py holds one user's token to
# their own tasks); without it they answer 404, never data.
FEED_TOKEN = {f"api/v1/tasks/{UNKNOWN}/calendar.ics", "api/v1/calendar.ics"}


def routes() -> list[str]:
    """Every route outside the admin, as a concrete path (ids filled in)."""
    found: list[str] = []

    def walk(patterns: list, prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern) and not route.startswith("admin/"):
                found.append(route.replace("<uuid:pk>", str(UNKNOWN)).replace("<int:pk>", "1"))

    walk(get_resolver().url_patterns, "")
    return found


def test_the_public_routes_are_exactly_the_deliberate_ones() -> None:
    assert PUBLIC <= set(routes())


@pytest.mark.parametrize("method", ["get", "post", "put", "patch", "delete"])
def test_anonymous_gets_401_on_every_other_route(anon: APIClient, db, method: str) -> None:
    checked = 0
    for route in routes():
        if route in PUBLIC or route in FEED_TOKEN or route.startswith("static/"):
            continue
        response = getattr(anon, method)("/" + route, {}, format="json")
        assert response.status_code == 401, (method, route, response.status_code)
        assert response.json()["code"] == "not_authenticated"
        checked += 1
    assert checked >= 20


@pytest.mark.parametrize("method", ["get", "post", "put", "patch", "delete"])
def test_the_feed_routes_answer_nothing_without_a_feed_token(
    anon: APIClient, a_objects, method: str
) -> None:
    assert FEED_TOKEN <= set(routes())
    for route in FEED_TOKEN:
        response = getattr(anon, method)("/" + route, format="json")
        assert response.status_code == (404 if method == "get" else 405), (method, route)
        assert "a-secret-task" not in response.content.decode()


def test_public_probes_reveal_no_user_data(anon: APIClient, a_objects) -> None:
    live = anon.get("/health/live")
    health = anon.get("/health")

    assert (live.status_code, live.json()) == (200, {"status": "ok"})
    assert health.status_code in (200, 503)
    assert set(health.json()) == {"status", "components"}
    text = health.content.decode() + live.content.decode()
    user = a_objects["task"].owner
    for secret in (user.username, "a-secret-task", *(str(o.id) for o in a_objects.values())):
        assert secret not in text


def test_token_endpoints_answer_anonymous_requests(anon: APIClient, user) -> None:
    token = anon.post(
        "/api/v1/auth/token",
        {"username": user.username, "password": "password-123"},
        format="json",
    )
    refresh = anon.post("/api/v1/auth/token/refresh", {"refresh": "x"}, format="json")

    assert token.status_code == 200
    assert refresh.status_code == 401  # answered (a bad token), not refused for lack of one


@pytest.mark.parametrize("path", ["/admin/", "/admin/dashboard/", "/admin/tasks/task/"])
def test_admin_refuses_anyone_not_signed_in(client, user, api, path: str) -> None:
    anonymous = client.get(path)
    with_token = api.get(path)  # the admin ignores API tokens

    for response in (anonymous, with_token):
        assert response.status_code == 302
        assert response["Location"].startswith("/admin/login/")


def test_ordinary_users_get_their_own_lists_and_their_own_dashboard(client, user) -> None:
    client.force_login(user)  # a valid session, not staff

    assert client.get("/admin/tasks/task/").status_code == 200
    dashboard = client.get("/admin/dashboard/")
    # Their runs' counts and charts, not the whole queue's samples (tasks/admin/dashboard_runs.py).
    assert dashboard.status_code == 200 and dashboard.context["own"] is True
    assert "Queue depth" not in dashboard.content.decode()


def test_admin_admits_staff(client) -> None:
    staff = UserFactory(is_staff=True, is_superuser=True)
    client.force_login(staff)

    assert client.get("/admin/").status_code == 200
