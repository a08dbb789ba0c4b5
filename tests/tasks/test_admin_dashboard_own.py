"""A non-operator's dashboard (tasks/admin/dashboard_runs.py): counts and bars of their own runs
only, and every bar's link lists exactly the runs it counts."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse

from accounts.models import Membership, Team
from tasks.db import db_now
from tasks.models import ConcurrencyKey, RateKey
from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def finished(task, *, status: str, minutes_ago: int, late: int = 0, backfill: bool = False):
    now = db_now()
    started = now - timedelta(minutes=minutes_ago)
    return RunFactory(
        task=task,
        status=status,
        scheduled_at=started - timedelta(seconds=late),
        started_at=started,
        finished_at=started + timedelta(seconds=5),
        backfill=backfill,
    )


def bars(page: str, title: str) -> list[tuple[str, str]]:
    """(link, tooltip) of each bar in the chart titled `title`."""
    figure = page.split(f"<strong>{title}</strong>", 1)[1].split("</figure>", 1)[0]
    found = re.findall(r'<a href="([^"]+)" class="bar">.*?<title>([^<]+)</title>', figure)
    return [(unescape(link), unescape(tip)) for link, tip in found]


def listed_ids(client: Client, link: str) -> set[str]:
    response = client.get(link)
    assert response.status_code == 200
    return {str(run.pk) for run in response.context["cl"].result_list}


def test_a_users_dashboard_counts_only_their_runs_and_each_bar_lists_them() -> None:
    alice, bob = UserFactory(), UserFactory()
    mine, theirs = TaskFactory(owner=alice), TaskFactory(owner=bob)
    failed = [finished(mine, status="failed", minutes_ago=3) for _ in range(2)]
    ok = finished(mine, status="succeeded", minutes_ago=3)
    for _ in range(5):  # bob's, in the same minute: counted on no bar of alice's
        finished(theirs, status="failed", minutes_ago=3)
    client = signed_in(alice)

    response = client.get(reverse("admin-dashboard"))

    assert response.status_code == 200
    states = {label: count for label, count, _ in response.context["states"]}
    assert states["Failed (in range)"] == 2 and states["Succeeded (in range)"] == 1
    page = response.content.decode()
    (failures,) = bars(page, "Failures")
    assert "(2 runs)" in failures[1]
    assert listed_ids(client, failures[0]) == {str(r.pk) for r in failed}
    (finishes,) = bars(page, "Finishes")
    assert listed_ids(client, finishes[0]) == {str(r.pk) for r in [*failed, ok]}
    # The state counts link to the same runs.
    link = next(link for label, _, link in response.context["states"] if label.startswith("Failed"))
    assert listed_ids(client, link) == {str(r.pk) for r in failed}


def test_backfilled_runs_are_kept_out_of_lateness() -> None:
    alice = UserFactory()
    task = TaskFactory(owner=alice)
    late = finished(task, status="succeeded", minutes_ago=2, late=30)
    finished(task, status="succeeded", minutes_ago=2, late=86400, backfill=True)
    client = signed_in(alice)

    page = client.get(reverse("admin-dashboard")).content.decode()

    (bar,) = bars(page, "Start lateness (max, backfills left out)")
    assert ": 30 s (1 runs)" in bar[1]
    assert listed_ids(client, bar[0]) == {str(late.pk)}
    (starts,) = bars(page, "Starts")
    assert "(2 runs)" in starts[1]


@pytest.mark.parametrize("range_name", ["1h", "24h", "7d"])
def test_each_range_draws_its_buckets(range_name: str) -> None:
    alice = UserFactory()
    finished(TaskFactory(owner=alice), status="failed", minutes_ago=50)
    client = signed_in(alice)

    page = client.get(reverse("admin-dashboard"), {"range": range_name}).content.decode()

    assert f"<strong>{range_name}</strong>" in page
    assert len(bars(page, "Failures")) == 1


def test_an_unknown_range_is_a_400_naming_the_field() -> None:
    response = signed_in(UserFactory()).get(reverse("admin-dashboard"), {"range": "2y"})
    assert response.status_code == 400 and b"range" in response.content


def test_the_key_panel_lists_the_users_keys_and_the_global_ones_with_their_counts() -> None:
    alice, bob = UserFactory(), UserFactory()
    mine = ConcurrencyKey.objects.create(owner=alice, name="warehouse-db", max_running=2)
    ConcurrencyKey.objects.create(owner=bob, name="bobs-db", max_running=9)
    RateKey.objects.create(owner=None, name="vendor-api", rate_limit=10, per_seconds=60)
    task = TaskFactory(owner=alice)
    now = db_now()
    RunFactory(
        task=task,
        concurrency_key_id=mine.pk,
        status="running",
        worker="w:1",
        started_at=now,
        heartbeat_at=now,
        scheduled_at=now - timedelta(minutes=1),
    )
    for minutes in (2, 3):
        RunFactory(
            task=task,
            concurrency_key_id=mine.pk,
            status="scheduled",
            scheduled_at=now - timedelta(minutes=minutes),
        )

    keys = signed_in(alice).get(reverse("admin-dashboard")).context["keys"]

    shown = {(k.kind, k.name): (k.using, k.waiting, k.limit) for k in keys}
    assert shown == {
        ("concurrency", "warehouse-db"): (1, 2, "2 running"),
        ("rate", "vendor-api (global)"): (0, 0, "10 per 60 s"),
    }


def test_a_team_members_dashboard_counts_the_teams_runs_not_her_task_in_a_team_she_left() -> None:
    alice, bob = UserFactory(), UserFactory()
    data, gone = Team.objects.create(slug="data"), Team.objects.create(slug="gone")
    Membership.objects.create(team=data, user=alice, role="viewer")
    teams_task = TaskFactory(owner=bob, team=data)
    teams = [finished(teams_task, status="failed", minutes_ago=3) for _ in range(2)]
    finished(TaskFactory(owner=alice, team=gone), status="failed", minutes_ago=3)  # hidden
    own = finished(TaskFactory(owner=alice), status="failed", minutes_ago=3)
    client = signed_in(alice)

    response = client.get(reverse("admin-dashboard"))

    states = {label: count for label, count, _ in response.context["states"]}
    assert states["Failed (in range)"] == 3
    (failures,) = bars(response.content.decode(), "Failures")
    assert "(3 runs)" in failures[1]
    assert listed_ids(client, failures[0]) == {str(r.pk) for r in [*teams, own]}


def test_a_user_without_teams_sees_the_same_counts_as_her_run_list() -> None:
    alice = UserFactory()
    runs = [finished(TaskFactory(owner=alice), status="failed", minutes_ago=3) for _ in range(3)]
    finished(TaskFactory(owner=UserFactory()), status="failed", minutes_ago=3)
    client = signed_in(alice)

    response = client.get(reverse("admin-dashboard"))

    (failures,) = bars(response.content.decode(), "Failures")
    assert "(3 runs)" in failures[1]
    assert listed_ids(client, failures[0]) == {str(r.pk) for r in runs}
