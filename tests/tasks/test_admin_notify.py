"""The task form's channel picker: the owner's channels by name become `notify` entries."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from notifications.models import Channel
from tasks.models import Task
from tests.factories import UserFactory
from tests.tasks.test_admin_forms import form

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice():
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    mine = Channel.objects.create(owner=alice, kind="webhook", name="ops hook")
    theirs = Channel.objects.create(owner=bob, kind="webhook", name="bob hook")
    client = Client()
    client.force_login(alice)
    return client, mine, theirs


def test_the_form_offers_the_owners_channels_by_name(alice) -> None:
    client, mine, theirs = alice
    page = client.get(reverse("admin:tasks_task_add")).content.decode()

    assert "ops hook (webhook)" in page and f'value="{mine.pk}"' in page
    assert "bob hook" not in page and str(theirs.pk) not in page


def test_picked_channels_become_notify_entries(alice) -> None:
    client, mine, _ = alice
    body = form(name="picked", notify_channels=mine.pk)
    body["notify_events"] = ["failed", "succeeded"]

    response = client.post(reverse("admin:tasks_task_add"), body)

    assert response.status_code == 302, response.content.decode()[:3000]
    task = Task.objects.get(name="picked")
    assert task.notify == [{"channel": str(mine.pk), "events": ["failed", "succeeded"]}]


def test_another_users_channel_cannot_be_picked(alice) -> None:
    client, _, theirs = alice

    response = client.post(
        reverse("admin:tasks_task_add"), form(name="x", notify_channels=theirs.pk)
    )

    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not Task.objects.filter(name="x").exists()
