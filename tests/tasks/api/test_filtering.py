"""The list's ordering: rows equal on every requested term come in id order, page after page."""

from __future__ import annotations

from uuid import UUID

import pytest

from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("ordering", ["priority", "-priority", "name"])
def test_ties_are_broken_by_id_across_pages(api, user, ordering: str) -> None:
    # Inserted in descending id order, so the table's own order is the reverse of the id's.
    ids = [UUID(int=(1 << 120) + i) for i in range(12)]
    for task_id in reversed(ids):
        TaskFactory(id=task_id, owner=user, name="same", priority=4)

    seen = [
        task["id"]
        for page in (1, 2, 3)
        for task in api.get(f"/api/v1/tasks?ordering={ordering}&page_size=5&page={page}").json()[
            "results"
        ]
    ]

    assert seen == [str(task_id) for task_id in ids]


def test_an_unknown_ordering_term_is_a_400_naming_ordering(api) -> None:
    response = api.get("/api/v1/tasks?ordering=owner")

    assert response.status_code == 400, response.content
    assert list(response.json()) == ["ordering"], response.json()


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/api/v1/runs", "scheduled_after"),
        ("/api/v1/runs", "scheduled_before"),
        ("/api/v1/audit", "after"),
        ("/api/v1/audit", "before"),
    ],
)
def test_a_time_filter_reads_any_iso_offset_in_utc(api, path: str, name: str) -> None:
    # ISO 8601 allows offsets PostgreSQL refuses (past 15:59): the fuzz found a 500 here.
    far = api.get(path, {name: "0603-03-08T16:16:36+22:06"})
    assert far.status_code == 200, far.content
    # A time with no UTC instant (before year 1 once read in UTC) is a 400 naming the filter.
    none = api.get(path, {name: "0001-01-01T00:00:00+22:06"})
    assert none.status_code == 400 and name in none.json(), none.content
