"""A schedule in words: cron by cron-descriptor, every other type written here."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tasks.schedule_describe import describe
from tasks.schedules import normalize

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (
            {
                "type": "rrule",
                "rule": "FREQ=MONTHLY;BYDAY=FR;BYSETPOS=-1;BYHOUR=17",
                "timezone": "Europe/Berlin",
            },
            "At 17:00 on the last Friday of every month (Europe/Berlin)",
        ),
        (
            {"type": "rrule", "rule": "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,WE;BYHOUR=9;BYMINUTE=30"},
            "At 09:30 on Monday and Wednesday every 2 weeks (UTC)",
        ),
        ({"type": "rrule", "rule": "FREQ=HOURLY;INTERVAL=3"}, "Every 3 hours (UTC)"),
        (
            {"type": "monthly", "weekday": "mon", "week": 3, "at": "09:00"},
            "At 09:00 on the third Monday of every month (UTC)",
        ),
        (
            {"type": "monthly", "business_day": -1, "at": "18:00"},
            "At 18:00 on the last business day of every month (UTC)",
        ),
        (
            {"type": "monthly", "day": -1, "at": "23:00", "timezone": "Asia/Tokyo"},
            "At 23:00 on the last day of every month (Asia/Tokyo)",
        ),
        (
            {"type": "daily", "at": "02:30", "business_days_only": True},
            "At 02:30 on business days (UTC)",
        ),
        (
            {"type": "weekly", "days": ["fri", "mon"], "at": "08:00"},
            "At 08:00 on Monday and Friday (UTC)",
        ),
        ({"type": "interval", "every": 3600}, "Every hour"),
        ({"type": "interval", "every": 90}, "Every 90 seconds"),
        (
            {"type": "cron", "expression": "*/15 9-17 * * mon-fri", "timezone": "Europe/Berlin"},
            "Every 15 minutes, between 09:00 and 17:59, Monday through Friday (Europe/Berlin)",
        ),
        ("@daily", "At 00:00 (UTC)"),
        (
            {
                "type": "daily",
                "at": "09:00",
                "exclude_windows": [
                    {"start": "2026-12-20T00:00:00Z", "end": "2027-01-02T00:00:00Z"}
                ],
            },
            "At 09:00 every day, outside 1 freeze window (UTC)",
        ),
    ],
)
def test_describe(raw: object, text: str) -> None:
    assert describe(normalize(raw, now=NOW)) == text  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (
            {"type": "once", "run_at": "2030-07-01T09:00", "timezone": "Europe/Berlin"},
            "Once, at 2030-07-01 09:00:00 (Europe/Berlin)",
        ),
        (
            {"type": "once", "run_at": "2030-07-01T09:00:00Z", "timezone": "Asia/Tokyo"},
            "Once, at 2030-07-01 18:00:00 (Asia/Tokyo)",
        ),
        ({"type": "once", "run_at": "2030-07-01T09:00:00Z"}, "Once, at 2030-07-01T09:00:00Z"),
    ],
)
def test_a_one_time_schedule_is_described_in_its_zone(raw: dict, text: str) -> None:
    assert describe(normalize(raw, now=NOW)) == text
