"""GET /api/v1/audit: every change through the API is recorded with who, from where, with what
user agent and what changed; a user reads the entries of their own objects and their teams',
operators all."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Membership, Team
from tasks.audit_log import AuditEntry
from tasks.models import Run, Task
from tests.conftest import client_for
from tests.factories import RunFactory, UserFactory

pytestmark = pytest.mark.django_db

FROM = {"REMOTE_ADDR": "10.20.30.40", "HTTP_USER_AGENT": "audit-test/1.0"}
HANDLER = {"kind": "handler", "payload": {"name": "noop"}}
DAILY = {"type": "cron", "expression": "0 3 * * *"}


@pytest.fixture(autouse=True)
def _outbound(settings) -> None:
    settings.SCHEDULER_OUTBOUND_ALLOW = ["127.0.0.1"]


def log(api: APIClient, **params: str) -> list[dict]:
    response = api.get("/api/v1/audit", params)
    assert response.status_code == 200, response.content
    return response.json()["results"]


def create(api: APIClient, **body: object) -> dict:
    response = api.post(
        "/api/v1/tasks", {**HANDLER, "schedule": DAILY, **body}, format="json", **FROM
    )
    assert response.status_code == 201, response.content
    return response.json()


def test_an_update_is_recorded_with_actor_address_user_agent_and_diff(api, user) -> None:
    task = create(api, name="report", priority=3)

    response = api.patch(
        f"/api/v1/tasks/{task['id']}", {"priority": 7, "name": "report-v2"}, format="json", **FROM
    )
    assert response.status_code == 200, response.content

    update, created = log(api, object_id=task["id"])
    assert (update["action"], created["action"]) == ("update", "create")
    assert update["actor"] == {
        "id": user.pk,
        "username": user.username,
        "service_account": None,
        "token_id": None,
    }
    assert (update["client_address"], update["user_agent"]) == ("10.20.30.40", "audit-test/1.0")
    assert update["object"] == {"type": "task", "id": task["id"], "name": "report-v2"}
    assert update["changes"] == {"priority": [3, 7], "name": ["report", "report-v2"]}


def test_a_schedule_change_records_the_schedules_before_and_after(api) -> None:
    task = create(api)
    every_hour = {"type": "cron", "expression": "0 * * * *"}
    assert (
        api.patch(
            f"/api/v1/tasks/{task['id']}", {"schedule": every_hour}, format="json"
        ).status_code
        == 200
    )

    [update] = log(api, object_id=task["id"], action="update")
    before, after = update["changes"]["schedule"]
    assert (before["expression"], after["expression"]) == ("0 3 * * *", "0 * * * *")


def test_every_run_action_is_recorded(api, user) -> None:
    task = create(api)
    url = f"/api/v1/tasks/{task['id']}"
    for action in ("pause", "resume", "skip-next", "run-now"):
        assert api.post(f"{url}/{action}", **FROM).status_code in (200, 201), action
    run = Run.objects.filter(task_id=task["id"], status="scheduled").order_by("scheduled_at")[0]
    assert api.post(f"/api/v1/runs/{run.pk}/cancel", **FROM).status_code == 200
    assert api.post(f"/api/v1/runs/{run.pk}/retry", **FROM).status_code == 200
    now = timezone.now().replace(microsecond=0)
    backfill = {"start": (now - timezone.timedelta(days=3)).isoformat(), "end": now.isoformat()}
    assert api.post(f"{url}/backfill", backfill, format="json").status_code in (200, 201)
    assert api.delete(url, **FROM).status_code == 204

    on_task = [e["action"] for e in log(api, object_type="task", object_id=task["id"])]
    assert on_task == ["cancel", "backfill", "run_now", "skip_next", "resume", "pause", "create"]
    on_run = log(api, object_type="run", object_id=str(run.pk))
    assert [e["action"] for e in on_run] == ["retry", "cancel_run"]
    assert on_run[0]["changes"] == {"task": task["id"], "status": ["cancelled", "scheduled"]}
    assert on_run[1]["changes"]["status"] == ["scheduled", "cancelled"]
    assert {e["actor"]["username"] for e in on_run} == {user.username}


def test_calendars_channels_and_keys_are_recorded(api) -> None:
    calendar = api.post("/api/v1/calendars", {"name": "holidays"}, format="json").json()
    changed = api.patch(
        f"/api/v1/calendars/{calendar['id']}", {"dates": ["2031-01-01"]}, format="json"
    )
    assert changed.status_code == 200, changed.content
    assert api.delete(f"/api/v1/calendars/{calendar['id']}").status_code == 204
    channel = api.post(
        "/api/v1/channels",
        {"kind": "webhook", "url": "http://127.0.0.1:8080/hook", "secret": "s3cret-value-1"},
        format="json",
    ).json()
    assert (
        api.patch(
            f"/api/v1/channels/{channel['id']}",
            {"name": "ops", "secret": "s3cret-value-2"},
            format="json",
        ).status_code
        == 200
    )
    assert api.delete(f"/api/v1/channels/{channel['id']}").status_code == 204
    key = api.post("/api/v1/concurrency-keys", {"key": "db", "limit": 2}, format="json").json()
    assert (
        api.patch(f"/api/v1/concurrency-keys/{key['id']}", {"limit": 5}, format="json").status_code
        == 200
    )

    entries = [(e["object"]["type"], e["action"], e["changes"]) for e in log(api)]
    assert entries == [
        ("concurrency_key", "update", {"limit": [2, 5]}),
        ("concurrency_key", "create", {}),
        ("channel", "delete", {}),
        ("channel", "update", {"name": ["", "ops"], "secret_changed": [None, True]}),
        ("channel", "create", {}),
        ("calendar", "delete", {}),
        ("calendar", "update", {"dates": [[], ["2031-01-01"]]}),
        ("calendar", "create", {}),
    ]
    assert "s3cret" not in str(list(AuditEntry.objects.values_list("changes", flat=True)))


def test_a_task_set_apply_is_recorded_with_what_it_changed(api, user) -> None:
    tasks = [{"key": k, **HANDLER, "schedule": DAILY} for k in ("report", "backup")]
    response = api.put("/api/v1/tasksets/nightly", {"tasks": tasks}, format="json", **FROM)
    assert response.status_code == 200, response.content

    [applied] = log(api, action="taskset_apply")
    assert applied["object"]["name"] == "nightly"
    assert applied["changes"] == {"version": 1, "created": 2, "updated": 0, "cancelled": 0}
    assert applied["user_agent"] == "audit-test/1.0"
    created = log(api, action="create", object_type="task")
    assert sorted(e["object"]["name"] for e in created) == ["backup", "report"]


def test_a_rolled_back_apply_leaves_no_entry(api) -> None:
    first = [{"key": "report", **HANDLER, "schedule": DAILY}]
    assert api.put("/api/v1/tasksets/nightly", {"tasks": first}, format="json").status_code == 200
    now = timezone.now()
    RunFactory(
        task=Task.objects.get(taskset_key="report"),
        status="running",
        attempt=1,
        worker="w-1",
        started_at=now,
        heartbeat_at=now,
    )
    recorded = AuditEntry.objects.count()

    # A new task and the removal of one whose run is running: the removal is refused (409),
    # so the create made before it in the same transaction is rolled back, and its entry too.
    second = [{"key": "backup", **HANDLER, "schedule": DAILY}]
    response = api.put("/api/v1/tasksets/nightly", {"tasks": second}, format="json")

    assert response.status_code == 409, response.content
    assert not Task.objects.filter(taskset_key="backup").exists()
    assert AuditEntry.objects.count() == recorded


def test_the_seed_routes_the_batch_and_a_feed_rotation_are_recorded(api, user) -> None:
    seeded = api.post("/task", {**HANDLER, "schedule": "*/5 * * * *"}, format="json", **FROM)
    assert seeded.status_code == 201, seeded.content
    batch = {"tasks": [{**HANDLER, "name": "a"}, {**HANDLER, "name": "b"}]}
    assert api.post("/api/v1/tasks/batch", batch, format="json").status_code == 201
    assert api.post("/api/v1/calendar-feed/rotate").status_code == 200

    rotated, *created = log(api)
    assert (rotated["action"], rotated["object"]["type"]) == ("rotate", "calendar_feed")
    assert rotated["changes"] == {}  # the token is never in the log
    assert [(e["action"], e["object"]["name"]) for e in created][:2] == [
        ("create", "b"),
        ("create", "a"),
    ]
    assert created[2]["user_agent"] == "audit-test/1.0" and created[2]["action"] == "create"


def test_the_operators_command_line_names_itself(api) -> None:
    task = create(api)
    call_command("ops", "pausetask", task["id"], stdout=io.StringIO())

    [paused] = log(api, action="pause")
    assert paused["actor"]["id"] is None
    assert paused["actor"]["username"].startswith("manage.py ops (")
    assert (paused["client_address"], paused["user_agent"]) == (None, "")


def test_a_user_reads_their_own_objects_entries_and_an_operator_all(api, other_api) -> None:
    mine, theirs = create(api), create(other_api)
    operator = client_for(UserFactory(is_staff=True))

    assert [e["object"]["id"] for e in log(api)] == [mine["id"]]
    assert [e["object"]["id"] for e in log(other_api)] == [theirs["id"]]
    assert log(api, object_id=theirs["id"]) == []
    assert {e["object"]["id"] for e in log(operator)} == {mine["id"], theirs["id"]}


def test_filters_by_actor_action_and_time_and_refuses_a_bad_one(api, user) -> None:
    task = create(api)
    api.post(f"/api/v1/tasks/{task['id']}/pause")
    [entry] = log(api, action="pause")
    assert log(api, actor=user.username, action="create")[0]["object"]["id"] == task["id"]
    assert log(api, actor="nobody") == []
    assert len(log(api, action=["pause", "create"])) == 2
    assert log(api, after=entry["at"], action="pause") == [entry]
    assert log(api, before=entry["at"], action="pause") == []

    bad = api.get("/api/v1/audit", {"action": "explode"})
    assert bad.status_code == 400 and "action" in bad.json()
    bad = api.get("/api/v1/audit", {"after": "yesterday"})
    assert bad.status_code == 400 and "after" in bad.json()
    paged = api.get("/api/v1/audit", {"page_size": 1}).json()
    assert (paged["count"], len(paged["results"])) == (2, 1)


def test_the_log_needs_a_sign_in(anon) -> None:
    assert anon.get("/api/v1/audit").status_code == 401


def test_a_teams_members_read_its_entries_and_no_other_teams(api, user) -> None:
    data, web = Team.objects.create(slug="data"), Team.objects.create(slug="web")
    viewer, outsider = UserFactory(), UserFactory()
    Membership.objects.create(team=data, user=user, role="editor")
    Membership.objects.create(team=data, user=viewer, role="viewer")
    Membership.objects.create(team=web, user=outsider, role="admin")
    shared, mine = create(api, team="data"), create(api)
    run = RunFactory(task=Task.objects.get(pk=shared["id"]), status=Run.Status.SCHEDULED)
    assert api.post(f"/api/v1/runs/{run.pk}/cancel").status_code == 200
    theirs = create(client_for(outsider), team="web")
    viewing = client_for(viewer)

    seen = {(e["object"]["type"], e["object"]["id"], e["team"]) for e in log(viewing)}
    assert seen == {("task", shared["id"], "data"), ("run", str(run.pk), "data")}
    assert log(viewing, team="web") == []
    assert log(viewing, object_id=theirs["id"]) == []
    assert [(e["object"]["id"], e["team"]) for e in log(client_for(outsider))] == [
        (theirs["id"], "web")
    ]
    assert {e["object"]["id"] for e in log(api, team="data")} == {shared["id"], str(run.pk)}
    assert {e["object"]["id"] for e in log(api)} == {shared["id"], str(run.pk), mine["id"]}

    # A member who leaves the team no longer reads its log, from their next request.
    Membership.objects.filter(team=data, user=viewer).delete()
    assert log(viewing) == []


def test_every_write_path_records_the_objects_team(api, user) -> None:
    Membership.objects.create(team=Team.objects.create(slug="data"), user=user, role="editor")
    task = create(api, team="data")
    url = f"/api/v1/tasks/{task['id']}"
    assert api.patch(url, {"priority": 7}, format="json").status_code == 200
    for action in ("pause", "resume", "run-now"):
        assert api.post(f"{url}/{action}").status_code in (200, 201), action
    run = Run.objects.filter(task_id=task["id"], status="scheduled").order_by("scheduled_at")[0]
    assert api.post(f"/api/v1/runs/{run.pk}/cancel").status_code == 200
    assert api.post(f"/api/v1/runs/{run.pk}/retry").status_code == 200
    made = [
        api.post("/api/v1/calendars", {"name": "holidays", "team": "data"}, format="json"),
        api.post(
            "/api/v1/channels",
            {"kind": "webhook", "url": "http://127.0.0.1:8080/hook", "team": "data"},
            format="json",
        ),
        api.post(
            "/api/v1/concurrency-keys", {"key": "db", "limit": 2, "team": "data"}, format="json"
        ),
        api.put(
            "/api/v1/tasksets/nightly?team=data",
            {"tasks": [{"key": "report", **HANDLER, "schedule": DAILY}]},
            format="json",
        ),
    ]
    assert [response.status_code for response in made] == [201, 201, 201, 200], [
        response.content[:200] for response in made
    ]
    assert api.delete(url).status_code == 204

    entries = [(e["object"]["type"], e["action"], e["team"]) for e in log(api)]
    assert {team for _, _, team in entries} == {"data"}, entries
    assert {(kind, action) for kind, action, _ in entries} >= {
        ("task", "create"),
        ("task", "update"),
        ("task", "pause"),
        ("task", "resume"),
        ("task", "run_now"),
        ("run", "cancel_run"),
        ("run", "retry"),
        ("calendar", "create"),
        ("channel", "create"),
        ("concurrency_key", "create"),
        ("taskset", "taskset_apply"),
        ("task", "cancel"),
    }
    assert AuditEntry.objects.filter(team__isnull=True).count() == 0


def test_a_members_log_pages_their_own_and_their_teams_entries_as_one_list(api, user) -> None:
    data, web, ops = (Team.objects.create(slug=slug) for slug in ("data", "web", "ops"))
    Membership.objects.create(team=data, user=user, role="viewer")
    Membership.objects.create(team=web, user=user, role="editor")
    made = []
    for i in range(23):
        # Interleaved: mine, data's, web's, another team's, someone else's.
        team = [None, data, web, ops, None][i % 5]
        owner = user if i % 5 == 0 else None
        made.append(
            AuditEntry.objects.create(
                action="pause", object_type="task", object_id=str(i), owner=owner, team=team
            )
        )
    mine = [str(e.object_id) for e in reversed(made) if int(e.object_id) % 5 in (0, 1, 2)]

    ids, page = [], 1
    while True:
        body = api.get("/api/v1/audit", {"page_size": 4, "page": page}).json()
        ids += [e["object"]["id"] for e in body["results"]]
        if not body["next"]:
            break
        page += 1
    assert (ids, body["count"]) == (mine, len(mine))
    oldest = [e["object"]["id"] for e in log(api, ordering="id", page_size="100")]
    assert oldest == list(reversed(mine))
    assert api.get("/api/v1/audit", {"page_size": 4, "page": 9}).status_code == 404
