"""Adding a channel in the admin: the API's validation, the user's own, the secret shown once."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from notifications.models import Channel
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
ADD = "admin:notifications_channel_add"


@pytest.fixture
def alice_client(settings):
    settings.SCHEDULER_OUTBOUND_ALLOW = ["127.0.0.1"]
    alice = UserFactory(username="alice")
    client = Client()
    client.force_login(alice)
    return alice, client


def test_a_webhook_channel_is_added_and_its_secret_shown_once(alice_client) -> None:
    alice, client = alice_client
    response = client.post(
        reverse(ADD),
        {
            "kind": "webhook",
            "name": "ops hook",
            "url": "http://127.0.0.1:9/hook",
            "all_tasks_events": ["failed"],
        },
    )

    assert response.status_code == 200, response.content.decode()[:2000]
    page = response.content.decode()
    channel = Channel.objects.get(name="ops hook")
    assert channel.owner == alice and channel.all_tasks_events == ["failed"]
    secret = channel.transport_config()["secret"]
    assert secret.startswith("whsec_") and secret in page
    assert "no-store" in response["Cache-Control"]
    again = client.get(reverse("admin:notifications_channel_change", args=[channel.pk]))
    assert again.status_code == 200 and secret not in again.content.decode()


def test_the_apis_refusals_are_shown_on_the_fields(alice_client) -> None:
    _, client = alice_client
    response = client.post(
        reverse(ADD), {"kind": "webhook", "name": "bad", "address": "a@example.com"}
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert "Not used by webhook channels." in page
    assert not Channel.objects.filter(name="bad").exists()


def test_a_url_the_outbound_guard_refuses_is_not_saved(alice_client, settings) -> None:
    _, client = alice_client
    settings.SCHEDULER_OUTBOUND_ALLOW = []

    client.post(reverse(ADD), {"kind": "webhook", "name": "inner", "url": "http://127.0.0.1:9/"})

    assert not Channel.objects.filter(name="inner").exists()


def test_the_add_page_shows_the_form(alice_client) -> None:
    _, client = alice_client
    page = client.get(reverse(ADD)).content.decode()

    assert 'id="channel_add_form"' in page and 'name="url"' in page
