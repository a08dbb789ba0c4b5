"""The zone the console shows a user's times in: UTC until they pick one, then theirs on every
page; a name that is not a zone is refused, naming the field."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import Client
from django.urls import reverse

from accounts.models import Preference
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_client():
    alice = UserFactory(username="alice")
    client = Client()
    client.force_login(alice)
    run = RunFactory(
        task=TaskFactory(owner=alice), scheduled_at=datetime(2026, 7, 1, 12, 0, tzinfo=UTC)
    )
    return client, alice, run


def test_times_are_in_utc_until_a_zone_is_chosen_then_in_it(alice_client) -> None:
    client, alice, _ = alice_client
    runs = reverse("admin:tasks_run_changelist")
    assert "2026-07-01 12:00:00 UTC" in client.get(runs).content.decode()

    response = client.post(reverse("admin-zone"), {"timezone": "Europe/Berlin", "next": runs})

    assert response.status_code == 302 and response["Location"] == runs
    assert Preference.objects.get(user=alice).timezone == "Europe/Berlin"
    assert "2026-07-01 14:00:00 CEST" in client.get(runs).content.decode()


def test_a_name_that_is_not_a_zone_is_refused_naming_the_field(alice_client) -> None:
    client, alice, _ = alice_client

    response = client.post(reverse("admin-zone"), {"timezone": "Mars/Olympus"})

    assert response.status_code == 400
    assert "timezone: &#x27;Mars/Olympus&#x27; is not a time zone" in response.content.decode()
    assert not Preference.objects.filter(user=alice).exists()


def test_next_leaving_the_site_is_ignored(alice_client) -> None:
    client, _, _ = alice_client
    response = client.post(
        reverse("admin-zone"), {"timezone": "Asia/Tokyo", "next": "https://elsewhere.example/"}
    )
    assert response.status_code == 302 and response["Location"] == reverse("admin-zone")
