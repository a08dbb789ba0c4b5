"""The task form's live preview: next fire times of the schedule being typed, or its errors."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
URL = "admin:tasks_task_preview_schedule"


@pytest.fixture
def client_of_a_user() -> Client:
    client = Client()
    client.force_login(UserFactory())
    return client


def test_a_cron_schedule_shows_its_next_five_times(client_of_a_user) -> None:
    response = client_of_a_user.post(
        reverse(URL),
        {"schedule_type": "cron", "expression": "0 9 * * 1", "timezone": "Europe/Berlin"},
    )

    assert response.status_code == 200
    times = response.json()["next_runs"]
    assert len(times) == 5
    assert all(" 09:00:00 Europe/Berlin)" in time for time in times), times


def test_a_bad_expression_is_named(client_of_a_user) -> None:
    response = client_of_a_user.post(
        reverse(URL), {"schedule_type": "cron", "expression": "61 * * * *", "timezone": "UTC"}
    )

    assert response.status_code == 400
    assert any(line.startswith("expression: ") for line in response.json()["errors"])


def test_only_a_post_of_a_signed_in_user(client_of_a_user) -> None:
    assert client_of_a_user.get(reverse(URL)).status_code == 405
    anonymous = Client().post(reverse(URL), {"schedule_type": "interval", "every": "60"})
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
