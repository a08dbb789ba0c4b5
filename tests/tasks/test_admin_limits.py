"""The limit keys' admin, both kinds on one admin: each key's counts as the API shows them; a
limit changed there is declared and goes through the API's service (a rate key's window is then
recomputed)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tasks.models import ConcurrencyKey, RateKey
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff() -> Client:
    client = Client()
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


def listed(staff: Client, model: str, name: str) -> dict[str, str]:
    """The changelist's cells of the key named `name`, by column."""
    page = staff.get(reverse(f"admin:tasks_{model}_changelist")).content.decode()
    row = re.search(rf"{name}.*?</tr>", page, re.S).group(0)
    return dict(re.findall(r'<td class="field-(\w+)[^"]*">(.*?)</td>', row, re.S))


def test_a_concurrency_key_shows_what_runs_and_a_limit_set_there_is_declared(staff) -> None:
    now = timezone.now()
    owner = UserFactory()
    key = ConcurrencyKey.objects.create(owner=owner, name="warehouse-db", max_running=2)
    task = TaskFactory(owner=owner, concurrency_key=key)
    running = {"status": "running", "worker": "w", "heartbeat_at": now, "started_at": now}
    RunFactory(task=task, **running, **task.requests)
    due = now - timedelta(seconds=1)
    RunFactory(task=task, execute_at=due, scheduled_at=due, **task.requests)
    shown = listed(staff, "concurrencykey", "warehouse-db")
    assert (shown["max_running"], shown["running"], shown["waiting"]) == ("2", "1", "1")

    url = reverse("admin:tasks_concurrencykey_change", args=[key.pk])
    response = staff.post(url, {"max_running": "1"})
    assert response.status_code == 302, response.content.decode()[:2000]
    key.refresh_from_db()
    assert (key.max_running, key.declared, key.name) == (1, True, "warehouse-db")


def test_a_rate_keys_full_window_is_shown_and_a_raised_limit_frees_it(staff) -> None:
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
    shown = listed(staff, "ratekey", "crm-api")
    assert (shown["rate_limit"], shown["used"], shown["waiting"]) == ("1", "1", "1")
    assert shown["next_start_at"] != "-"

    url = reverse("admin:tasks_ratekey_change", args=[key.pk])
    response = staff.post(url, {"rate_limit": "5", "per_seconds": "60"})

    assert response.status_code == 302, response.content.decode()[:2000]
    key.refresh_from_db()
    assert (key.rate_limit, key.declared, key.name) == (5, True, "crm-api")
    assert key.held_until is None, "one start of five: the window is not full any more"


@pytest.mark.parametrize(
    ("model", "form", "limits"),
    [
        ("concurrencykey", {"max_running": "3"}, {"max_running": 3}),
        ("ratekey", {"rate_limit": "3", "per_seconds": "10"}, {"rate_limit": 3, "per_seconds": 10}),
    ],
)
def test_a_key_added_in_the_admin_is_declared(staff, model: str, form: dict, limits: dict) -> None:
    owner = UserFactory()
    url = reverse(f"admin:tasks_{model}_add")
    response = staff.post(url, {"owner": owner.pk, "name": "crm", **form})
    assert response.status_code == 302, response.content.decode()[:2000]
    cls = ConcurrencyKey if model == "concurrencykey" else RateKey
    key = cls.objects.get(name="crm")
    assert (key.owner_id, key.declared) == (owner.pk, True)
    assert {column: getattr(key, column) for column in limits} == limits
