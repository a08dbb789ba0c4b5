"""The delivery log (GET /api/v1/notifications), task `notify` validation, and the admin."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from notifications.models import Notification
from tasks.audit_log import AuditEntry
from tasks.models import Task
from tests.factories import UserFactory
from tests.notifications.conftest import ChannelFactory, due_run, finish, subscribed_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def log(user) -> dict:
    """Three notifications of `user` over two channels and two tasks, one of them sent."""
    hook, mail = ChannelFactory(owner=user), ChannelFactory(owner=user, kind="email")
    first = subscribed_task(hook, ["succeeded"])
    first.notify.append({"channel": str(mail.id), "events": ["succeeded"]})
    first.save()
    second = subscribed_task(hook, ["retries_exhausted"])
    finish(due_run(first), "succeeded")
    finish(due_run(second), "failed")
    Notification.objects.filter(channel=mail).update(status="sent", sent_at="2030-01-01T00:00Z")
    ChannelFactory(owner=UserFactory(), all_tasks_events=["succeeded"])  # another user's
    return {"hook": hook, "mail": mail, "first": first, "second": second}


def ids(response) -> set[str]:
    assert response.status_code == 200, response.content
    return {n["id"] for n in response.json()["results"]}


def test_list_and_filters(api: APIClient, log: dict) -> None:
    everything = api.get("/api/v1/notifications")
    assert everything.json()["count"] == 3
    row = everything.json()["results"][0]
    assert set(row) >= {
        "id",
        "channel",
        "event",
        "run",
        "task",
        "status",
        "attempts",
        "last_error",
        "created_at",
        "sent_at",
    }
    by = {
        "status=sent": Notification.objects.filter(status="sent"),
        "status=pending": Notification.objects.filter(status="pending"),
        f"task={log['second'].id}": Notification.objects.filter(task=log["second"]),
        f"channel={log['hook'].id}": Notification.objects.filter(channel=log["hook"]),
        "event=retries_exhausted": Notification.objects.filter(event="retries_exhausted"),
    }
    for query, expected in by.items():
        assert ids(api.get(f"/api/v1/notifications?{query}")) == {str(n.id) for n in expected}
    assert api.get("/api/v1/notifications?status=bogus").status_code == 400
    paged = api.get("/api/v1/notifications?page_size=2").json()
    assert len(paged["results"]) == 2 and paged["next"]


def test_detail_and_isolation(api: APIClient, other_api: APIClient, log: dict) -> None:
    notification = Notification.objects.filter(task=log["second"]).get()
    response = api.get(f"/api/v1/notifications/{notification.id}")
    assert response.status_code == 200
    assert response.json()["event"] == "retries_exhausted"
    assert response.json()["run"] == str(notification.run_id)
    assert other_api.get(f"/api/v1/notifications/{notification.id}").status_code == 404
    assert other_api.get("/api/v1/notifications").json()["count"] == 0


def test_task_notify_must_name_own_channels(api: APIClient, user) -> None:
    mine = ChannelFactory(owner=user)
    theirs = ChannelFactory(owner=UserFactory())
    task = Task.objects.create(owner=user, kind="handler", payload={"name": "noop"}, schedule={})
    url = f"/api/v1/tasks/{task.id}"
    notify = [
        {"channel": str(mine.id).upper(), "events": ["succeeded", "succeeded"]},
        {"channel": str(theirs.id), "events": ["failed"]},
        {"channel": "nope", "events": ["failed"]},
    ]

    refused = api.patch(url, {"notify": notify}, format="json")

    assert refused.status_code == 400
    # Keyed by the entries' indexes, as every nested list error of the API is.
    assert refused.json()["notify"] == {
        str(i): {"channel": ["No channel with this id among yours."]} for i in (1, 2)
    }
    accepted = api.patch(url, {"notify": notify[:1]}, format="json")
    assert accepted.status_code == 200, accepted.content
    assert accepted.json()["notify"] == [{"channel": str(mine.id), "events": ["succeeded"]}]


def test_notify_validation_uses_the_request_user_when_given(user) -> None:
    from rest_framework.test import APIRequestFactory

    from tasks.api.serializers import TaskInputSerializer
    from tasks.db import db_now

    request = APIRequestFactory().post("/api/v1/tasks")
    request.user = user
    theirs = ChannelFactory(owner=UserFactory())
    body = {
        "kind": "handler",
        "payload": {"name": "noop"},
        "notify": [{"channel": str(theirs.id), "events": ["succeeded"]}],
    }
    serializer = TaskInputSerializer(data=body, context={"now": db_now(), "request": request})
    assert not serializer.is_valid()
    assert "channel" in serializer.errors["notify"]["0"]


@pytest.fixture
def admin_client(db) -> Client:
    staff = UserFactory(is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(staff)
    return client


def test_admin_never_shows_secrets_and_resends(admin_client: Client, log: dict) -> None:
    secret = "whsec-admin-must-not-see"
    channel = ChannelFactory(owner=log["hook"].owner, secrets={"secret": secret})
    page = admin_client.get(f"/admin/notifications/channel/{channel.id}/change/")
    assert page.status_code == 200
    assert secret not in page.content.decode()
    assert channel.secret_config not in page.content.decode()
    listing = admin_client.get("/admin/notifications/notification/")
    assert listing.status_code == 200

    sent = Notification.objects.filter(status="sent").get()
    response = admin_client.post(
        "/admin/notifications/notification/",
        {"action": "resend", "_selected_action": [str(sent.id)]},
    )
    assert response.status_code == 302
    sent.refresh_from_db()
    assert sent.status == "pending" and sent.retry_until > sent.next_attempt_at
    [resent] = AuditEntry.objects.filter(action="bulk_resend")
    assert resent.changes == {"filter": {"selected": [str(sent.id)]}, "count": 1, "refused": 0}
