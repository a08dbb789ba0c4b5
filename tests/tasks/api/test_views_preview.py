"""POST /api/v1/schedules/preview: the next fire times, or 400 naming the schedule's field."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

URL = "/api/v1/schedules/preview"


def preview(api: APIClient, schedule: object, **extra: object):
    return api.post(URL, {"schedule": schedule, **extra}, format="json")


def test_cron_preview_in_utc(api: APIClient, db) -> None:
    response = preview(api, {"type": "cron", "expression": "*/15 * * * *"}, count=4)

    assert response.status_code == 200
    times = response.json()["next_runs"]
    assert len(times) == 4
    assert all(t.endswith("Z") for t in times)
    parsed = [datetime.fromisoformat(t) for t in times]
    assert all(t.minute % 15 == 0 and t.second == 0 for t in parsed)
    assert all(b - a == timedelta(minutes=15) for a, b in itertools.pairwise(parsed))
    assert parsed[0] > datetime.now(UTC) - timedelta(seconds=5)


def test_cron_string_is_a_cron_schedule(api: APIClient, db) -> None:
    response = preview(api, "0 3 * * *", count=2)

    assert response.status_code == 200
    assert all(t.endswith("T03:00:00Z") for t in response.json()["next_runs"])


def test_daily_in_a_zone_is_answered_in_utc(api: APIClient, db) -> None:
    schedule = {
        "type": "daily",
        "at": "09:30",
        "timezone": "Asia/Kolkata",
        "start_at": "2030-01-01T00:00:00",
    }

    response = preview(api, schedule, count=3)

    assert response.status_code == 200
    # 09:30 in India (UTC+05:30) is 04:00 UTC.
    assert response.json()["next_runs"] == [
        "2030-01-01T04:00:00Z",
        "2030-01-02T04:00:00Z",
        "2030-01-03T04:00:00Z",
    ]


def test_daily_across_a_dst_change(api: APIClient, db) -> None:
    schedule = {
        "type": "daily",
        "at": "09:00",
        "timezone": "Europe/Berlin",
        "start_at": "2030-03-30T00:00:00",
    }

    times = preview(api, schedule, count=2).json()["next_runs"]

    # Berlin moves from UTC+1 to UTC+2 in the night to 31 March 2030.
    assert times == ["2030-03-30T08:00:00Z", "2030-03-31T07:00:00Z"]


def test_default_count_is_five(api: APIClient, db) -> None:
    response = preview(api, {"type": "interval", "every": 60})

    assert len(response.json()["next_runs"]) == 5


def test_once_preview_is_its_run_at(api: APIClient, db) -> None:
    response = preview(api, {"type": "once", "run_at": "2030-01-01T00:00:00Z"})

    assert response.json()["next_runs"] == ["2030-01-01T00:00:00Z"]


@pytest.mark.parametrize("count", [0, 101, "many"])
def test_count_out_of_range_is_400(api: APIClient, db, count: object) -> None:
    response = preview(api, {"type": "interval", "every": 60}, count=count)

    assert response.status_code == 400
    assert "count" in response.json()


def test_count_of_a_hundred_is_allowed(api: APIClient, db) -> None:
    response = preview(api, {"type": "interval", "every": 60}, count=100)

    assert len(response.json()["next_runs"]) == 100


@pytest.mark.parametrize(
    ("schedule", "field"),
    [
        ({"type": "cron", "expression": "61 * * * *"}, "expression"),
        ({"type": "cron"}, "expression"),
        ({"type": "daily", "at": "25:00"}, "at"),
        ({"type": "daily"}, "at"),
        ({"type": "weekly", "days": ["funday"], "at": "10:00"}, "days"),
        ({"type": "monthly", "day": 32, "at": "10:00"}, "day"),
        ({"type": "interval", "every": 0}, "every"),
        ({"type": "interval", "every": 60, "timezone": "Mars/Base"}, "timezone"),
        ({"type": "interval", "every": 60, "misfire": "sometimes"}, "misfire"),
        ({"type": "fortnightly"}, "type"),
        ({"type": "interval", "every": 60, "colour": "red"}, "colour"),
        ({"every": 60}, "type"),
    ],
)
def test_bad_schedule_is_400_naming_the_field(
    api: APIClient,
    db,
    schedule: dict,
    field: str,
) -> None:
    response = preview(api, schedule)

    assert response.status_code == 400
    errors = response.json()["schedule"]
    assert field in errors, errors
    assert all(isinstance(message, str) for message in errors[field])


def test_missing_schedule_is_400(api: APIClient, db) -> None:
    response = api.post(URL, {}, format="json")

    assert response.status_code == 400
    assert "schedule" in response.json()


def test_rrule_preview_and_a_bad_part_named(api: APIClient, db) -> None:
    rule = "FREQ=MONTHLY;BYDAY=FR;BYSETPOS=-1;BYHOUR=17"
    schedule = {"type": "rrule", "rule": rule, "timezone": "Europe/Berlin"}
    response = preview(api, {**schedule, "start_at": "2030-01-01T00:00:00"}, count=2)

    assert response.status_code == 200, response.content
    assert response.json()["next_runs"] == ["2030-01-25T16:00:00Z", "2030-02-22T16:00:00Z"]
    bad = preview(api, {**schedule, "rule": "FREQ=MONTHLY;BYDAY=FR;BYSETPOS=0"})
    assert bad.status_code == 400
    assert list(bad.json()["schedule"]) == ["rule.BYSETPOS"]
