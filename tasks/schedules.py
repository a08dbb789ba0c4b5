"""Schedule maths: validate a schedule, compute its fire times; pure, time is a parameter.

Reading each field of a raw schedule is tasks/schedule_fields.py; cron parsing and local-time
iteration are tasks/schedule_cron.py.

`normalize` turns what a client sent into a canonical JSON dict; `fire_times`, `preview` and
`jitter_offset` read only that canonical form. Local-time schedules are evaluated in their IANA
zone with the DST rules written in docs/schedules.md and returned as aware UTC datetimes.
"""

from __future__ import annotations

import calendar
import hashlib
import math
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from itertools import islice
from typing import Any
from zoneinfo import ZoneInfo

from tasks import schedule_rrule
from tasks.schedule_cron import CronSpec, cron_times, first_instant_at_or_after, parse_cron
from tasks.schedule_fields import WEEKDAYS, FieldReader

TYPES = ("once", "interval", "daily", "weekly", "monthly", "cron", "rrule")
MISFIRE_POLICIES = ("run_once", "skip", "run_all")
# run_all replays at most this many missed occurrences per catch-up; the rest are recorded skipped.
RUN_ALL_CAP = 100
OVERLAP_POLICIES = ("allow", "skip", "cancel_previous")
# Bounds that keep every value meaningful and every datetime computation inside its range.
MAX_SECONDS = 3653 * 86400  # ten years: the longest `every` and `delay`
MAX_JITTER = 7 * 86400
MAX_RUNS = 1_000_000_000
_SECONDS_RANGE = f"Must be between {{}} and {MAX_SECONDS} seconds (ten years)."
_TYPE_FIELDS: dict[str, tuple[str, ...]] = {
    "once": ("run_at", "delay", "timezone"),
    "interval": ("every", "allow_every_second"),
    "daily": ("at", "business_days_only"),
    "weekly": ("days", "at", "business_days_only"),
    "monthly": ("day", "weekday", "week", "business_day", "at"),
    "cron": ("expression", "allow_every_second"),
    "rrule": ("rule", "exdates", "allow_every_second"),
}
_COMMON_FIELDS: tuple[str, ...] = ("timezone", "start_at", "end_at", "max_runs", "jitter")
_COMMON_FIELDS += ("misfire", "misfire_grace", "overlap", "anchor")  # anchor: for round trips
_COMMON_FIELDS += ("exclude", "exclude_windows")
_TICK = timedelta(microseconds=1)


def misfire_grace(schedule: dict, *, default: float) -> float:
    """Seconds an occurrence may be late before it counts as missed: the schedule's own
    `misfire_grace`, else `default` (TASKS_MISFIRE_GRACE_SECONDS, passed in: no settings here)."""
    grace = schedule.get("misfire_grace")
    return float(default if grace is None else grace)


class ScheduleError(ValueError):
    """An invalid schedule; `errors` maps field names inside the schedule to messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{key}: {' '.join(msgs)}" for key, msgs in errors.items()))


def normalize(raw: dict | str | None, *, now: datetime) -> dict:
    """Validate a schedule as docs/api.md writes it and return its canonical, JSON-ready dict."""
    now = _as_utc(now)
    if raw is None or raw == {} or (isinstance(raw, str) and not raw.strip()):
        return {"type": "once", "run_at": _iso(now)}
    if isinstance(raw, str):
        raw = {"type": "cron", "expression": raw}
    if not isinstance(raw, dict):
        raise ScheduleError(
            {"non_field_errors": ["Expected a schedule object or a cron expression string."]}
        )
    kind = raw.get("type")
    if kind is None:
        raise ScheduleError({"type": ["This field is required."]})
    if not isinstance(kind, str) or kind.strip().lower() not in TYPES:
        raise ScheduleError({"type": [f"Unknown schedule type; use one of {', '.join(TYPES)}."]})
    kind = kind.strip().lower()
    allowed = {"type", *_TYPE_FIELDS[kind], *(() if kind == "once" else _COMMON_FIELDS)}
    message = f"Unknown field; a schedule of type {kind} takes {', '.join(sorted(allowed))}."
    errors: dict[str, list[str]] = {str(key): [message] for key in raw if key not in allowed}
    v = FieldReader(raw, errors)
    zone = v.zone()
    out = _normalize_once(v, zone, now) if kind == "once" else _normalize_recurring(v, zone, now)
    if errors:
        raise ScheduleError(errors)
    if kind != "once" and next(fire_times(out, after=None), None) is None:
        # Parsing passed, so the window between the bounds is what leaves no occurrence.
        field = "end_at" if out["end_at"] is not None else "start_at"
        raise ScheduleError({field: ["The schedule has no fire time within its bounds."]})
    if kind != "once" and next(fire_times(out, after=now - _TICK), None) is None:
        # A window that lies wholly in the past would make a task that never runs.
        if out["end_at"] is None and kind == "rrule":
            part = "rule.COUNT" if ";COUNT=" in out["rule"] else "rule.UNTIL"
            raise ScheduleError({part: ["The rule has no fire time left: it ended in the past."]})
        raise ScheduleError({"end_at": ["The schedule has no fire time left: end_at has passed."]})
    return out


def _normalize_once(v: FieldReader, zone: ZoneInfo, now: datetime) -> dict:
    run_at = v.instant("run_at", zone)
    delay = v.number("delay", minimum=0, maximum=MAX_SECONDS, message=_SECONDS_RANGE.format(0))
    if "run_at" in v.raw and "delay" in v.raw:
        v.error("delay", "Give either run_at or delay, not both.")
    if delay is not None:
        run_at = now + timedelta(seconds=delay)
    out = {"type": "once", "run_at": _iso(run_at or now)}
    if zone.key != "UTC":  # kept when given, for the words (schedule_describe) and round trips
        out["timezone"] = zone.key
    return out


def _normalize_recurring(v: FieldReader, zone: ZoneInfo, now: datetime) -> dict:
    kind = v.raw["type"].strip().lower()
    out: dict[str, Any] = {"type": kind}
    if kind == "interval":
        message = _SECONDS_RANGE.format(1)
        out["every"] = v.number(
            "every", minimum=1, maximum=MAX_SECONDS, integer=True, need=True, message=message
        )
        if out["every"] == 1 and not v.every_second_allowed("every", "every is 1"):
            out["every"] = None
    if kind == "weekly":
        out["days"] = v.days()
    if kind == "monthly":
        out |= v.month_days()
    if kind in ("daily", "weekly", "monthly"):
        out["at"] = v.time_of_day()
    if kind in ("daily", "weekly") and v.flag("business_days_only") is True:
        out["business_days_only"] = True  # kept only when set, like allow_every_second
    if kind == "cron":
        out["expression"] = v.expression()
    if kind == "rrule":
        out["rule"] = v.rule()
        out["exdates"] = v.exdates(zone)
    if v.flag("allow_every_second") is True:  # kept, so the schedule round-trips
        out["allow_every_second"] = True
    start, end = v.instant("start_at", zone), v.instant("end_at", zone)
    if start is not None and end is not None and end <= start:
        v.error("end_at", "Must be later than start_at.")
    anchor = v.instant("anchor", zone) or now.replace(microsecond=0)
    out |= {
        "timezone": zone.key,
        "start_at": _iso(start) if start else None,
        "end_at": _iso(end) if end else None,
        "max_runs": v.number("max_runs", minimum=1, maximum=MAX_RUNS, integer=True),
        "jitter": v.number(
            "jitter", minimum=0, maximum=MAX_JITTER, message=f"Must be 0..{MAX_JITTER} seconds."
        )
        or 0,
        "misfire": v.choice("misfire", MISFIRE_POLICIES),
        # Seconds; null means the deployment's TASKS_MISFIRE_GRACE_SECONDS (see misfire_grace()).
        "misfire_grace": v.number(
            "misfire_grace", minimum=1, maximum=MAX_SECONDS, message=_SECONDS_RANGE.format(1)
        ),
        "overlap": v.choice("overlap", OVERLAP_POLICIES),
        # Without start_at the schedule begins after the moment it was defined.
        "anchor": None if start else _iso(anchor),
    }
    # Kept only when given, like allow_every_second: most schedules have none.
    exclude, windows = v.calendar_ids(), v.windows(zone)
    if exclude:
        out["exclude"] = exclude
    if windows:
        out["exclude_windows"] = windows
    return out


def beginning(schedule: dict) -> datetime | None:
    """Where a recurring schedule begins: its start_at (a fire time from there on), else its
    anchor (fire times strictly after it); fire_times never reaches back before it."""
    return _parse(schedule.get("start_at")) or _parse(schedule.get("anchor"))


def fire_times(
    schedule: dict, *, after: datetime | None, days_off: DaysOff | None = None
) -> Iterator[datetime]:
    """Nominal UTC fire times strictly after `after`, strictly increasing, within the bounds.

    The schedule begins at start_at (inclusive) or, without it, just after its anchor. Neither
    max_runs nor jitter is applied here: the caller counts runs and adds jitter_offset.
    `days_off` says which local dates are holidays (the calendars the schedule names) for the
    business days; without it a business day is Monday to Friday.
    """
    after = _as_utc(after) if after is not None else None
    if schedule["type"] == "once":
        run_at = _parse(schedule["run_at"])
        if run_at is not None and (after is None or run_at > after):
            yield run_at
        return
    start, end = _parse(schedule.get("start_at")), _parse(schedule.get("end_at"))
    anchor = _parse(schedule.get("anchor"))
    floor = start - timedelta(microseconds=1) if start is not None else anchor
    bounds = [t for t in (after, floor) if t is not None]
    if not bounds:
        raise ValueError("A schedule without start_at or anchor needs `after`.")
    lower = max(bounds)
    if schedule["type"] == "interval":
        yield from _interval_times(schedule, start, anchor, lower, end)
        return
    zone = ZoneInfo(schedule.get("timezone") or "UTC")
    if schedule["type"] == "rrule":
        yield from _rrule_times(schedule, zone, start or anchor, lower, end)
        return
    if schedule["type"] == "monthly" and schedule.get("day") is None:
        yield from _relative_month_times(schedule, zone, lower, end, days_off)
        return
    times = cron_times(_spec(schedule), zone, after=lower, until=end)
    if schedule.get("business_days_only"):
        times = (t for t in times if is_business_day(t.astimezone(zone).date(), days_off))
    yield from times


DaysOff = Callable[[date], bool]


def is_business_day(day: date, days_off: DaysOff | None) -> bool:
    """Monday to Friday, and not a day off of the schedule's calendars."""
    return day.weekday() < 5 and not (days_off is not None and days_off(day))


def _relative_month_times(
    schedule: dict, zone: ZoneInfo, lower: datetime, end: datetime | None, days_off: DaysOff | None
) -> Iterator[datetime]:
    """Monthly on the n-th weekday (`weekday`, `week`) or the n-th business day, at `at`."""
    h, m, s = (int(part) for part in schedule["at"].split(":"))
    first = lower.astimezone(zone).date().replace(day=1)
    year, month = first.year, first.month
    if month == 1:  # the previous month: its last days may fall after `lower` in UTC
        year, month = year - 1, 12
    else:
        month -= 1
    while year <= 9998:
        length = calendar.monthrange(year, month)[1]
        days = [date(year, month, d) for d in range(1, length + 1)]
        if schedule.get("business_day") is not None:
            pool, n = [d for d in days if is_business_day(d, days_off)], schedule["business_day"]
        else:
            wanted = WEEKDAYS.index(schedule["weekday"])
            pool, n = [d for d in days if d.weekday() == wanted], schedule["week"]
        if len(pool) >= abs(n):
            day = pool[n - 1 if n > 0 else n]
            at = first_instant_at_or_after(datetime.combine(day, time(h, m, s)), zone)
            if end is not None and at > end:
                return
            if at > lower:
                yield at
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)


def _rrule_times(
    schedule: dict, zone: ZoneInfo, begin: datetime | None, lower: datetime, end: datetime | None
) -> Iterator[datetime]:
    # The rule's DTSTART is start_at's wall reading, or the local midnight of the anchor's day,
    # so the parts a rule leaves out (BYHOUR, BYMINUTE, BYSECOND) default to zero.
    if begin is None:
        raise ValueError("An rrule schedule needs start_at or anchor.")
    wall = begin.astimezone(zone).replace(tzinfo=None)
    if schedule.get("start_at") is None:
        wall = wall.replace(hour=0, minute=0, second=0, microsecond=0)
    rule = schedule_rrule.compiled(schedule["rule"])
    excluded_days, excluded_instants = _exdates(tuple(schedule.get("exdates") or ()))
    for at in schedule_rrule.rule_times(rule, zone, dtstart=wall, after=lower, until=end):
        if at in excluded_instants or at.astimezone(zone).date() in excluded_days:
            continue
        yield at


@lru_cache(maxsize=256)
def _exdates(values: tuple[str, ...]) -> tuple[frozenset[date], frozenset[datetime]]:
    """Canonical exdates: local dates (every occurrence that day) and UTC instants."""
    days = frozenset(date.fromisoformat(v) for v in values if len(v) == 10)
    instants = frozenset(_as_utc(datetime.fromisoformat(v)) for v in values if len(v) != 10)
    return days, instants


def _interval_times(
    schedule: dict,
    start: datetime | None,
    anchor: datetime | None,
    lower: datetime,
    end: datetime | None,
) -> Iterator[datetime]:
    # Absolute time: the zone plays no part, so DST changes neither add nor drop a run.
    step = timedelta(seconds=schedule["every"])
    if start is not None:
        first = start
    elif anchor is not None:
        first = anchor + step
    else:
        raise ValueError("An interval schedule needs start_at or anchor.")
    k = 0 if lower < first else (lower - first) // step + 1
    try:
        at = first + k * step
        while end is None or at <= end:
            yield at
            at += step
    except OverflowError:
        return


def jitter_offset(schedule: dict, *, key: str) -> float:
    """A deterministic offset in [0, jitter) seconds for the occurrence named by `key`."""
    jitter = schedule.get("jitter") or 0
    if jitter <= 0:
        return 0.0
    digest = hashlib.sha256(key.encode()).digest()
    fraction = (int.from_bytes(digest[:8], "big") >> 11) / 2**53  # 53 bits: exact, below 1
    return min(fraction * jitter, math.nextafter(float(jitter), 0.0))


def preview(
    schedule: dict, *, now: datetime, count: int, days_off: DaysOff | None = None
) -> list[datetime]:
    """The next `count` fire times after `now` (or from a future start_at); a once schedule
    shows its single run_at even when it is past, since that means it runs right away."""
    if count <= 0:
        return []
    if schedule["type"] == "once":
        return [t for t in [_parse(schedule["run_at"])] if t is not None]
    return list(islice(fire_times(schedule, after=now, days_off=days_off), count))


def _spec(schedule: dict) -> CronSpec:
    days = schedule.get("days")
    return _spec_cached(
        schedule["type"],
        schedule.get("expression"),
        schedule.get("at"),
        tuple(days) if days else None,
        schedule.get("day") or 0,  # only monthly schedules have one (normalize requires it)
    )


@lru_cache(maxsize=1024)
def _spec_cached(
    kind: str, expression: str | None, at: str | None, days: tuple[str, ...] | None, day: int
) -> CronSpec:
    if kind == "cron":
        return parse_cron(expression or "")
    h, m, s = (int(part) for part in (at or "00:00:00").split(":"))
    month_days = frozenset(range(1, 32))
    weekdays = frozenset(range(7))
    if kind == "weekly":
        weekdays = frozenset(WEEKDAYS.index(d) for d in days or ())
    if kind == "monthly":
        month_days = frozenset({day}) if day > 0 else frozenset()
    return CronSpec(
        seconds=(s,),
        minutes=(m,),
        hours=(h,),
        days=month_days,
        months=frozenset(range(1, 13)),
        weekdays=weekdays,
        last_day=kind == "monthly" and day == -1,
        clamp_day=kind == "monthly" and day > 0,
    )


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _parse(value: str | None) -> datetime | None:
    return _as_utc(datetime.fromisoformat(value)) if value else None


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def members(kind: str) -> tuple[str, ...]:
    """The members a schedule of type `kind` takes (what `normalize` reads), `type` aside."""
    return _TYPE_FIELDS[kind] + (() if kind == "once" else _COMMON_FIELDS)
