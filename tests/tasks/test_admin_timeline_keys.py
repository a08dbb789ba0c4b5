"""The timeline of one concurrency or rate key: the runs of every task using it that the user may
see, no other run; a key the user may not see is a 404; the key's admin page links to it."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.urls import reverse

from tasks.models import ConcurrencyKey, RateKey
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db

BASE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TIMELINE = reverse("admin:tasks_run_timeline")
RANGE = {"since": "2026-03-01T12:00:00Z", "until": "2026-03-01T14:00:00Z"}


def ran(task, start: datetime, minutes: int, **fields):
    return RunFactory(
        task=task,
        scheduled_at=start,
        status="succeeded",
        attempt=1,
        started_at=start,
        finished_at=start + timedelta(minutes=minutes),
        **fields,
    )


def drawn(html: str) -> set[str]:
    return set(re.findall(r'data-run="([0-9a-f-]+)"', html))


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_keys_timeline_draws_the_runs_of_each_task_using_it_and_no_other() -> None:
    alice = UserFactory(username="alice")
    key = ConcurrencyKey.objects.create(owner=alice, name="warehouse-db", max_running=1)
    other = ConcurrencyKey.objects.create(owner=alice, name="mailer", max_running=1)
    export, report = TaskFactory(owner=alice, name="export"), TaskFactory(owner=alice, name="rep")
    first = ran(export, BASE + timedelta(minutes=5), 20, concurrency_key_id=key.pk)
    second = ran(report, BASE + timedelta(minutes=15), 20, concurrency_key_id=key.pk)
    ran(export, BASE + timedelta(minutes=50), 5, concurrency_key_id=other.pk)
    ran(TaskFactory(owner=alice), BASE + timedelta(minutes=5), 5)  # no key

    response = signed_in(alice).get(TIMELINE, {"key": str(key.pk), **RANGE})

    assert response.status_code == 200
    html = response.content.decode()
    assert drawn(html) == {str(first.pk), str(second.pk)}
    assert "warehouse-db" in html
    assert html.count('class="band-label"') == 2  # one band per task using the key
    # The presets keep the key.
    assert f"?key={key.pk}&amp;hours=24" in html


def test_a_rate_keys_timeline_draws_its_runs() -> None:
    alice = UserFactory(username="alice")
    key = RateKey.objects.create(owner=alice, name="crm-api", rate_limit=5, per_seconds=60)
    task = TaskFactory(owner=alice)
    limited = ran(task, BASE + timedelta(minutes=5), 5, rate_key_id=key.pk)
    ran(task, BASE + timedelta(minutes=30), 5)

    response = signed_in(alice).get(TIMELINE, {"rate_key": str(key.pk), **RANGE})

    assert response.status_code == 200
    assert drawn(response.content.decode()) == {str(limited.pk)}


def test_another_users_key_is_a_404_and_a_global_key_shows_only_ones_own_runs() -> None:
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    bobs = ConcurrencyKey.objects.create(owner=bob, name="bobs-db", max_running=1)
    shared = ConcurrencyKey.objects.create(owner=None, name="shared", max_running=3)
    mine = ran(
        TaskFactory(owner=alice), BASE + timedelta(minutes=5), 5, concurrency_key_id=shared.pk
    )
    ran(TaskFactory(owner=bob), BASE + timedelta(minutes=5), 5, concurrency_key_id=shared.pk)

    assert signed_in(alice).get(TIMELINE, {"key": str(bobs.pk)}).status_code == 404
    response = signed_in(alice).get(TIMELINE, {"key": str(shared.pk), **RANGE})
    assert response.status_code == 200
    assert drawn(response.content.decode()) == {str(mine.pk)}


def test_a_key_that_is_not_an_id_is_refused_naming_the_field() -> None:
    response = signed_in(UserFactory()).get(TIMELINE, {"key": "db"})

    assert response.status_code == 400
    assert "key: not a key id" in response.content.decode()


def test_a_keys_admin_page_and_list_link_its_timeline() -> None:
    staff = signed_in(UserFactory(is_staff=True, is_superuser=True))
    key = ConcurrencyKey.objects.create(owner=UserFactory(), name="warehouse-db", max_running=2)
    rate = RateKey.objects.create(owner=None, name="crm-api", rate_limit=5, per_seconds=60)

    page = staff.get(reverse("admin:tasks_concurrencykey_change", args=[key.pk]))
    listed = staff.get(reverse("admin:tasks_ratekey_changelist"))

    assert f'href="{TIMELINE}?key={key.pk}"' in page.content.decode()
    assert f'href="{TIMELINE}?rate_key={rate.pk}"' in listed.content.decode()
