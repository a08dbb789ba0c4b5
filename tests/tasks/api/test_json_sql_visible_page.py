"""The task list in its default order without a filter (tasks/sql/api_json.sql
`tasks_visible_page`): its parts written as named SQL, not by the ORM. Every page and the count
equal the OR of the caller's scopes (accounts/access.py `visible`) in the list's order, newest
first and then by id; nothing of a team the caller is no member of, nor another user's own."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import Membership, Team
from tasks.models import Task
from tests.conftest import client_for
from tests.factories import TaskFactory, UserFactory

pytestmark = pytest.mark.django_db


def _pages(api, size: int, **params: object) -> tuple[list[str], list[int]]:
    """Every page's ids in turn, and the count each page states."""
    ids, counts, page = [], [], 1
    while True:
        response = api.get("/api/v1/tasks", {"page_size": size, "page": page, **params})
        assert response.status_code == 200, response.content
        body = response.json()
        ids += [item["id"] for item in body["results"]]
        counts.append(body["count"])
        if not body["next"]:
            return ids, counts
        page += 1


def _by_the_or(user, teams: list[Team]) -> list[str]:
    scopes = Q(owner=user, team__isnull=True) | Q(team__in=teams)
    found = Task.objects.filter(scopes).order_by("-created_at", "id")
    return [str(pk) for pk in found.values_list("id", flat=True)]


@pytest.fixture
def made():
    """A member of two teams (data, web) and a user in none, among tasks of every kind of
    scope: the member's own, their own in a team they are no member of (ops), colleagues' in
    each team, a colleague's own; created in groups of three at the same instant, so the id
    decides the order within a group."""
    data, web, ops = (Team.objects.create(slug=slug) for slug in ("data", "web", "ops"))
    me, solo, colleague = UserFactory(), UserFactory(), UserFactory()
    Membership.objects.create(team=data, user=me, role="viewer")
    Membership.objects.create(team=web, user=me, role="editor")
    Membership.objects.create(team=ops, user=colleague, role="editor")
    start = timezone.now() - timedelta(days=1)
    scopes = [
        (me, None),
        (colleague, data),
        (me, ops),
        (colleague, web),
        (me, data),
        (solo, None),
        (colleague, None),
        (colleague, ops),
    ]
    for i in range(48):
        owner, team = scopes[i % len(scopes)]
        task = TaskFactory(owner=owner, team=team)
        Task.objects.filter(pk=task.pk).update(created_at=start + timedelta(minutes=i // 3))
    return {"me": me, "solo": solo, "teams": [data, web], "ops": ops}


@pytest.mark.parametrize("size", [1, 4, 7, 50])
def test_every_page_and_the_count_equal_the_or_of_the_callers_scopes(made, size) -> None:
    me, solo = made["me"], made["solo"]
    expected = _by_the_or(me, made["teams"])
    assert len(expected) == 24  # their own 6, data's 12 (6 theirs), web's 6
    ids, counts = _pages(client_for(me), size)
    assert ids == expected
    assert set(counts) == {len(expected)}
    ops_tasks = {
        str(pk) for pk in Task.objects.filter(team=made["ops"]).values_list("id", flat=True)
    }
    assert not ops_tasks & set(ids)
    alone = _by_the_or(solo, [])
    assert len(alone) == 6
    assert _pages(client_for(solo), size) == (alone, [6] * len(_pages(client_for(solo), size)[1]))


def test_a_page_past_the_last_is_a_404_and_an_empty_list_is_counted_0(made) -> None:
    api = client_for(made["me"])
    assert api.get("/api/v1/tasks", {"page_size": 24, "page": 2}).status_code == 404
    assert api.get("/api/v1/tasks", {"page_size": 23, "page": 2}).json()["count"] == 24
    empty = client_for(UserFactory()).get("/api/v1/tasks").json()
    assert (empty["count"], empty["results"]) == (0, [])


def test_a_member_removed_no_longer_sees_the_teams_tasks(made) -> None:
    me, (data, web) = made["me"], made["teams"]
    api = client_for(me)
    Membership.objects.filter(user=me, team=data).delete()
    assert _pages(api, 5)[0] == _by_the_or(me, [web])


@pytest.mark.parametrize("ordering", [None, "", "-created_at"])
def test_the_default_list_is_one_statement_that_reads_the_memberships(made, ordering) -> None:
    params = {"ordering": ordering} if ordering is not None else {}
    api = client_for(made["me"])
    with CaptureQueriesContext(connection) as queries:
        body = api.get("/api/v1/tasks", params).json()
    assert body["count"] == 24
    assert [item["id"] for item in body["results"]] == _by_the_or(made["me"], made["teams"])
    sent = [q["sql"] for q in queries.captured_queries]
    assert len([sql for sql in sent if "%(page_high)s" in sql]) == 1, sent
    # No read of the memberships of its own: the statement reads them.
    assert not any('"accounts_membership"' in sql for sql in sent), sent


@pytest.mark.parametrize(
    "params",
    [
        {"ordering": "created_at"},
        {"ordering": "-created_at,name"},
        {"status": "active"},
        {"page": "last"},
    ],
)
def test_another_order_a_filter_or_the_last_page_is_the_orms_query(made, params) -> None:
    api = client_for(made["me"])
    with CaptureQueriesContext(connection) as queries:
        body = api.get("/api/v1/tasks", {"page_size": 100, **params}).json()
    assert body["count"] == 24
    expected = _by_the_or(made["me"], made["teams"])
    if params.get("ordering") in ("created_at", "-created_at,name"):
        assert sorted(item["id"] for item in body["results"]) == sorted(expected)
    else:
        assert [item["id"] for item in body["results"]] == expected
    assert not any("%(page_high)s" in q["sql"] for q in queries.captured_queries)
