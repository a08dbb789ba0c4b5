"""Pure tests of tasks.schedules: validation, fire times across DST changes, jitter, preview."""

from __future__ import annotations

import json
import time as clock
from datetime import UTC, date, datetime, time, timedelta
from itertools import islice, pairwise
from zoneinfo import ZoneInfo, available_timezones

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from tasks.schedule_cron import first_instant_at_or_after, parse_cron
from tasks.schedules import ScheduleError, fire_times, jitter_offset, normalize, preview

NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
ZONES = sorted(available_timezones() - {"localtime", "posixrules"})


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def upcoming(raw: dict | str, now: str, count: int) -> list[str]:
    at = utc(now)
    return [iso(t) for t in preview(normalize(raw, now=at), now=at, count=count)]


BERLIN, NEW_YORK, LORD_HOWE = "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"

# (schedule, now, expected UTC fire times). Berlin 2025: 02:00 CET -> 03:00 CEST on 30 March,
# 03:00 CEST -> 02:00 CET on 26 October. New York 2025: 02:00 EST -> 03:00 EDT on 9 March,
# 02:00 EDT -> 01:00 EST on 2 November. Lord Howe 2025 (half-hour shift): 02:00 +11 -> 01:30
# +10:30 on 6 April, 02:00 +10:30 -> 02:30 +11 on 5 October.
DST_CASES = {
    "berlin daily in the gap runs at the gap's end": (
        {"type": "daily", "at": "02:30", "timezone": BERLIN},
        "2025-03-28T12:00:00Z",
        ["2025-03-29T01:30:00Z", "2025-03-30T01:00:00Z", "2025-03-31T00:30:00Z"],
    ),
    "berlin daily in the fold runs once, first instant": (
        {"type": "daily", "at": "02:30", "timezone": BERLIN},
        "2025-10-24T12:00:00Z",
        ["2025-10-25T00:30:00Z", "2025-10-26T00:30:00Z", "2025-10-27T01:30:00Z"],
    ),
    "berlin weekly sunday in the gap": (
        {"type": "weekly", "days": ["sun"], "at": "02:30", "timezone": BERLIN},
        "2025-03-22T12:00:00Z",
        ["2025-03-23T01:30:00Z", "2025-03-30T01:00:00Z", "2025-04-06T00:30:00Z"],
    ),
    "berlin weekly sunday in the fold": (
        {"type": "weekly", "days": ["sunday"], "at": "02:15:30", "timezone": BERLIN},
        "2025-10-20T00:00:00Z",
        ["2025-10-26T00:15:30Z", "2025-11-02T01:15:30Z"],
    ),
    "berlin monthly last day in the gap (31 March 2024)": (
        {"type": "monthly", "day": -1, "at": "02:30", "timezone": BERLIN},
        "2024-02-15T00:00:00Z",
        ["2024-02-29T01:30:00Z", "2024-03-31T01:00:00Z", "2024-04-30T00:30:00Z"],
    ),
    "berlin monthly 31st in the fold (31 October 2021)": (
        {"type": "monthly", "day": 31, "at": "02:30", "timezone": BERLIN},
        "2021-09-15T00:00:00Z",
        ["2021-09-30T00:30:00Z", "2021-10-31T00:30:00Z", "2021-11-30T01:30:00Z"],
    ),
    "berlin fixed-hour cron in the gap": (
        {"type": "cron", "expression": "30 2 * * *", "timezone": BERLIN},
        "2025-03-29T12:00:00Z",
        ["2025-03-30T01:00:00Z", "2025-03-31T00:30:00Z"],
    ),
    "berlin fixed-hour cron, several minutes in the gap, one run": (
        {"type": "cron", "expression": "0,20,40 2 * * *", "timezone": BERLIN},
        "2025-03-29T12:00:00Z",
        ["2025-03-30T01:00:00Z", "2025-03-31T00:00:00Z", "2025-03-31T00:20:00Z"],
    ),
    "berlin fixed-hour cron in the fold: first pass only": (
        {"type": "cron", "expression": "0,30 2 * * *", "timezone": BERLIN},
        "2025-10-25T12:00:00Z",
        ["2025-10-26T00:00:00Z", "2025-10-26T00:30:00Z", "2025-10-27T01:00:00Z"],
    ),
    "berlin 6-field fixed cron in the gap": (
        {"type": "cron", "expression": "30 30 2 * * *", "timezone": BERLIN},
        "2025-03-29T12:00:00Z",
        ["2025-03-30T01:00:00Z", "2025-03-31T00:30:30Z"],
    ),
    "berlin wildcard-hour cron across the gap": (
        {"type": "cron", "expression": "*/30 * * * *", "timezone": BERLIN},
        "2025-03-29T23:30:00Z",
        ["2025-03-30T00:00:00Z", "2025-03-30T00:30:00Z", "2025-03-30T01:00:00Z"],
    ),
    "berlin wildcard-hour cron through the fold": (
        {"type": "cron", "expression": "*/30 * * * *", "timezone": BERLIN},
        "2025-10-25T23:50:00Z",
        [
            "2025-10-26T00:00:00Z",
            "2025-10-26T00:30:00Z",
            "2025-10-26T01:00:00Z",
            "2025-10-26T01:30:00Z",
            "2025-10-26T02:00:00Z",
        ],
    ),
    "new york daily in the gap": (
        {"type": "daily", "at": "02:30", "timezone": NEW_YORK},
        "2025-03-07T12:00:00Z",
        ["2025-03-08T07:30:00Z", "2025-03-09T07:00:00Z", "2025-03-10T06:30:00Z"],
    ),
    "new york daily in the fold": (
        {"type": "daily", "at": "01:30", "timezone": NEW_YORK},
        "2025-10-31T12:00:00Z",
        ["2025-11-01T05:30:00Z", "2025-11-02T05:30:00Z", "2025-11-03T06:30:00Z"],
    ),
    "new york monthly 2nd in the fold": (
        {"type": "monthly", "day": 2, "at": "01:59:59", "timezone": NEW_YORK},
        "2025-10-15T00:00:00Z",
        ["2025-11-02T05:59:59Z", "2025-12-02T06:59:59Z"],
    ),
    "new york fixed-hour cron in the fold": (
        {"type": "cron", "expression": "30 1 * * *", "timezone": NEW_YORK},
        "2025-11-01T12:00:00Z",
        ["2025-11-02T05:30:00Z", "2025-11-03T06:30:00Z"],
    ),
    "new york hourly cron in the fold: both real 01:00s": (
        {"type": "cron", "expression": "0 * * * *", "timezone": NEW_YORK},
        "2025-11-02T03:30:00Z",
        [
            "2025-11-02T04:00:00Z",
            "2025-11-02T05:00:00Z",
            "2025-11-02T06:00:00Z",
            "2025-11-02T07:00:00Z",
        ],
    ),
    "new york @hourly across the gap: no 02:00": (
        {"type": "cron", "expression": "@hourly", "timezone": NEW_YORK},
        "2025-03-09T05:30:00Z",
        ["2025-03-09T06:00:00Z", "2025-03-09T07:00:00Z", "2025-03-09T08:00:00Z"],
    ),
    "new york interval through the fold": (
        {"type": "interval", "every": 3600, "timezone": NEW_YORK},
        "2025-11-02T03:00:00Z",
        [
            "2025-11-02T04:00:00Z",
            "2025-11-02T05:00:00Z",
            "2025-11-02T06:00:00Z",
            "2025-11-02T07:00:00Z",
        ],
    ),
    "new york interval across the gap": (
        {"type": "interval", "every": 5400, "start_at": "2025-03-09T00:30:00-05:00"},
        "2025-03-09T05:00:00Z",
        ["2025-03-09T05:30:00Z", "2025-03-09T07:00:00Z", "2025-03-09T08:30:00Z"],
    ),
    "lord howe daily in the half-hour fold": (
        {"type": "daily", "at": "01:45", "timezone": LORD_HOWE},
        "2025-04-04T00:00:00Z",
        ["2025-04-04T14:45:00Z", "2025-04-05T14:45:00Z", "2025-04-06T15:15:00Z"],
    ),
    "lord howe daily in the half-hour gap": (
        {"type": "daily", "at": "02:15", "timezone": LORD_HOWE},
        "2025-10-03T00:00:00Z",
        ["2025-10-03T15:45:00Z", "2025-10-04T15:30:00Z", "2025-10-05T15:15:00Z"],
    ),
    "lord howe weekly sunday in the gap": (
        {"type": "weekly", "days": ["sun"], "at": "02:00", "timezone": LORD_HOWE},
        "2025-09-30T00:00:00Z",
        ["2025-10-04T15:30:00Z", "2025-10-11T15:00:00Z"],
    ),
    "lord howe monthly 5th in the gap": (
        {"type": "monthly", "day": 5, "at": "02:29", "timezone": LORD_HOWE},
        "2025-09-01T00:00:00Z",
        ["2025-09-04T15:59:00Z", "2025-10-04T15:30:00Z", "2025-11-04T15:29:00Z"],
    ),
    "lord howe fixed-hour cron in the gap": (
        {"type": "cron", "expression": "15 2 * * *", "timezone": LORD_HOWE},
        "2025-10-04T00:00:00Z",
        ["2025-10-04T15:30:00Z", "2025-10-05T15:15:00Z"],
    ),
    "lord howe quarter-hourly through the fold": (
        {"type": "cron", "expression": "*/15 * * * *", "timezone": LORD_HOWE},
        "2025-04-05T14:00:00Z",
        [
            "2025-04-05T14:15:00Z",
            "2025-04-05T14:30:00Z",
            "2025-04-05T14:45:00Z",
            "2025-04-05T15:00:00Z",
            "2025-04-05T15:15:00Z",
            "2025-04-05T15:30:00Z",
        ],
    ),
    "lord howe half past every hour through the fold": (
        {"type": "cron", "expression": "30 * * * *", "timezone": LORD_HOWE},
        "2025-04-05T14:00:00Z",
        ["2025-04-05T14:30:00Z", "2025-04-05T15:00:00Z", "2025-04-05T16:00:00Z"],
    ),
    "lord howe hourly across the gap: 02:00 does not exist": (
        {"type": "cron", "expression": "0 * * * *", "timezone": LORD_HOWE},
        "2025-10-04T14:00:00Z",
        ["2025-10-04T14:30:00Z", "2025-10-04T16:00:00Z", "2025-10-04T17:00:00Z"],
    ),
    "lord howe interval through the fold": (
        {"type": "interval", "every": 1800, "start_at": "2025-04-05T14:00:00Z"},
        "2025-04-05T14:00:00Z",
        ["2025-04-05T14:30:00Z", "2025-04-05T15:00:00Z", "2025-04-05T15:30:00Z"],
    ),
}


@pytest.mark.parametrize(("raw", "now", "expected"), DST_CASES.values(), ids=DST_CASES.keys())
def test_fire_times_across_dst_transitions(raw: dict, now: str, expected: list[str]) -> None:
    assert upcoming(raw, now, len(expected)) == expected


CALENDAR_CASES = {
    "monthly 31st clamps to 29 February in a leap year": (
        {"type": "monthly", "day": 31, "at": "09:00"},
        "2024-01-15T00:00:00Z",
        ["2024-01-31T09:00:00Z", "2024-02-29T09:00:00Z", "2024-03-31T09:00:00Z"],
    ),
    "monthly 31st clamps to 28 February otherwise": (
        {"type": "monthly", "day": 31, "at": "09:00"},
        "2025-01-15T00:00:00Z",
        ["2025-01-31T09:00:00Z", "2025-02-28T09:00:00Z", "2025-03-31T09:00:00Z"],
    ),
    "monthly 30th in February": (
        {"type": "monthly", "day": 30, "at": "00:00"},
        "2100-01-31T00:00:00Z",
        ["2100-02-28T00:00:00Z", "2100-03-30T00:00:00Z"],
    ),
    "monthly -1 is the last day": (
        {"type": "monthly", "day": -1, "at": "23:59:59"},
        "2024-01-31T23:59:59Z",
        ["2024-02-29T23:59:59Z", "2024-03-31T23:59:59Z", "2024-04-30T23:59:59Z"],
    ),
    "cron 31st skips short months (no clamping in cron)": (
        "0 0 31 * *",
        "2025-01-15T00:00:00Z",
        ["2025-01-31T00:00:00Z", "2025-03-31T00:00:00Z", "2025-05-31T00:00:00Z"],
    ),
    "cron L is the last day of the month": (
        "0 6 L * *",
        "2024-01-31T12:00:00Z",
        ["2024-02-29T06:00:00Z", "2024-03-31T06:00:00Z"],
    ),
    "cron 29 February only in leap years": (
        "0 0 29 2 *",
        "2025-01-01T00:00:00Z",
        ["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"],
    ),
    "cron 29 February skips 2100": (
        "0 0 29 2 *",
        "2097-01-01T00:00:00Z",
        ["2104-02-29T00:00:00Z"],
    ),
    "6-field cron: seconds first": (
        "*/20 * * * * *",
        "2025-01-01T12:00:00Z",
        ["2025-01-01T12:00:20Z", "2025-01-01T12:00:40Z", "2025-01-01T12:01:00Z"],
    ),
    "6-field cron at a fixed second": (
        "30 0 9 * * *",
        "2025-01-01T12:00:00Z",
        ["2025-01-02T09:00:30Z", "2025-01-03T09:00:30Z"],
    ),
    "@yearly": ("@yearly", "2025-06-15T10:20:00Z", ["2026-01-01T00:00:00Z"]),
    "@annually": ("@annually", "2025-06-15T10:20:00Z", ["2026-01-01T00:00:00Z"]),
    "@monthly": ("@monthly", "2025-06-15T10:20:00Z", ["2025-07-01T00:00:00Z"]),
    "@weekly (Sunday midnight)": ("@weekly", "2025-06-15T10:20:00Z", ["2025-06-22T00:00:00Z"]),
    "@daily": ("@daily", "2025-06-15T10:20:00Z", ["2025-06-16T00:00:00Z"]),
    "@midnight": ("@MIDNIGHT", "2025-06-15T10:20:00Z", ["2025-06-16T00:00:00Z"]),
    "@hourly": ("@hourly", "2025-06-15T10:20:00Z", ["2025-06-15T11:00:00Z"]),
    "names, ranges and weekday ranges": (
        "0 9 * jan-mar mon-fri",
        "2025-03-28T12:00:00Z",
        ["2025-03-31T09:00:00Z", "2026-01-01T09:00:00Z"],
    ),
    "weekday 7 is Sunday": ("0 0 * * 7", "2025-06-15T10:20:00Z", ["2025-06-22T00:00:00Z"]),
    "both day fields restricted: either matches (Vixie)": (
        "0 0 13 * fri",
        "2025-06-01T00:00:00Z",
        ["2025-06-06T00:00:00Z", "2025-06-13T00:00:00Z", "2025-06-20T00:00:00Z"],
    ),
    "day-of-month starting with * : both must match (Vixie)": (
        "0 0 */10 * mon",
        "2025-01-01T00:00:00Z",
        ["2025-03-31T00:00:00Z", "2025-04-21T00:00:00Z"],
    ),
    "value with a step runs to the field's end": (
        "50/5 10 * * *",
        "2025-01-01T00:00:00Z",
        ["2025-01-01T10:50:00Z", "2025-01-01T10:55:00Z", "2025-01-02T10:50:00Z"],
    ),
    "weekly several days": (
        {"type": "weekly", "days": ["FRI", "mon"], "at": "08:00"},
        "2025-01-01T00:00:00Z",
        ["2025-01-03T08:00:00Z", "2025-01-06T08:00:00Z", "2025-01-10T08:00:00Z"],
    ),
}


@pytest.mark.parametrize(
    ("raw", "now", "expected"), CALENDAR_CASES.values(), ids=CALENDAR_CASES.keys()
)
def test_fire_times_on_the_calendar(raw: dict | str, now: str, expected: list[str]) -> None:
    assert upcoming(raw, now, len(expected)) == expected


def test_fixed_and_wildcard_hours_are_told_apart() -> None:
    for expression in ("* * * * *", "*/15 * * * *", "0 * * * *", "0 */2 * * *", "5 0-23 * * *"):
        assert not parse_cron(expression).fixed_time, expression
    for expression in ("0 2 * * *", "* 2 * * *", "0 1-3 * * *", "0 0,12 * * *", "@daily"):
        assert parse_cron(expression).fixed_time, expression


def test_naive_times_are_local_to_the_schedule_zone() -> None:
    # 02:30 does not exist in Berlin on 30 March 2025: it means the gap's end, 03:00 CEST.
    schedule = normalize(
        {"type": "daily", "at": "09:00", "timezone": BERLIN, "start_at": "2025-03-30T02:30"},
        now=NOW,
    )
    assert schedule["start_at"] == "2025-03-30T01:00:00Z"
    once = normalize({"type": "once", "run_at": "2025-11-02T01:30", "timezone": NEW_YORK}, now=NOW)
    # The first of the two 01:30s; the zone kept for the words and round trips.
    assert once == {"type": "once", "run_at": "2025-11-02T05:30:00Z", "timezone": NEW_YORK}


def test_first_instant_at_or_after() -> None:
    zone = ZoneInfo(LORD_HOWE)
    assert iso(first_instant_at_or_after(datetime(2025, 10, 5, 2, 10), zone)) == (
        "2025-10-04T15:30:00Z"
    )
    assert iso(first_instant_at_or_after(datetime(2025, 4, 6, 1, 40), zone)) == (
        "2025-04-05T14:40:00Z"
    )


# --- normalize: canonical form and defaults ----------------------------------------------


RECURRING_DEFAULTS = {
    "timezone": "UTC",
    "start_at": None,
    "end_at": None,
    "max_runs": None,
    "jitter": 0,
    "misfire": "run_once",
    "misfire_grace": None,
    "overlap": "allow",
}


@pytest.mark.parametrize("raw", [None, {}, "", "   "])
def test_empty_schedule_is_once_now(raw: dict | str | None) -> None:
    assert normalize(raw, now=NOW) == {"type": "once", "run_at": "2025-01-01T12:00:00Z"}


def test_once_forms() -> None:
    assert normalize({"type": "once", "delay": 90}, now=NOW)["run_at"] == "2025-01-01T12:01:30Z"
    assert normalize({"type": "once", "delay": "0.5"}, now=NOW)["run_at"] == (
        "2025-01-01T12:00:00.500000Z"
    )
    past = normalize({"type": "once", "run_at": "2020-01-01T00:00:00+02:00"}, now=NOW)
    assert past == {"type": "once", "run_at": "2019-12-31T22:00:00Z"}
    assert normalize({"type": "once"}, now=NOW)["run_at"] == "2025-01-01T12:00:00Z"


def test_bare_string_is_a_cron_expression_with_defaults() -> None:
    schedule = normalize("  */5   * * * *  ", now=NOW)
    assert schedule == {
        "type": "cron",
        "expression": "*/5 * * * *",
        **RECURRING_DEFAULTS,
        "anchor": "2025-01-01T12:00:00Z",
    }


def test_recurring_fields_are_canonical() -> None:
    now = NOW.replace(microsecond=123456)
    schedule = normalize(
        {
            "type": "weekly",
            "days": ["Friday", "MON", "mon"],
            "at": "9:05",
            "timezone": "europe/berlin",
            "max_runs": 10.0,
            "jitter": "2.5",
            "misfire": "RUN_ALL",
            "overlap": "cancel_previous",
        },
        now=now,
    )
    assert schedule == {
        "type": "weekly",
        "days": ["mon", "fri"],
        "at": "09:05:00",
        **RECURRING_DEFAULTS,
        "timezone": BERLIN,
        "max_runs": 10,
        "jitter": 2.5,
        "misfire": "run_all",
        "overlap": "cancel_previous",
        "anchor": "2025-01-01T12:00:00Z",
    }
    json.dumps(schedule)


def test_interval_anchor_and_start_at() -> None:
    anchored = normalize({"type": "interval", "every": 60.0}, now=NOW.replace(microsecond=7))
    assert anchored["every"] == 60 and anchored["anchor"] == "2025-01-01T12:00:00Z"
    assert [iso(t) for t in islice(fire_times(anchored, after=None), 2)] == [
        "2025-01-01T12:01:00Z",
        "2025-01-01T12:02:00Z",
    ]
    started = normalize(
        {"type": "interval", "every": 3600, "start_at": "2025-02-01T00:00:00Z"}, now=NOW
    )
    assert started["anchor"] is None
    assert iso(next(fire_times(started, after=None))) == "2025-02-01T00:00:00Z"
    # Phase is kept from start_at whatever `after` is.
    after = utc("2025-02-01T05:30:00Z")
    assert iso(next(fire_times(started, after=after))) == "2025-02-01T06:00:00Z"
    assert iso(next(fire_times(started, after=utc("2025-02-01T06:00:00Z")))) == (
        "2025-02-01T07:00:00Z"
    )


def test_normalize_is_idempotent_and_keeps_the_anchor() -> None:
    for raw in (
        {"type": "interval", "every": 45},
        {"type": "monthly", "day": -1, "at": "12:00", "timezone": LORD_HOWE, "jitter": 3},
        "0 9 * * mon-fri",
        {"type": "once", "delay": 30},
    ):
        first = normalize(raw, now=NOW)
        assert normalize(first, now=NOW + timedelta(days=3)) == first


# --- bounds and the meaning of `after` ----------------------------------------------------


def test_start_at_is_inclusive_and_end_at_is_inclusive() -> None:
    schedule = normalize(
        {
            "type": "daily",
            "at": "09:00",
            "start_at": "2025-03-01T09:00:00Z",
            "end_at": "2025-03-03T09:00:00Z",
        },
        now=NOW,
    )
    assert [iso(t) for t in fire_times(schedule, after=None)] == [
        "2025-03-01T09:00:00Z",
        "2025-03-02T09:00:00Z",
        "2025-03-03T09:00:00Z",
    ]
    assert [iso(t) for t in fire_times(schedule, after=utc("2025-03-02T09:00:00Z"))] == [
        "2025-03-03T09:00:00Z"
    ]


def test_interval_stops_at_end_at() -> None:
    schedule = normalize(
        {"type": "interval", "every": 600, "end_at": "2025-01-01T12:35:00Z"}, now=NOW
    )
    assert [iso(t) for t in fire_times(schedule, after=None)] == [
        "2025-01-01T12:10:00Z",
        "2025-01-01T12:20:00Z",
        "2025-01-01T12:30:00Z",
    ]


def test_without_start_at_the_schedule_begins_after_its_anchor() -> None:
    schedule = normalize({"type": "daily", "at": "12:00"}, now=NOW)  # anchored exactly at 12:00
    assert iso(next(fire_times(schedule, after=None))) == "2025-01-02T12:00:00Z"
    # An earlier `after` does not reach back before the schedule existed.
    assert iso(next(fire_times(schedule, after=utc("2024-01-01T00:00:00Z")))) == (
        "2025-01-02T12:00:00Z"
    )


def test_once_fire_times() -> None:
    schedule = normalize({"type": "once", "run_at": "2025-05-05T05:05:05Z"}, now=NOW)
    assert list(fire_times(schedule, after=None)) == [utc("2025-05-05T05:05:05Z")]
    assert list(fire_times(schedule, after=utc("2025-05-05T05:05:04Z"))) == [
        utc("2025-05-05T05:05:05Z")
    ]
    assert list(fire_times(schedule, after=utc("2025-05-05T05:05:05Z"))) == []


def test_preview_starts_at_a_future_start_at_across_dst() -> None:
    raw = {"type": "cron", "expression": "30 2 * * *", "timezone": BERLIN}
    schedule = normalize({**raw, "start_at": "2026-03-28T00:00:00Z"}, now=NOW)
    assert [iso(t) for t in preview(schedule, now=NOW, count=3)] == [
        "2026-03-28T01:30:00Z",
        "2026-03-29T01:00:00Z",  # 29 March 2026: spring forward in Berlin
        "2026-03-30T00:30:00Z",
    ]
    assert preview(schedule, now=NOW, count=0) == []


def test_preview_of_a_past_once_shows_its_run_at() -> None:
    schedule = normalize({"type": "once", "run_at": "2024-06-01T00:00:00Z"}, now=NOW)
    assert preview(schedule, now=NOW, count=5) == [utc("2024-06-01T00:00:00Z")]


# --- validation -----------------------------------------------------------------------------

D = {"type": "daily", "at": "09:00"}
BAD_SCHEDULES = [
    ([], "non_field_errors"),
    (42, "non_field_errors"),
    (True, "non_field_errors"),
    ({"every": 5}, "type"),
    ({"type": "hourly"}, "type"),
    ({"type": 5}, "type"),
    ({"type": "once", "run_at": "tomorrow"}, "run_at"),
    ({"type": "once", "run_at": 1700000000}, "run_at"),
    ({"type": "once", "run_at": "9999-12-31T23:00:00-05:00"}, "run_at"),
    ({"type": "once", "run_at": "1066-10-14T09:00:00Z"}, "run_at"),
    ({"type": "once", "delay": -1}, "delay"),
    ({"type": "once", "delay": True}, "delay"),
    ({"type": "once", "delay": float("nan")}, "delay"),
    ({"type": "once", "delay": float("inf")}, "delay"),
    ({"type": "once", "delay": "NaN"}, "delay"),
    ({"type": "once", "delay": "1e400"}, "delay"),
    ({"type": "once", "delay": 10**12}, "delay"),
    ({"type": "once", "delay": 10**400}, "delay"),
    ({"type": "once", "delay": [5]}, "delay"),
    ({"type": "once", "delay": 5, "run_at": "2025-01-01T00:00:00Z"}, "delay"),
    ({"type": "once", "every": 5}, "every"),
    ({"type": "once", "max_runs": 5}, "max_runs"),
    ({"type": "interval"}, "every"),
    ({"type": "interval", "every": 0}, "every"),
    ({"type": "interval", "every": 0.5}, "every"),
    ({"type": "interval", "every": 1.5}, "every"),
    ({"type": "interval", "every": True}, "every"),
    ({"type": "interval", "every": "sixty"}, "every"),
    ({"type": "interval", "every": 11 * 365 * 86400}, "every"),
    ({"type": "interval", "every": 1e308}, "every"),
    ({"type": "interval", "every": 60, "timezone": "Mars/Olympus_Mons"}, "timezone"),
    ({"type": "interval", "every": 60, "timezone": 1}, "timezone"),
    ({"type": "interval", "every": 60, "timezone": "localtime"}, "timezone"),
    ({"type": "interval", "every": 60, "timezone": "../../etc/passwd"}, "timezone"),
    ({"type": "daily"}, "at"),
    ({**D, "at": "24:00"}, "at"),
    ({**D, "at": "09:60"}, "at"),
    ({**D, "at": "09:00:60"}, "at"),
    ({**D, "at": "9"}, "at"),
    ({**D, "at": "noon"}, "at"),
    ({**D, "at": 930}, "at"),
    ({**D, "at": "09:00 "}, None),  # surrounding space is tolerated: not an error
    ({"type": "weekly", "at": "09:00"}, "days"),
    ({"type": "weekly", "at": "09:00", "days": []}, "days"),
    ({"type": "weekly", "at": "09:00", "days": ["funday"]}, "days"),
    ({"type": "weekly", "at": "09:00", "days": [1]}, "days"),
    ({"type": "weekly", "at": "09:00", "days": {"mon": True}}, "days"),
    ({"type": "monthly", "at": "09:00"}, "day"),
    ({"type": "monthly", "at": "09:00", "day": 0}, "day"),
    ({"type": "monthly", "at": "09:00", "day": 32}, "day"),
    ({"type": "monthly", "at": "09:00", "day": -2}, "day"),
    ({"type": "monthly", "at": "09:00", "day": 1.5}, "day"),
    ({"type": "monthly", "at": "09:00", "day": True}, "day"),
    ({"type": "cron"}, "expression"),
    ({"type": "cron", "expression": ""}, "expression"),
    ({"type": "cron", "expression": ["* * * * *"]}, "expression"),
    ("* * *", "expression"),
    ("* * * * * * *", "expression"),
    ("61 * * * *", "expression"),
    ("* 24 * * *", "expression"),
    ("* * 0 * *", "expression"),
    ("* * * 13 *", "expression"),
    ("* * * * 8", "expression"),
    ("5-1 * * * *", "expression"),
    ("*/0 * * * *", "expression"),
    ("1-2-3 * * * *", "expression"),
    ("* * * * mon#2", "expression"),
    ("? * * * *", "expression"),
    ("60 * * * * *", "expression"),  # 6 fields: the seconds field is out of range
    ("@reboot", "expression"),
    ("0 0 30 2 *", "expression"),  # never fires
    ("0 0 31 4,6,9,11 *", "expression"),
    ("* " * 200, "expression"),
    ({**D, "max_runs": 0}, "max_runs"),
    ({**D, "max_runs": 1.5}, "max_runs"),
    ({**D, "max_runs": True}, "max_runs"),
    ({**D, "max_runs": 10**12}, "max_runs"),
    ({**D, "jitter": -1}, "jitter"),
    ({**D, "jitter": False}, "jitter"),
    ({**D, "jitter": float("nan")}, "jitter"),
    ({**D, "jitter": 10**9}, "jitter"),
    ({**D, "misfire": "sometimes"}, "misfire"),
    ({**D, "overlap": "queue"}, "overlap"),
    ({**D, "overlap": None}, "overlap"),
    ({**D, "start_at": "garbage"}, "start_at"),
    ({**D, "start_at": "2025-02-01T00:00:00Z", "end_at": "2025-01-01T00:00:00Z"}, "end_at"),
    ({**D, "start_at": "2025-02-01T00:00:00Z", "end_at": "2025-02-01T00:00:00Z"}, "end_at"),
    ({**D, "start_at": "2025-02-01T10:00:00Z", "end_at": "2025-02-01T12:00:00Z"}, "end_at"),
    ({**D, "end_at": "2024-01-01T00:00:00Z"}, "end_at"),  # already over
    ({**D, "foo": 1}, "foo"),
    ({**D, "delay": 1}, "delay"),
    ({"type": "interval", "every": 60, "at": "09:00"}, "at"),
]


@pytest.mark.parametrize(("raw", "field"), BAD_SCHEDULES, ids=[repr(b)[:60] for b in BAD_SCHEDULES])
def test_invalid_schedules_name_the_field(raw: object, field: str | None) -> None:
    if field is None:
        normalize(raw, now=NOW)  # type: ignore[arg-type]
        return
    with pytest.raises(ScheduleError) as caught:
        normalize(raw, now=NOW)  # type: ignore[arg-type]
    assert field in caught.value.errors, caught.value.errors
    assert all(
        msgs and all(isinstance(m, str) and m for m in msgs)
        for msgs in caught.value.errors.values()
    )
    assert isinstance(caught.value, ValueError)


def test_several_errors_are_reported_together() -> None:
    with pytest.raises(ScheduleError) as caught:
        normalize({"type": "weekly", "days": ["x"], "at": "99:99", "jitter": -5}, now=NOW)
    assert set(caught.value.errors) == {"days", "at", "jitter"}


# --- jitter ---------------------------------------------------------------------------------


def test_jitter_is_deterministic_and_within_bounds() -> None:
    schedule = normalize({**D, "jitter": 30}, now=NOW)
    offsets = [
        jitter_offset(schedule, key=f"task-1:2025-01-{day:02d}T09:00:00Z") for day in range(1, 29)
    ]
    offsets += [jitter_offset(schedule, key=f"task-{n}:x") for n in range(1000)]
    assert all(0 <= offset < 30 for offset in offsets)
    assert min(offsets) < 3 and max(offsets) > 27  # spread over the whole window
    key = "task-1:2025-01-01T09:00:00Z"
    assert jitter_offset(schedule, key=key) == jitter_offset(dict(schedule), key=key)
    assert jitter_offset(schedule, key=key) != jitter_offset(schedule, key=key + "x")


def test_jitter_is_zero_when_absent() -> None:
    assert jitter_offset(normalize(D, now=NOW), key="a") == 0.0
    assert jitter_offset(normalize(None, now=NOW), key="a") == 0.0
    assert jitter_offset({"type": "daily", "jitter": 0.001}, key="a") < 0.001


# --- speed ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "count"),
    [("* * * * * *", 1000), ("*/5 * * * *", 1000), ("0 0 29 2 *", 5), ("0 0 29 2 */7", 2)],
)
def test_iteration_is_fast(expression: str, count: int) -> None:
    raw = {
        "type": "cron",
        "expression": expression,
        "timezone": NEW_YORK,
        "allow_every_second": True,
    }
    schedule = normalize(raw, now=NOW)
    started = clock.perf_counter()
    times = list(islice(fire_times(schedule, after=NOW), count))
    assert len(times) == count
    assert clock.perf_counter() - started < 0.25


# --- properties -----------------------------------------------------------------------------

DST_ZONES = [
    BERLIN,
    NEW_YORK,
    LORD_HOWE,
    "America/Sao_Paulo",  # transitions at midnight until 2019
    "America/Santiago",
    "America/Havana",
    "Africa/Cairo",
    "Pacific/Chatham",
    "Asia/Tehran",
    "Europe/London",
]
_times_of_day = st.builds(
    lambda h, m, s: f"{h:02d}:{m:02d}:{s:02d}",
    st.integers(0, 23),
    st.integers(0, 59),
    st.sampled_from([0, 0, 30, 59]),
)
_cron_expressions = st.builds(
    " ".join,
    st.tuples(
        st.sampled_from(["0", "30", "*/15", "0,30", "5-10", "*/7", "*", "59"]),
        st.sampled_from(["*", "*/2", "*/6", "0-23", "0", "1", "2", "1,2,3", "0-4", "23", "12"]),
        st.sampled_from(["*", "1", "15", "31", "L", "*/3", "1-7", "29"]),
        st.sampled_from(["*", "3", "10", "3,4,10,11", "*/2", "2"]),
        st.sampled_from(["*", "0", "mon-fri", "sun", "6"]),
    ),
)
_instants = st.datetimes(
    min_value=datetime(1995, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC)
)


@st.composite
def valid_schedules(draw: st.DrawFn) -> dict:
    kind = draw(st.sampled_from(["interval", "daily", "weekly", "monthly", "cron", "cron"]))
    raw: dict = {"type": kind, "timezone": draw(st.sampled_from(ZONES))}
    if kind == "interval":
        raw["every"] = draw(st.integers(1, 40 * 86400))
    if kind in ("daily", "weekly", "monthly"):
        raw["at"] = draw(_times_of_day)
    if kind == "weekly":
        days = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
        raw["days"] = draw(st.lists(st.sampled_from(days), min_size=1, max_size=7))
    if kind == "monthly":
        raw["day"] = draw(st.sampled_from([-1, 1, 15, 28, 29, 30, 31]))
    if kind == "cron":
        raw["expression"] = draw(_cron_expressions)
    if draw(st.booleans()):
        raw["start_at"] = iso(draw(_instants))
    return raw


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=valid_schedules(), now=_instants, after=_instants)
def test_fire_times_strictly_increase(raw: dict, now: datetime, after: datetime) -> None:
    try:
        schedule = normalize(raw, now=now)
    except ScheduleError:
        assume(False)
    times = list(islice(fire_times(schedule, after=after), 40))
    assert all(t.tzinfo is not None and t.utcoffset() == timedelta(0) for t in times)
    assert all(a < b for a, b in pairwise(times))
    assert all(t > after for t in times)
    if schedule["start_at"]:
        assert all(t >= utc(schedule["start_at"]) for t in times)


@settings(max_examples=60, deadline=None)
@given(zone=st.sampled_from(ZONES), at=_times_of_day, year=st.integers(2013, 2037))
@example(zone="America/Scoresbysund", at="23:00:00", year=2025)
def test_daily_fires_once_per_local_day(zone: str, at: str, year: int) -> None:
    # From 2013 on no zone skips a whole calendar day (Samoa skipped 30 December 2011).
    start, end = date(year, 1, 1), date(year + 1, 1, 1)
    schedule = normalize(
        {
            "type": "daily",
            "at": at,
            "timezone": zone,
            "start_at": f"{start}T00:00:00",
            "end_at": f"{end}T00:00:00",
        },
        now=datetime.combine(start, time(), UTC),  # a window wholly in the past is refused
    )
    tz = ZoneInfo(zone)
    local = [t.astimezone(tz) for t in fire_times(schedule, after=None)]
    if at == "00:00:00":
        local = local[:-1]  # end_at is inclusive: it is itself an occurrence
    days = [start + timedelta(days=n) for n in range((end - start).days)]
    assert len(local) == len(days)
    wall = time.fromisoformat(at)
    for day, fired in zip(days, local, strict=True):
        if fired.date() != day:
            # A gap that crosses midnight (America/Scoresbysund, 29 March 2025 at 23:00) moves
            # that day's time to the end of the gap, on the next local date: still once per day.
            intended = datetime.combine(day, wall, tz)
            assert intended.astimezone(UTC).astimezone(tz).replace(tzinfo=None) != (
                intended.replace(tzinfo=None)
            ), f"{zone}: {day} {at} exists but fired on {fired}"
            assert fired.date() == day + timedelta(days=1)


TRANSITION_DAYS = [
    (BERLIN, date(2025, 3, 30)),
    (BERLIN, date(2025, 10, 26)),
    (NEW_YORK, date(2025, 3, 9)),
    (NEW_YORK, date(2025, 11, 2)),
    (LORD_HOWE, date(2025, 4, 6)),
    (LORD_HOWE, date(2025, 10, 5)),
    ("America/Sao_Paulo", date(2018, 11, 4)),
    ("America/Sao_Paulo", date(2019, 2, 17)),
    ("America/Havana", date(2025, 3, 9)),
    ("America/Santiago", date(2025, 4, 6)),
    ("Africa/Cairo", date(2025, 4, 25)),
    ("Pacific/Chatham", date(2025, 4, 6)),
]


@settings(max_examples=80, deadline=None)
@given(
    place=st.sampled_from(TRANSITION_DAYS),
    expression=_cron_expressions,
    shift=st.integers(-36 * 60, 12 * 60),
)
def test_cron_matches_a_brute_force_oracle(
    place: tuple[str, date], expression: str, shift: int
) -> None:
    """Absolute schedules fire at every real minute whose local time matches; fixed-time ones
    at first_instant_at_or_after of every matching local wall time."""
    zone_name, day = place
    zone, spec = ZoneInfo(zone_name), parse_cron(expression)
    assume(spec.can_fire())
    after = datetime.combine(day, datetime.min.time(), UTC) + timedelta(minutes=shift)
    until = after + timedelta(days=2)
    schedule = normalize(
        {"type": "cron", "expression": expression, "timezone": zone_name}, now=after
    )
    schedule["end_at"] = iso(until)  # set afterwards: normalize rejects an empty window
    got = list(fire_times(schedule, after=after))
    expected: set[datetime] = set()
    if spec.fixed_time:
        local = after.astimezone(zone).date() - timedelta(days=1)
        for n in range(5):
            current = local + timedelta(days=n)
            if not spec.day_matches(current):
                continue
            for h in spec.hours:
                for m in spec.minutes:
                    wall = datetime(current.year, current.month, current.day, h, m)
                    expected.add(first_instant_at_or_after(wall, zone))
    else:
        minute = after.replace(second=0) + timedelta(minutes=1)
        while minute <= until:
            local = minute.astimezone(zone)
            if (
                local.minute in spec.minutes
                and local.hour in spec.hours
                and local.second in spec.seconds
                and spec.day_matches(local.date())
            ):
                expected.add(minute)
            minute += timedelta(minutes=1)
    assert got == sorted(t for t in expected if after < t <= until)


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=30)
    | st.sampled_from(["2025-01-01T00:00:00Z", "09:00", "mon", "*/5 * * * *", "-1", "1e999"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children),
    max_leaves=12,
)
_FIELDS = [
    "type",
    "run_at",
    "delay",
    "every",
    "at",
    "days",
    "day",
    "expression",
    "timezone",
    "start_at",
    "end_at",
    "max_runs",
    "jitter",
    "misfire",
    "overlap",
    "anchor",
]
_schedule_like = st.dictionaries(
    st.sampled_from(_FIELDS),
    _json
    | st.sampled_from(["once", "interval", "daily", "weekly", "monthly", "cron"])
    | st.sampled_from(DST_ZONES),
    max_size=6,
)


@settings(max_examples=400, deadline=None)
@given(raw=_json | _schedule_like | st.text(max_size=40), now=_instants)
def test_normalize_accepts_or_raises_schedule_error(raw: object, now: datetime) -> None:
    try:
        schedule = normalize(raw, now=now)  # type: ignore[arg-type]
    except ScheduleError as exc:
        assert exc.errors and all(isinstance(key, str) for key in exc.errors)
        return
    assert isinstance(schedule, dict)
    json.dumps(schedule, allow_nan=False)
    assert normalize(schedule, now=now + timedelta(hours=1)) == schedule
    preview(schedule, now=now, count=3)
