"""RFC 5545 rules: each part validated with an error naming it, and fire times equal to
dateutil's own expansion mapped by the DST contract (gap: first instant after; fold: once)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice
from zoneinfo import ZoneInfo

import pytest
from dateutil import rrule as du
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tasks.schedule_rrule import RuleError, parse
from tasks.schedules import ScheduleError, fire_times, normalize, preview

NOW = datetime(2026, 1, 1, tzinfo=UTC)
BERLIN, LORD_HOWE = "Europe/Berlin", "Australia/Lord_Howe"


def times(raw: dict, count: int, now: datetime = NOW) -> list[str]:
    found = preview(normalize(raw, now=now), now=now, count=count)
    return [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in found]


def test_last_friday_at_17_in_berlin_across_the_spring_change() -> None:
    raw = {
        "type": "rrule",
        "rule": "FREQ=MONTHLY;BYDAY=FR;BYSETPOS=-1;BYHOUR=17",
        "timezone": BERLIN,
    }
    # CET (UTC+1) until 29 March 2026, CEST (UTC+2) after: 17:00 local is 16:00, then 15:00 UTC.
    assert times(raw, 4) == [
        "2026-01-30T16:00:00Z",
        "2026-02-27T16:00:00Z",
        "2026-03-27T16:00:00Z",
        "2026-04-24T15:00:00Z",
    ]


def test_a_time_in_the_gap_runs_at_its_end_and_a_fold_once() -> None:
    gap = {"type": "rrule", "rule": "FREQ=DAILY;BYHOUR=2;BYMINUTE=0,30", "timezone": BERLIN}
    start = datetime(2026, 3, 28, 12, tzinfo=UTC)
    # 29 March: 02:00 and 02:30 do not exist; both mean 03:00 CEST (01:00 UTC), once.
    assert times(gap, 4, start) == [
        "2026-03-29T01:00:00Z",
        "2026-03-30T00:00:00Z",
        "2026-03-30T00:30:00Z",
        "2026-03-31T00:00:00Z",
    ]
    fold = {"type": "rrule", "rule": "FREQ=DAILY;BYHOUR=2;BYMINUTE=30", "timezone": BERLIN}
    start = datetime(2026, 10, 24, 12, tzinfo=UTC)
    # 25 October: 02:30 happens twice (CEST, then CET); it runs at the first only.
    assert times(fold, 3, start) == [
        "2026-10-25T00:30:00Z",
        "2026-10-26T01:30:00Z",
        "2026-10-27T01:30:00Z",
    ]


def test_count_until_exdates_and_start_at() -> None:
    base = {"type": "rrule", "timezone": BERLIN, "start_at": "2026-02-02T09:00:00"}
    weekly = {**base, "rule": "FREQ=WEEKLY;BYDAY=MO;COUNT=3"}
    assert times(weekly, 10) == [
        "2026-02-02T08:00:00Z",
        "2026-02-09T08:00:00Z",
        "2026-02-16T08:00:00Z",
    ]
    until = {**base, "rule": "FREQ=WEEKLY;BYDAY=MO;UNTIL=20260209"}
    assert times(until, 10) == ["2026-02-02T08:00:00Z", "2026-02-09T08:00:00Z"]
    excluded = {**weekly, "exdates": ["2026-02-09", "2026-02-16T09:00:00"]}
    assert times(excluded, 10) == ["2026-02-02T08:00:00Z"]
    assert normalize(excluded, now=NOW)["exdates"] == ["2026-02-09", "2026-02-16T08:00:00Z"]


def test_rule_is_stored_canonical_and_round_trips() -> None:
    raw = {"type": "rrule", "rule": "RRULE:byday=-1fr;freq=monthly;byhour=17"}
    stored = normalize(raw, now=NOW)
    assert stored["rule"] == "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17"
    assert normalize(stored, now=NOW + timedelta(days=3)) == stored


def test_rule_without_time_parts_fires_at_local_midnight() -> None:
    raw = {"type": "rrule", "rule": "FREQ=DAILY", "timezone": BERLIN}
    assert times(raw, 2, datetime(2026, 1, 1, 10, 17, tzinfo=UTC)) == [
        "2026-01-01T23:00:00Z",
        "2026-01-02T23:00:00Z",
    ]


@pytest.mark.parametrize(
    ("rule", "part"),
    [
        ("BYDAY=MO", "rule.FREQ"),
        ("FREQ=FORTNIGHTLY", "rule.FREQ"),
        ("FREQ=DAILY;INTERVAL=0", "rule.INTERVAL"),
        ("FREQ=DAILY;COUNT=100001", "rule.COUNT"),
        ("FREQ=DAILY;COUNT=2;UNTIL=20300101", "rule.UNTIL"),
        ("FREQ=DAILY;UNTIL=2030-01-01", "rule.UNTIL"),
        ("FREQ=WEEKLY;WKST=XX", "rule.WKST"),
        ("FREQ=YEARLY;BYMONTH=13", "rule.BYMONTH"),
        ("FREQ=MONTHLY;BYWEEKNO=3", "rule.BYWEEKNO"),
        ("FREQ=MONTHLY;BYYEARDAY=3", "rule.BYYEARDAY"),
        ("FREQ=MONTHLY;BYMONTHDAY=0", "rule.BYMONTHDAY"),
        ("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", "rule.BYMONTHDAY"),
        ("FREQ=WEEKLY;BYDAY=1MO", "rule.BYDAY"),
        ("FREQ=MONTHLY;BYDAY=6MO", "rule.BYDAY"),
        ("FREQ=MONTHLY;BYDAY=FRIDAY", "rule.BYDAY"),
        ("FREQ=DAILY;BYHOUR=24", "rule.BYHOUR"),
        ("FREQ=DAILY;BYMINUTE=60", "rule.BYMINUTE"),
        ("FREQ=DAILY;BYSECOND=60", "rule.BYSECOND"),
        ("FREQ=MONTHLY;BYSETPOS=-1", "rule.BYSETPOS"),
        ("FREQ=MONTHLY;BYDAY=FR;BYSETPOS=0", "rule.BYSETPOS"),
        ("FREQ=MONTHLY;BYDAY=FR;BYSETPOS=32", "rule.BYSETPOS"),
        ("FREQ=MONTHLY;BYDAY=2MO;BYSETPOS=2", "rule.BYSETPOS"),
        ("FREQ=DAILY;BYEASTER=0", "rule.BYEASTER"),
        ("FREQ=DAILY;FREQ=DAILY", "rule.FREQ"),
        ("FREQ", "rule"),
    ],
)
def test_each_bad_part_is_named(rule: str, part: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        normalize({"type": "rrule", "rule": rule}, now=NOW)
    assert part in caught.value.errors, caught.value.errors


def test_a_rule_that_ended_is_refused_on_its_count() -> None:
    raw = {"type": "rrule", "rule": "FREQ=DAILY;COUNT=2", "start_at": "2020-01-01T00:00:00Z"}
    with pytest.raises(ScheduleError) as caught:
        normalize(raw, now=NOW)
    assert "rule.COUNT" in caught.value.errors


def test_bad_exdates_are_named_by_index() -> None:
    raw = {"type": "rrule", "rule": "FREQ=DAILY", "exdates": ["2026-12-24", "2026-02-30", "x"]}
    with pytest.raises(ScheduleError) as caught:
        normalize(raw, now=NOW)
    assert set(caught.value.errors) == {"exdates[1]", "exdates[2]"}


def test_a_far_start_is_expanded_quickly_and_exactly() -> None:
    # Without COUNT the rule restarts a whole number of periods before `after`: a minutely rule
    # defined in 2000 still answers for 2026 exactly as the full expansion would.
    raw = {"type": "rrule", "rule": "FREQ=MINUTELY;INTERVAL=7", "start_at": "2000-01-01T00:00:00Z"}
    schedule = normalize(raw, now=NOW)
    after = datetime(2026, 6, 1, 12, tzinfo=UTC)
    got = list(islice(fire_times(schedule, after=after), 3))
    step = timedelta(minutes=7)
    origin = datetime(2000, 1, 1, tzinfo=UTC)
    first = origin + ((after - origin) // step + 1) * step
    assert got == [first, first + step, first + 2 * step]


# --- the property: equal to dateutil's own expansion, mapped by a brute-force DST oracle ------


def oracle_instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """What a wall reading means, found by brute force: the first instant whose local reading
    is at or after it (a fold's first instant, a gap's end), scanning minute by minute."""
    first = wall.replace(tzinfo=zone, fold=0)
    if first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall:
        return first.astimezone(UTC)
    instant = (wall - timedelta(hours=3)).replace(tzinfo=zone).astimezone(UTC)
    instant = instant.replace(second=0)
    while instant.astimezone(zone).replace(tzinfo=None) < wall:
        instant += timedelta(minutes=1)
    return instant


def _sub(values: list, *, min_size: int = 1, max_size: int = 3):
    return st.lists(st.sampled_from(values), min_size=min_size, max_size=max_size, unique=True)


@st.composite
def rules(draw) -> str:
    freq = draw(st.sampled_from(["HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY"]))
    parts = [f"FREQ={freq}"]
    if draw(st.booleans()):
        parts.append(f"INTERVAL={draw(st.integers(1, 3))}")
    if freq == "YEARLY":
        parts.append("BYMONTH=" + ",".join(map(str, sorted(draw(_sub([3, 4, 9, 10, 11]))))))
    if freq in ("WEEKLY", "MONTHLY", "YEARLY") or draw(st.booleans()):
        days = draw(_sub(["MO", "TU", "WE", "TH", "FR", "SA", "SU"]))
        if freq == "MONTHLY" and draw(st.booleans()):
            days = [f"{draw(st.sampled_from([1, 2, -1]))}{days[0]}"]
        parts.append("BYDAY=" + ",".join(days))
    if freq != "HOURLY":
        parts.append("BYHOUR=" + ",".join(map(str, sorted(draw(_sub([0, 1, 2, 3, 12]))))))
    parts.append("BYMINUTE=" + ",".join(map(str, sorted(draw(_sub([0, 15, 30, 45]))))))
    if freq in ("MONTHLY", "YEARLY") and draw(st.booleans()):
        parts.append(f"BYSETPOS={draw(st.sampled_from([1, 2, -1]))}")
    return ";".join(parts)


ZONES_WITH_CHANGES = [BERLIN, LORD_HOWE, "America/New_York", "America/Havana", "Asia/Tehran"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rule=rules(),
    zone=st.sampled_from(ZONES_WITH_CHANGES),
    start=st.datetimes(datetime(2023, 1, 1), datetime(2026, 12, 31)).map(
        lambda d: d.replace(second=0, microsecond=0)
    ),
    skip=st.integers(0, 400),
)
def test_fire_times_equal_dateutils_expansion(
    rule: str, zone: str, start: datetime, skip: int
) -> None:
    try:
        parse(rule)
    except RuleError:
        assume(False)
    tz = ZoneInfo(zone)
    schedule = normalize(
        {"type": "rrule", "rule": rule, "timezone": zone, "start_at": start.isoformat()},
        now=datetime(2022, 1, 1, tzinfo=UTC),
    )
    begin = oracle_instant(start, tz)
    expected: list[datetime] = []
    for wall in islice(du.rrulestr(rule, dtstart=start), 200):
        instant = oracle_instant(wall, tz)
        if instant >= begin and (not expected or instant > expected[-1]):
            expected.append(instant)
    expected = expected[:60]
    assume(expected)
    assert list(islice(fire_times(schedule, after=None), len(expected))) == expected
    # From any later point, as the planner asks: the same times, without the earlier ones.
    after = expected[min(skip, len(expected) - 1)] - timedelta(seconds=1)
    later = [t for t in expected if t > after]
    assert list(islice(fire_times(schedule, after=after), len(later))) == later
