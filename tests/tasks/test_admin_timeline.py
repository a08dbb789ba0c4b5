"""The timeline draws runs as bars over a time range: two overlapping runs of one task as two
bars whose spans overlap, only the runs the user may see, and a bad range refused by name."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.urls import reverse

from tests.factories import RunFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db

BASE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TIMELINE = reverse("admin:tasks_run_timeline")
RANGE = {"since": "2026-03-01T12:00:00Z", "until": "2026-03-01T14:00:00Z"}


def ran(task, start: datetime, minutes: int, status: str = "succeeded"):
    return RunFactory(
        task=task,
        scheduled_at=start,
        status=status,
        attempt=1,
        started_at=start,
        finished_at=start + timedelta(minutes=minutes),
    )


def bars(html: str) -> dict[str, tuple[float, float, float]]:
    """run id: (x, y, width) of its bar."""
    found = re.findall(r'data-run="([0-9a-f-]+)" x="([\d.]+)" y="(\d+)" width="([\d.]+)"', html)
    return {run: (float(x), float(y), float(w)) for run, x, y, w in found}


@pytest.fixture
def alice():
    return UserFactory(username="alice")


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_two_overlapping_runs_of_one_task_are_bars_whose_spans_overlap(alice) -> None:
    task = TaskFactory(owner=alice, name="slow export")
    first = ran(task, BASE + timedelta(minutes=10), 60)
    second = ran(task, BASE + timedelta(minutes=40), 30, status="failed")
    later = ran(task, BASE + timedelta(minutes=100), 10)

    response = signed_in(alice).get(TIMELINE, {"task": str(task.pk), **RANGE})

    assert response.status_code == 200
    drawn = bars(response.content.decode())
    (x1, y1, w1), (x2, y2, w2), (x3, y3, _) = (
        drawn[str(first.pk)],
        drawn[str(second.pk)],
        drawn[str(later.pk)],
    )
    assert x1 < x2 < x1 + w1  # the second starts while the first still runs
    assert y1 != y2  # each on its own lane of the task's band, both visible
    assert x3 > x2 + w2 and y3 == y1  # after both: back on the first lane
    # Bars scale with time: 60 minutes is twice 30.
    assert w1 == pytest.approx(2 * w2, rel=0.01)
    assert 'tone-bad" data-run="' + str(second.pk) in response.content.decode()


def test_runs_outside_the_range_and_other_users_runs_are_not_drawn(alice) -> None:
    own = TaskFactory(owner=alice)
    inside = ran(own, BASE + timedelta(minutes=5), 5)
    before = ran(own, BASE - timedelta(hours=3), 5)
    theirs = ran(TaskFactory(owner=UserFactory()), BASE + timedelta(minutes=5), 5)

    drawn = bars(signed_in(alice).get(TIMELINE, RANGE).content.decode())

    assert set(drawn) == {str(inside.pk)}
    assert str(before.pk) not in drawn and str(theirs.pk) not in drawn


def test_a_bad_range_is_refused_naming_the_field(alice) -> None:
    response = signed_in(alice).get(TIMELINE, {"since": "yesterday-ish"})

    assert response.status_code == 400
    assert "since: not a date or time" in response.content.decode()
