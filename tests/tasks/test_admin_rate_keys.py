"""The rate limits' admin: each key's window in use and its waiting runs; a limit changed there
is declared and recomputes when the window frees, as the API's PATCH does."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tasks.models import RateKey
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff() -> Client:
    client = Client()
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


def test_a_full_window_is_shown_and_a_raised_limit_frees_it(staff: Client) -> None:
    now = timezone.now()
    owner = UserFactory()
    key = RateKey.objects.create(
        owner=owner,
        name="crm-api",
        rate_limit=1,
        per_seconds=60,
        starts=[now - timedelta(seconds=5)],
        held_until=now + timedelta(seconds=55),
    )
    task = TaskFactory(owner=owner)
    RunFactory(task=task, rate_key_id=key.pk, scheduled_at=now - timedelta(seconds=1))

    page = staff.get(reverse("admin:tasks_ratekey_changelist")).content.decode()
    row = re.search(r"crm-api.*?</tr>", page, re.S).group(0)
    shown = dict(re.findall(r'<td class="field-(\w+)[^"]*">(.*?)</td>', row, re.S))
    assert (shown["rate_limit"], shown["used"], shown["waiting"]) == ("1", "1", "1")
    assert shown["next_start_at"] != "-"

    url = reverse("admin:tasks_ratekey_change", args=[key.pk])
    response = staff.post(url, {"rate_limit": "5", "per_seconds": "60"})

    assert response.status_code == 302, response.content.decode()[:2000]
    key.refresh_from_db()
    assert (key.rate_limit, key.declared, key.name) == (5, True, "crm-api")
    assert key.held_until is None, "one start of five: the window is not full any more"
