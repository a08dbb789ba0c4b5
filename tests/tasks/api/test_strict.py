"""Every request body refuses fields it does not take, at every level, naming them; choice errors
list the choices; list filters and ordering are checked as strictly as bodies."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.test import APIClient
from rest_framework_simplejwt.tokens import RefreshToken

from notifications.models import Channel
from tasks.api import strict
from tasks.api.serializers import HolidaysSerializer, TaskInputSerializer
from tasks.models import Task
from tests.factories import TaskFactory
from tests.notifications.conftest import ChannelFactory

pytestmark = pytest.mark.django_db
NOOP = {"kind": "handler", "payload": {"name": "noop"}}


def refused(response, *path: str) -> list[str]:
    """The messages at `path` of a 400's body."""
    assert response.status_code == 400, response.content
    found = response.json()
    for key in path:
        assert key in found, (key, found)
        found = found[key]
    return found


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"colour": "red"}, ["colour"]),
        ({"retry_backoff": {"base": 1, "cap": 2, "jitter": 1}}, ["retry_backoff", "jitter"]),
        ({"payload": {"name": "noop", "argz": {}}}, ["payload", "argz"]),
        ({"schedule": {"type": "interval", "every": 5, "evry": 6}}, ["schedule", "evry"]),
    ],
)
@pytest.mark.parametrize("path_", ["/api/v1/tasks", "/task"])
def test_create_refuses_unknown_fields_at_every_level(api: APIClient, path_, change, path):
    messages = refused(api.post(path_, {**NOOP, **change}, format="json"), *path)

    assert messages[0].startswith("Unknown field")
    assert not Task.objects.exists()


def test_unknown_field_message_lists_what_the_object_takes(api: APIClient) -> None:
    messages = refused(api.post("/api/v1/tasks", {**NOOP, "prio": 9}, format="json"), "prio")

    assert "priority" in messages[0] and "schedule" in messages[0]


def test_unknown_field_comes_with_the_other_errors(api: APIClient) -> None:
    body = {**NOOP, "colour": "red", "max_attempts": 0}

    errors = refused(api.post("/api/v1/tasks", body, format="json"))

    assert set(errors) == {"colour", "max_attempts"}


def test_unknown_notify_entry_field_is_named_by_index(api: APIClient, user) -> None:
    channel = ChannelFactory(owner=user)
    notify = [{"channel": str(channel.id), "events": ["failed"], "when": "always"}]

    errors = refused(api.post("/api/v1/tasks", {**NOOP, "notify": notify}, format="json"))

    assert list(errors["notify"]["0"]) == ["when"]


@pytest.mark.parametrize("method", ["patch", "put"])
def test_update_refuses_unknown_fields(api: APIClient, create: Callable, method: str) -> None:
    task = create(name="kept")

    response = getattr(api, method)(
        f"/api/v1/tasks/{task['id']}", {**NOOP, "name": "new", "nmae": "x"}, format="json"
    )

    refused(response, "nmae")
    assert Task.objects.get(pk=task["id"]).name == "kept"


def test_batch_refuses_unknown_fields_outside_and_inside(api: APIClient) -> None:
    outer = api.post("/api/v1/tasks/batch", {"tasks": [NOOP], "atomic": True}, format="json")
    inner = api.post("/api/v1/tasks/batch", {"tasks": [NOOP, {**NOOP, "x": 1}]}, format="json")

    refused(outer, "atomic")
    refused(inner, "tasks", "1", "x")
    assert not Task.objects.exists()


@pytest.mark.parametrize(
    ("method", "url", "body", "field"),
    [
        ("put", "/task", {"name": "new", "colour": "red"}, "colour"),
        ("put", "/task/{id}", {"name": "new", "colour": "red"}, "colour"),
        ("put", "/task/status", {"status": "disable", "why": "x"}, "why"),
    ],
)
def test_seed_updates_refuse_unknown_fields(api: APIClient, user, method, url, body, field):
    task = TaskFactory(owner=user, name="kept")
    body = {**body, "task_id": str(task.id)} if url != "/task/{id}" else body

    refused(getattr(api, method)(url.format(id=task.id), body, format="json"), field)

    task.refresh_from_db()
    assert (task.name, task.status) == ("kept", "active")


def test_preview_refuses_unknown_fields(api: APIClient) -> None:
    body = {"schedule": {"type": "interval", "every": 5}, "count": 2, "cuont": 3}

    refused(api.post("/api/v1/schedules/preview", body, format="json"), "cuont")


def test_channels_refuse_unknown_fields(api: APIClient, user) -> None:
    created = api.post(
        "/api/v1/channels",
        {"kind": "email", "address": "a@example.com", "adress": "b"},
        format="json",
    )
    channel = ChannelFactory(owner=user, name="kept")
    changed = api.patch(f"/api/v1/channels/{channel.id}", {"nme": "x"}, format="json")

    refused(created, "adress")
    refused(changed, "nme")
    assert Channel.objects.get().name == "kept"


def test_token_routes_refuse_unknown_fields(anon: APIClient, user) -> None:
    login = {"username": user.username, "password": "password-123"}
    refresh = str(RefreshToken.for_user(user))

    refused(anon.post("/api/v1/auth/token", {**login, "otp": "1"}, format="json"), "otp")
    refused(
        anon.post("/api/v1/auth/token/refresh", {"refresh": refresh, "x": 1}, format="json"), "x"
    )
    assert anon.post("/api/v1/auth/token", login, format="json").status_code == 200


@pytest.mark.parametrize(
    ("url", "body", "path", "choices"),
    [
        ("/api/v1/tasks", {**NOOP, "kind": "shell"}, ["kind"], "http, executable, handler"),
        ("/api/v1/tasks", {**NOOP, "on_zombie": "kill"}, ["on_zombie"], "notify, cancel"),
        ("/api/v1/channels", {"kind": "sms"}, ["kind"], "email, webhook, slack"),
        (
            "/api/v1/channels",
            {"kind": "email", "address": "a@example.com", "all_tasks_events": ["done"]},
            ["all_tasks_events", "0"],
            "succeeded, failed",
        ),
    ],
)
def test_choice_errors_list_the_choices(api: APIClient, url, body, path, choices) -> None:
    messages = refused(api.post(url, body, format="json"), *path)

    assert choices in messages[0], messages


def test_notify_errors_have_one_shape(api: APIClient, user) -> None:
    """A missing field, a bad event and a channel not among the caller's: all by entry index."""
    mine = str(ChannelFactory(owner=user).id)
    theirs = str(ChannelFactory().id)
    notify = [
        {"channel": mine, "events": ["failed"]},
        {"events": ["failed"]},
        {"channel": mine, "events": ["done"]},
        {"channel": theirs, "events": ["failed"]},
    ]

    missing = refused(api.post("/api/v1/tasks", {**NOOP, "notify": notify[:2]}, format="json"))
    event = refused(api.post("/api/v1/tasks", {**NOOP, "notify": notify[::2]}, format="json"))
    other = refused(api.post("/api/v1/tasks", {**NOOP, "notify": notify[::3]}, format="json"))

    assert missing == {"notify": {"1": {"channel": ["This field is required."]}}}
    assert list(event["notify"]) == ["1"] and "failed" in event["notify"]["1"]["events"]["0"][0]
    assert other == {"notify": {"1": {"channel": ["No channel with this id among yours."]}}}


def test_status_filter_error_lists_the_choices(api: APIClient) -> None:
    messages = refused(api.get("/api/v1/tasks", {"status": "done"}), "status")

    assert "active, paused, completed, failed, cancelled" in messages[0]


def test_priority_filter_takes_the_names_the_body_takes(api: APIClient, create) -> None:
    high = create(priority="high")
    create(priority="low")

    by_name = api.get("/api/v1/tasks", {"priority": "high"})
    by_number = api.get("/api/v1/tasks", {"priority": "9"})

    assert [t["id"] for t in by_name.json()["results"]] == [high["id"]]
    assert by_number.json()["results"] == by_name.json()["results"]
    assert (
        "low, medium, high" in refused(api.get("/api/v1/tasks", {"priority": "top"}), "priority")[0]
    )


def test_unknown_ordering_is_a_400_listing_the_choices(api: APIClient, create) -> None:
    create(name="b")
    create(name="a")

    messages = refused(api.get("/api/v1/tasks", {"ordering": "name,-colour"}), "ordering")
    ordered = api.get("/api/v1/tasks", {"ordering": "-name"})
    runs = api.get(
        f"/api/v1/tasks/{ordered.json()['results'][0]['id']}/runs", {"ordering": "started_at"}
    )

    assert "-colour" in messages[0] and "created_at" in messages[0]
    assert [t["name"] for t in ordered.json()["results"]] == ["b", "a"]
    assert "scheduled_at, finished_at" in refused(runs, "ordering")[0]


def test_seed_puts_all_answer_204(api: APIClient, user) -> None:
    task = TaskFactory(owner=user)

    by_body = api.put("/task", {"task_id": str(task.id), "name": "one"}, format="json")
    by_path = api.put(f"/task/{task.id}", {"name": "two"}, format="json")
    status = api.put("/task/status", {"task_id": str(task.id), "status": "disable"}, format="json")

    assert [by_body.status_code, by_path.status_code, status.status_code] == [204, 204, 204]
    task.refresh_from_db()
    assert (task.name, task.status) == ("two", "paused")


BODIES = [
    {},
    {"kind": "handler"},
    {**NOOP, "name": "", "priority": "high", "max_attempts": 0, "colour": "red"},
    {**NOOP, "retry_backoff": {"base": 1}, "notify": [{"channel": "x"}], "timeout": None},
    {**NOOP, "expect": {"duration": {"min": 5}}, "concurrency": None, "resources": None},
    {**NOOP, "rate_limit": {"key": "k", "limit": 1}, "on_zombie": "kill", "team": None},
    {"name": None, "dedup_key": "k", "expect": None, "retry_backoff": {"base": 2, "cap": 1}},
    [NOOP],
]


def _outcome(validate: Callable[[], dict]) -> tuple[str, object]:
    try:
        return "valid", validate()
    except ValidationError as exc:
        return "refused", exc.detail


@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("body", BODIES)
def test_absent_keys_are_passed_over_where_drf_skips_them(body, partial) -> None:
    """The fields' values and errors are DRF's Serializer.to_internal_value's, fresh serializers
    each, for bodies with fields absent, null, bad and nested, created and partial."""
    context = {"now": datetime(2026, 1, 2, tzinfo=UTC), "multipart": False}

    def ours() -> dict:
        return TaskInputSerializer(context=context, partial=partial)._fields_value(body)

    def drf() -> dict:
        serializer = TaskInputSerializer(context=context, partial=partial)
        return serializers.Serializer.to_internal_value(serializer, body)

    assert _outcome(ours) == _outcome(drf)


def test_fields_with_their_own_handling_of_an_absent_key_are_validated_as_drf_does() -> None:
    """The check behind passing over an absent key finds a field class that overrides any of
    the methods deciding what absent means (ResourcesField: null means {}; HolidaysSerializer:
    {} means none)."""
    fields = TaskInputSerializer().fields
    own = {name for name, field in fields.items() if not strict._drf_absent(field)}

    assert own == {"resources"}
    assert not strict._drf_absent(HolidaysSerializer())
    assert not strict._drf_absent(type("Own", (serializers.CharField,), {"get_value": len})())
    assert strict._drf_absent(serializers.ListField(child=serializers.CharField()))
