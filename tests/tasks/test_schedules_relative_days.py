"""Relative days: monthly on the n-th weekday or business day, daily/weekly on business days
only; business days follow a holiday calendar (checked against the `holidays` package)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import holidays
import pytest

from tasks.schedules import ScheduleError, normalize, preview

NOW = datetime(2027, 1, 1, tzinfo=UTC)
BERLIN = ZoneInfo("Europe/Berlin")
BAVARIA = holidays.country_holidays("DE", subdiv="BY", years=[2026, 2027, 2028])


def local_dates(raw: dict, count: int, days_off=None) -> list[date]:
    schedule = normalize({"timezone": "Europe/Berlin", "at": "09:00", **raw}, now=NOW)
    found = preview(schedule, now=NOW, count=count, days_off=days_off)
    assert all(t.astimezone(BERLIN).strftime("%H:%M") == "09:00" for t in found)
    return [t.astimezone(BERLIN).date() for t in found]


def business_days(year: int, month: int) -> list[date]:
    day, found = date(year, month, 1), []
    while day.month == month:
        if day.weekday() < 5 and day not in BAVARIA:
            found.append(day)
        day += timedelta(days=1)
    return found


def test_third_monday_of_every_month_of_2027() -> None:
    got = local_dates({"type": "monthly", "weekday": "mon", "week": 3}, 12)
    expected = []
    for month in range(1, 13):
        mondays = [
            date(2027, month, d) for d in range(1, 29) if date(2027, month, d).weekday() == 0
        ]
        expected.append(mondays[2])
    assert got == expected


def test_last_friday_and_a_fifth_weekday_only_where_there_is_one() -> None:
    assert local_dates({"type": "monthly", "weekday": "friday", "week": -1}, 3) == [
        date(2027, 1, 29),
        date(2027, 2, 26),
        date(2027, 3, 26),
    ]
    # Fifth Mondays of 2027: March, May, August, November.
    assert local_dates({"type": "monthly", "weekday": "mon", "week": 5}, 4) == [
        date(2027, 3, 29),
        date(2027, 5, 31),
        date(2027, 8, 30),
        date(2027, 11, 29),
    ]


def test_last_and_first_business_day_with_the_bavarian_calendar_for_2027() -> None:
    off = BAVARIA.__contains__
    last = local_dates({"type": "monthly", "business_day": -1}, 12, off)
    assert last == [business_days(2027, m)[-1] for m in range(1, 13)]
    first = local_dates({"type": "monthly", "business_day": 1}, 12, off)
    assert first == [business_days(2027, m)[0] for m in range(1, 13)]
    # 1 January (New Year) and 6 January (Epiphany, Bavaria) are holidays in 2027.
    assert local_dates({"type": "monthly", "business_day": 3}, 1, off) == [date(2027, 1, 7)]
    # Without a calendar a business day is Monday to Friday: 1 January 2027 is a Friday.
    assert local_dates({"type": "monthly", "business_day": 1}, 1) == [date(2027, 1, 1)]


def test_daily_and_weekly_on_business_days_only() -> None:
    off = BAVARIA.__contains__
    daily = local_dates({"type": "daily", "business_days_only": True}, 5, off)
    assert daily == [date(2027, 1, d) for d in (4, 5, 7, 8, 11)]  # not the 1st nor the 6th
    weekly = {"type": "weekly", "days": ["wed", "sat"], "business_days_only": True}
    assert local_dates(weekly, 2, off) == [date(2027, 1, 13), date(2027, 1, 20)]
    stored = normalize({"type": "daily", "at": "09:00", "business_days_only": True}, now=NOW)
    assert stored["business_days_only"] is True
    assert "business_days_only" not in normalize({"type": "daily", "at": "09:00"}, now=NOW)


def test_a_relative_day_at_a_time_in_the_spring_gap_runs_at_its_end() -> None:
    # 28 March 2027, the last Sunday of March, has no 02:30 in Berlin: 03:00 CEST instead.
    schedule = normalize(
        {
            "type": "monthly",
            "weekday": "sun",
            "week": -1,
            "at": "02:30",
            "timezone": "Europe/Berlin",
        },
        now=datetime(2027, 3, 1, tzinfo=UTC),
    )
    assert preview(schedule, now=datetime(2027, 3, 1, tzinfo=UTC), count=1) == [
        datetime(2027, 3, 28, 1, 0, tzinfo=UTC)
    ]


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"weekday": "mon", "week": 0}, "week"),
        ({"weekday": "mon", "week": 6}, "week"),
        ({"weekday": "mon"}, "week"),
        ({"weekday": "someday", "week": 1}, "weekday"),
        ({"week": 2}, "weekday"),
        ({"business_day": 0}, "business_day"),
        ({"business_day": 24}, "business_day"),
        ({"day": 1, "business_day": 1}, "business_day"),
        ({"day": 1, "weekday": "mon", "week": 1}, "weekday"),
    ],
)
def test_bad_relative_days_are_named(raw: dict, field: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        normalize({"type": "monthly", "at": "09:00", **raw}, now=NOW)
    assert field in caught.value.errors, caught.value.errors


def test_business_days_only_is_for_daily_and_weekly() -> None:
    with pytest.raises(ScheduleError) as caught:
        normalize({"type": "monthly", "day": 1, "at": "09:00", "business_days_only": True}, now=NOW)
    assert "business_days_only" in caught.value.errors
