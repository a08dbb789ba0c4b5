"""/api/v1/calendars: create, read, change, delete a user's calendars; schedules that exclude
them; the preview's `excluded`; 400s naming the field, 404 for another user's, 409 in use."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

URL = "/api/v1/calendars"
CHRISTMAS = {"type": "daily", "at": "09:00", "timezone": "Europe/Berlin"}
CHRISTMAS_START = {**CHRISTMAS, "start_at": "2030-12-24T00:00:00"}


def make(api: APIClient, **body: object) -> dict:
    response = api.post(URL, {"name": "ops", **body}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_create_read_and_list_a_calendar(api: APIClient, db) -> None:
    body = {
        "name": "Bavaria",
        "timezone": "europe/berlin",
        "holidays": {"country": "de", "subdivision": "by"},
        "dates": ["2030-12-31", "2030-12-24", "2030-12-24"],
        "windows": [{"start": "2030-12-27T18:00:00", "end": "2030-12-28T06:00:00"}],
    }
    made = make(api, **body)
    assert made["timezone"] == "Europe/Berlin"
    assert made["holidays"] == {"country": "DE", "subdivision": "BY"}
    assert made["dates"] == ["2030-12-24", "2030-12-31"]
    assert made["windows"] == [{"start": "2030-12-27T17:00:00Z", "end": "2030-12-28T05:00:00Z"}]
    assert api.get(f"{URL}/{made['id']}").json() == made
    assert [c["id"] for c in api.get(URL).json()["results"]] == [made["id"]]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": ""}, "name"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"holidays": {"country": "XX"}}, "holidays"),
        ({"holidays": {"country": "DE", "subdivision": "ZZ"}}, "holidays"),
        ({"dates": ["2030-02-30"]}, "dates"),
        (
            {"windows": [{"start": "2030-01-02T00:00:00Z", "end": "2030-01-01T00:00:00Z"}]},
            "windows[0].end",
        ),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_calendar_is_400_naming_the_field(api: APIClient, db, body: dict, field: str) -> None:
    response = api.post(URL, {"name": "ops", **body}, format="json")
    assert response.status_code == 400
    assert field in response.json(), response.json()


def test_another_users_calendar_is_404_and_cannot_be_excluded(
    api: APIClient, other_api: APIClient, db
) -> None:
    theirs = make(other_api)
    assert api.get(f"{URL}/{theirs['id']}").status_code == 404
    assert api.delete(f"{URL}/{theirs['id']}").status_code == 404
    schedule = {**CHRISTMAS, "exclude": [theirs["id"]]}
    response = api.post(
        "/api/v1/tasks",
        {"kind": "handler", "payload": {"name": "noop"}, "schedule": schedule},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["schedule"] == {"exclude[0]": ["Unknown calendar."]}


def test_preview_lists_what_is_excluded_and_why(api: APIClient, db) -> None:
    calendar = make(api, holidays={"country": "DE", "subdivision": "BY"}, dates=["2030-12-24"])
    schedule = {**CHRISTMAS_START, "exclude": [calendar["id"]]}
    response = api.post(
        "/api/v1/schedules/preview", {"schedule": schedule, "count": 2}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["next_runs"] == ["2030-12-27T08:00:00Z", "2030-12-28T08:00:00Z"]
    assert body["excluded"] == [
        {"at": "2030-12-24T08:00:00Z", "reason": "excluded: 2030-12-24 (calendar ops)"},
        {"at": "2030-12-25T08:00:00Z", "reason": "excluded: holiday Christmas Day (DE-BY)"},
    ]
    assert body["schedule"]["exclude"] == [calendar["id"]]


def test_deleting_a_calendar_in_use_is_409_naming_the_task(
    api: APIClient, db, create: Callable[..., dict]
) -> None:
    calendar = make(api)
    task = create(name="nightly", schedule={**CHRISTMAS, "exclude": [calendar["id"]]})
    response = api.delete(f"{URL}/{calendar['id']}")
    assert response.status_code == 409
    assert task["id"] in response.json()["detail"] and "nightly" in response.json()["detail"]
    assert api.delete(f"/api/v1/tasks/{task['id']}").status_code in (200, 204)
    assert api.delete(f"{URL}/{calendar['id']}").status_code == 204


def test_patching_a_calendar_answers_the_change(api: APIClient, db) -> None:
    calendar = make(api, dates=["2030-12-24"])
    response = api.patch(f"{URL}/{calendar['id']}", {"dates": []}, format="json")
    assert response.status_code == 200
    assert response.json()["dates"] == [] and response.json()["name"] == "ops"


def test_the_task_and_the_preview_describe_the_schedule(
    api: APIClient, db, create: Callable[..., dict]
) -> None:
    rule = {
        "type": "rrule",
        "rule": "FREQ=MONTHLY;BYDAY=FR;BYSETPOS=-1;BYHOUR=17",
        "timezone": "Europe/Berlin",
    }
    text = "At 17:00 on the last Friday of every month (Europe/Berlin)"
    task = create(schedule=rule)
    assert task["describe"] == text
    assert api.get(f"/api/v1/tasks/{task['id']}").json()["describe"] == text
    assert api.get("/api/v1/tasks").json()["results"][0]["describe"] == text
    preview = api.post("/api/v1/schedules/preview", {"schedule": rule}, format="json").json()
    assert preview["describe"] == text and preview["excluded"] == []


def test_next_runs_leave_out_what_a_calendar_excludes(
    api: APIClient, db, create: Callable[..., dict]
) -> None:
    calendar = make(api, holidays={"country": "DE", "subdivision": "BY"}, dates=["2030-12-24"])
    task = create(schedule={**CHRISTMAS_START, "exclude": [calendar["id"]]})
    assert task["next_runs"][:2] == ["2030-12-27T08:00:00Z", "2030-12-28T08:00:00Z"]
    api.patch(f"{URL}/{calendar['id']}", {"dates": [], "holidays": None}, format="json")
    shown = api.get(f"/api/v1/tasks/{task['id']}").json()["next_runs"]
    assert shown[:2] == ["2030-12-24T08:00:00Z", "2030-12-25T08:00:00Z"]


def test_a_calendar_read_back_and_patched_whole_is_a_200(api: APIClient, db) -> None:
    """Found by fuzzing: `holidays: {}` (what a calendar without holidays shows) in a PATCH
    answered 500."""
    calendar = make(api, name="plant", holidays={"country": "DE"}, dates=["2030-01-02"])
    body = {"name": "0", "timezone": "UTC", "holidays": {}, "dates": [], "windows": []}

    response = api.patch(f"{URL}/{calendar['id']}", body, format="json")

    assert response.status_code == 200, response.content
    assert {k: response.json()[k] for k in body} == body
    shown = api.get(f"{URL}/{calendar['id']}").json()
    again = api.put(f"{URL}/{calendar['id']}", {k: shown[k] for k in body}, format="json")
    assert again.status_code == 200, again.content


@pytest.mark.parametrize("method", ["patch", "put"])
def test_holidays_without_a_country_is_a_400_naming_it(api: APIClient, db, method: str) -> None:
    calendar = make(api, name="plant")
    body = {"name": "plant", "holidays": {"subdivision": "BY"}}

    response = getattr(api, method)(f"{URL}/{calendar['id']}", body, format="json")

    assert response.status_code == 400, response.content
    assert response.json() == {"holidays": {"country": ["This field is required."]}}
