"""Every field of a task through every entry point: the value comes back equal, or the path
refuses it naming the field, as REFUSED declares (tasks/task_fields.py is the one definition
they all use).

One case per (path, field or schedule member): a path that drops one member fails that case,
named `path-member`, e.g. `admin_change-schedule.weekly.business_days_only`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import Membership, Team
from notifications.models import Channel
from tasks import schedules
from tasks.admin.forms import RECURRING_FIELDS, TYPE_FIELDS
from tasks.models import Calendar, Run, Task
from tasks.task_fields import BODY_FIELDS, JSON_TEXT_FIELDS
from tests.conftest import client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

HANDLER = {"kind": "handler", "payload": {"name": "noop"}}
CALENDAR, CHANNEL = "<calendar>", "<channel>"  # the owner's, made per test
TEAM = "<team>"  # a team the owner is an editor of, made per test
WINDOW = {"start": "2030-02-01T00:00:00Z", "end": "2030-02-02T00:00:00Z"}
# The members each schedule type needs, and a value of every member it takes (not the default).
BASE = {
    "once": {"type": "once", "run_at": "2030-01-01T00:00:00Z"},
    "interval": {"type": "interval", "every": 3600},
    "daily": {"type": "daily", "at": "09:00:00"},
    "weekly": {"type": "weekly", "days": ["mon", "fri"], "at": "09:00:00"},
    "monthly": {"type": "monthly", "day": 15, "at": "09:00:00"},
    "cron": {"type": "cron", "expression": "0 9 * * *"},
    "rrule": {"type": "rrule", "rule": "FREQ=DAILY;BYHOUR=9"},
}
MEMBERS: dict[str, Any] = {
    "run_at": "2030-06-01T12:00:00Z",
    "every": 600,
    "at": "17:30:00",
    "days": ["tue", "sat"],
    "business_days_only": True,
    "day": -1,
    "weekday": {"weekday": "fri", "week": -1},  # with week: the last Friday
    "week": {"weekday": "mon", "week": 2},
    "business_day": -1,
    "expression": "*/5 * * * *",
    "allow_every_second": {"allow_every_second": True},  # with EVERY_SECOND[type]
    "rule": "FREQ=WEEKLY;BYDAY=MO;BYHOUR=8",
    "exdates": ["2030-12-24", "2030-12-25T09:00:00Z"],
    "timezone": "Europe/Berlin",
    "start_at": "2030-01-01T00:00:00Z",
    "end_at": "2031-01-01T00:00:00Z",
    "max_runs": 12,
    "jitter": 30,
    "misfire": "run_all",
    "misfire_grace": 120,
    "overlap": "skip",
    "exclude": [CALENDAR],
    "exclude_windows": [WINDOW],
}
# What makes each type fire every second, the case `allow_every_second` opts in to.
EVERY_SECOND = {
    "interval": {"every": 1},
    "cron": {"expression": "* * * * * *"},
    "rrule": {"rule": "FREQ=SECONDLY"},
}
# Members a path takes but does not keep as sent: a one-time `timezone` and `delay` become its
# `run_at`; `anchor` is the phase the service sets (kept by every change: the admin's tests).
NOT_KEPT = {("once", "timezone"), ("once", "delay")}


def schedule_cases() -> list[Any]:
    cases = []
    for kind, base in BASE.items():
        for member in schedules.members(kind):
            if member == "anchor" or (kind, member) in NOT_KEPT:
                continue
            value = MEMBERS[member]
            extra = value if isinstance(value, dict) else {member: value}
            if member == "allow_every_second":
                extra = {**EVERY_SECOND[kind], **extra}
            given = dict(base)
            if kind == "monthly" and ("weekday" in extra or member == "business_day"):
                del given["day"]  # one of day, weekday or business_day
            schedule = {**given, **extra}
            cases.append(pytest.param("schedule", schedule, id=f"schedule.{kind}.{member}"))
    return cases


FIELD_CASES = [
    pytest.param("name", "nightly report", id="name"),
    pytest.param("priority", 7, id="priority"),
    pytest.param("max_attempts", 9, id="max_attempts"),
    pytest.param("retry_backoff", {"base": 3.0, "cap": 90.0}, id="retry_backoff"),
    pytest.param("timeout", 45.0, id="timeout"),
    pytest.param("notify", [{"channel": CHANNEL, "events": ["failed"]}], id="notify"),
    pytest.param("resources", {"cpu": "500m", "memory": "256Mi"}, id="resources"),
    pytest.param("concurrency", {"key": "db", "limit": 2, "scope": "owner"}, id="concurrency"),
    pytest.param(
        "rate_limit", {"key": "crm", "limit": 5, "per": 60, "scope": "owner"}, id="rate_limit"
    ),
    pytest.param("on_zombie", "cancel", id="on_zombie"),
    pytest.param(
        "expect",
        {"start_within": 60.0, "duration": {"max": 600.0}, "failure_streak": 3},
        id="expect",
    ),
    pytest.param("team", TEAM, id="team"),
]
CASES = [*FIELD_CASES, *schedule_cases()]


@dataclass
class Env:
    owner: Any
    api: APIClient
    staff: Any  # Django's test client, signed in to the admin


@pytest.fixture
def env(client) -> Env:
    owner = UserFactory(username="operator", is_staff=True, is_superuser=True)
    client.force_login(owner)
    return Env(owner, client_for(owner), client)


def filled(value: Any, env: Env) -> Any:
    """`value` with the placeholders replaced by the ids of the owner's calendar and channel."""
    text = json.dumps(value)
    if CALENDAR in text:
        calendar = Calendar.objects.create(owner=env.owner, name="off", dates=["2030-05-01"])
        text = text.replace(CALENDAR, str(calendar.pk))
    if CHANNEL in text:
        channel = Channel.objects.create(
            owner=env.owner, kind=Channel.Kind.EMAIL, config={"address": "ops@example.com"}
        )
        text = text.replace(CHANNEL, str(channel.pk))
    if TEAM in text:
        team = Team.objects.create(slug="data")
        Membership.objects.create(team=team, user=env.owner, role=Membership.Role.EDITOR)
        text = text.replace(TEAM, team.slug)
    return json.loads(text)


class Refused(Exception):
    """The path answered 400: its errors."""

    def __init__(self, errors: Any) -> None:
        super().__init__(errors)
        self.errors = errors


def ok(response: Any, code: int = 200) -> Any:
    if response.status_code == 400:
        raise Refused(response.json())
    assert response.status_code == code, response.content.decode()[-2000:]
    return response.json() if response.content else None


def shown(env: Env, task_id: Any) -> dict:
    return ok(env.api.get(f"/api/v1/tasks/{task_id}"))


def made(env: Env) -> dict:
    """A task with the defaults, for the paths that change one."""
    return ok(env.api.post("/api/v1/tasks", HANDLER, format="json"), 201)


# Each path sends `{field: value}` (with what a task needs besides) and answers the fields as
# the path shows them back.
def json_create(env: Env, field: str, value: Any) -> dict:
    return ok(env.api.post("/api/v1/tasks", {**HANDLER, field: value}, format="json"), 201)


def multipart_upload(env: Env, field: str, value: Any) -> dict:
    text = json.dumps(value) if field in JSON_TEXT_FIELDS else str(value)
    body = {"file": SimpleUploadedFile("job.sh", b"#!/bin/sh\ntrue\n"), field: text}
    return ok(env.api.post("/api/v1/tasks/upload", body, format="multipart"), 201)


def batch(env: Env, field: str, value: Any) -> dict:
    body = {"tasks": [{**HANDLER, field: value}]}
    ids = ok(env.api.post("/api/v1/tasks/batch", body, format="json"), 201)["ids"]
    return shown(env, ids[0])


def patch(env: Env, field: str, value: Any) -> dict:
    task = made(env)
    return ok(env.api.patch(f"/api/v1/tasks/{task['id']}", {field: value}, format="json"))


def put(env: Env, field: str, value: Any) -> dict:
    task = made(env)
    body = {**HANDLER, field: value}
    return ok(env.api.put(f"/api/v1/tasks/{task['id']}", body, format="json"))


def put_back(env: Env, field: str, value: Any) -> dict:
    """Created with the value, read and PUT back whole: nothing changes, nothing is re-planned."""
    task = json_create(env, field, value)
    runs = set(Run.objects.filter(task_id=task["id"]).values_list("pk", "scheduled_at"))
    before = shown(env, task["id"])
    body = {name: before[name] for name in BODY_FIELDS}
    after = ok(env.api.put(f"/api/v1/tasks/{task['id']}", body, format="json"))
    assert after["updated_at"] == before["updated_at"], "a PUT of the task as read changed it"
    assert set(Run.objects.filter(task_id=task["id"]).values_list("pk", "scheduled_at")) == runs
    return after


def seed_post(env: Env, field: str, value: Any) -> dict:
    return ok(env.api.post("/task", {**HANDLER, field: value}, format="json"), 201)


def seed_put(env: Env, field: str, value: Any) -> dict:
    task = made(env)
    ok(env.api.put("/task", {"task_id": task["id"], field: value}, format="json"), 204)
    return shown(env, task["id"])


def seed_put_id(env: Env, field: str, value: Any) -> dict:
    task = made(env)
    ok(env.api.put(f"/task/{task['id']}", {field: value}, format="json"), 204)
    return shown(env, task["id"])


TASKSET = "/api/v1/tasksets/paths"


def entry(field: str, value: Any) -> dict:
    return {"key": "one", **HANDLER, field: value}


def taskset_apply(env: Env, field: str, value: Any) -> dict:
    plan = ok(env.api.put(TASKSET, {"tasks": [entry(field, value)]}, format="json"))
    task = shown(env, plan["create"][0]["id"])
    again = ok(env.api.put(TASKSET, {"tasks": [entry(field, value)]}, format="json"))
    assert (again["update"], again["unchanged"]) == ([], 1), "an apply again is no change"
    return task


def taskset_dry_run(env: Env, field: str, value: Any) -> dict:
    url = TASKSET + "?dry_run=true"
    return ok(env.api.put(url, {"tasks": [entry(field, value)]}, format="json"))["create"][0][
        "task"
    ]


def taskset_drift(env: Env, field: str, value: Any) -> dict:
    """Applied with the defaults, then changed through the API: the drift shows the value."""
    plan = ok(env.api.put(TASKSET, {"tasks": [{"key": "one", **HANDLER}]}, format="json"))
    task_id = plan["create"][0]["id"]
    ok(env.api.patch(f"/api/v1/tasks/{task_id}", {field: value}, format="json"))
    drift = ok(env.api.get(TASKSET + "/drift"))["drift"]
    assert [d["key"] for d in drift] == ["one"], drift
    return {name: change["actual"] for name, change in drift[0]["fields"].items()}


def taskset_export(env: Env, field: str, value: Any) -> dict:
    ok(env.api.put(TASKSET, {"tasks": [entry(field, value)]}, format="json"))
    return ok(env.api.get(TASKSET))["tasks"][0]["entry"]


def page_values(env: Env, url: str) -> dict[str, Any]:
    """What a browser posts for the admin's task form untouched."""
    form = env.staff.get(url).context["adminform"].form
    values: dict[str, Any] = {"runs-TOTAL_FORMS": "0", "runs-INITIAL_FORMS": "0"}
    for name in form.fields:
        value = form[name].value()
        if value is not None and value is not False:
            values[name] = "on" if value is True else value
    return values


def form_fields(field: str, value: Any) -> dict[str, Any]:
    """The admin form's fields that say `{field: value}`."""
    if field == "retry_backoff":
        return {"backoff_base": value["base"], "backoff_cap": value["cap"]}
    if field != "schedule":
        return {field: json.dumps(value) if field in JSON_TEXT_FIELDS else value}
    out: dict[str, Any] = {"schedule_type": value["type"]}
    kind = value["type"]
    for name in TYPE_FIELDS[kind] + (() if kind == "once" else RECURRING_FIELDS):
        member = value.get(name)
        if member is None:
            continue  # as the page shows it
        if isinstance(member, bool):
            out[name] = "on" if member else ""
        elif isinstance(member, list) and name != "days":
            out[name] = json.dumps(member)
        else:
            out[name] = member
    return out


def admin_post(env: Env, url: str, values: dict[str, Any]) -> None:
    response = env.staff.post(url, values)
    if response.status_code == 200:
        raise Refused(response.context["adminform"].form.errors)
    assert response.status_code == 302, response.content.decode()[-2000:]


def admin_add(env: Env, field: str, value: Any) -> dict:
    url = reverse("admin:tasks_task_add")
    values = {**page_values(env, url), "owner": env.owner.pk, "kind": "handler"}
    values["payload"] = json.dumps(HANDLER["payload"])
    admin_post(env, url, {**values, **form_fields(field, value)})
    return shown(env, Task.objects.get().pk)


def admin_change(env: Env, field: str, value: Any) -> dict:
    task = made(env)
    url = reverse("admin:tasks_task_change", args=[task["id"]])
    admin_post(env, url, {**page_values(env, url), **form_fields(field, value)})
    return shown(env, task["id"])


PATHS: list[Callable[[Env, str, Any], dict]] = [
    json_create,
    multipart_upload,
    batch,
    patch,
    put,
    put_back,
    seed_post,
    seed_put,
    seed_put_id,
    taskset_apply,
    taskset_dry_run,
    taskset_drift,
    taskset_export,
    admin_add,
    admin_change,
]
# (path, field) pairs a path refuses by design, naming the field. A task set's entries take no
# `team`: the set's tasks are in the set's team (`?team=`). Any other refusal fails its case, as
# a dropped value does.
REFUSED: set[tuple[str, str]] = {
    ("taskset_apply", "team"),
    ("taskset_dry_run", "team"),
    ("taskset_export", "team"),
}


def test_every_body_field_is_a_case() -> None:
    covered = {case.values[0] for case in CASES}
    assert covered == set(BODY_FIELDS) - {"dedup_key", "kind", "payload"}


@pytest.mark.parametrize(("field", "value"), CASES)
@pytest.mark.parametrize("path", PATHS, ids=lambda path: path.__name__)
def test_the_value_comes_back_or_is_refused_by_name(
    env: Env, path: Callable[[Env, str, Any], dict], field: str, value: Any
) -> None:
    value = filled(value, env)
    try:
        back = path(env, field, value)
    except Refused as refused:
        assert (path.__name__, field) in REFUSED, f"{path.__name__} refuses {refused.errors}"
        assert field in json.dumps(refused.errors), refused.errors
        return
    assert field in back, f"{path.__name__} does not show {field}"
    if field == "schedule":
        members = {k: v for k, v in back["schedule"].items() if k in value}
        assert members == value
    else:
        assert back[field] == value
