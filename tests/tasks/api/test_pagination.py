"""List pages: selected and counted by the one statement that writes them (tasks/api/json_sql.py,
tasks/api/pagination.py), with DRF's page numbers, links and 404s."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import RunFactory, TaskFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def seven(user, other_user):
    TaskFactory.create_batch(2, owner=other_user)  # never listed nor counted for `user`
    return [TaskFactory(owner=user, name=f"job {i}") for i in range(7)]


def test_pages_count_and_link_as_drf(api, seven):
    first = api.get("/api/v1/tasks?page_size=3").json()
    assert first["count"] == 7 and len(first["results"]) == 3
    assert first["previous"] is None and "page=2" in first["next"]
    third = api.get("/api/v1/tasks?page_size=3&page=3").json()
    assert third["count"] == 7 and len(third["results"]) == 1
    assert third["next"] is None and "page=2" in third["previous"]
    seen = [
        t["id"]
        for p in (1, 2, 3)
        for t in api.get(f"/api/v1/tasks?page_size=3&page={p}").json()["results"]
    ]
    assert sorted(seen) == sorted(str(t.id) for t in seven)


def test_last_page_by_name(api, seven):
    last = api.get("/api/v1/tasks?page_size=3&page=last").json()
    assert last["count"] == 7 and len(last["results"]) == 1 and last["next"] is None


def test_a_page_past_the_last_is_404(api, seven):
    response = api.get("/api/v1/tasks?page_size=3&page=4")
    assert response.status_code == 404, response.content
    assert response.json()["detail"] == "Invalid page."


LISTS = ["/api/v1/tasks", "/api/v1/runs", "/api/v1/calendars", "/api/v1/notifications"]


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("page", ["0", "-1", "abc", "1.5", "\u00b2", ""])
def test_a_page_that_is_no_page_number_is_a_400_naming_it(api, path, page):
    response = api.get(f"{path}?page={page}")
    if page == "":  # absent, as DRF reads an empty value: the first page
        assert response.status_code == 200, response.content
        return
    assert response.status_code == 400, response.content
    assert list(response.json()) == ["page"]


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("size", ["-1", "0", "abc", "2.5", "\u00b2"])
def test_a_bad_page_size_is_a_400_naming_it(api, path, size):
    response = api.get(f"{path}?page_size={size}")
    assert response.status_code == 400, response.content
    assert list(response.json()) == ["page_size"]


def test_a_page_size_above_the_most_is_the_most(api, seven):
    assert len(api.get("/api/v1/tasks?page_size=100000").json()["results"]) == 7


@pytest.mark.parametrize("page", ["5204318448225670144", str(2**63), "9" * 40])
def test_a_page_number_past_bigint_is_404_not_500(api, user, seven, page):
    # The page's offset is a bound parameter: one past bigint would be a database error.
    task = TaskFactory(owner=user)
    for path in ("/api/v1/tasks", f"/api/v1/tasks/{task.id}/runs"):
        response = api.get(f"{path}?page={page}")
        assert response.status_code == 404, response.content
        assert response.json()["detail"] == "Invalid page."


def test_the_count_follows_the_filter(api, seven, user):
    TaskFactory(owner=user, name="other")
    found = api.get("/api/v1/tasks?name=job&page_size=2").json()
    assert found["count"] == 7 and len(found["results"]) == 2


def test_an_empty_list_is_page_one_of_nothing(api, other_user):
    TaskFactory(owner=other_user)
    found = api.get("/api/v1/tasks").json()
    assert found == {"count": 0, "next": None, "previous": None, "results": []}
    assert api.get("/api/v1/tasks?page=2").status_code == 404


def test_a_list_page_is_not_counted_by_a_query_of_its_own(api, seven):
    with CaptureQueriesContext(connection) as captured:
        assert api.get("/api/v1/tasks?page_size=3&page=2").status_code == 200
    counts = [q["sql"] for q in captured.captured_queries if "COUNT(" in q["sql"].upper()]
    assert len(counts) == 1 and "tasks_task" in counts[0] and "json_build_object" in counts[0]


def test_a_tasks_runs_are_paged_and_counted(api, other_api, user):
    task = TaskFactory(owner=user)
    now = datetime.now(UTC)
    for i in range(5):
        RunFactory(task=task, scheduled_at=now - timedelta(minutes=i))
    second = api.get(f"/api/v1/tasks/{task.id}/runs?page_size=2&page=2").json()
    assert second["count"] == 5 and len(second["results"]) == 2
    assert api.get(f"/api/v1/tasks/{task.id}/runs?page_size=2&page=4").status_code == 404
    # Another owner learns nothing, not even how many runs there are.
    assert other_api.get(f"/api/v1/tasks/{task.id}/runs").status_code == 404
    empty = TaskFactory(owner=user)
    assert api.get(f"/api/v1/tasks/{empty.id}/runs").json()["count"] == 0


@pytest.mark.not_through_pgbouncer(
    reason="with DATABASE_PREPARED_STATEMENTS=false nothing is prepared: no statement to count"
)
def test_every_page_of_a_list_is_one_prepared_statement(api, seven):
    def prepared() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_prepared_statements")
            return cursor.fetchone()[0]

    api.get("/api/v1/tasks?page_size=2&page=1")
    before = prepared()
    for page in (2, 3, 4):
        assert len(api.get(f"/api/v1/tasks?page_size=2&page={page}").json()["results"]) >= 1
    assert prepared() == before
