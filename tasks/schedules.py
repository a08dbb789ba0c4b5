"""Schedule maths: validate a schedule, compute its fire times; pure, time is a parameter.

`normalize` turns what a client sent into a canonical JSON dict; `fire_times`, `preview` and
`jitter_offset` read only that canonical form. Local-time schedules are evaluated in their IANA
zone with the DST rules written in docs/schedules.md and returned as aware UTC datetimes.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from itertools import islice
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

from tasks.schedule_cron import (
    CronSpec,
    CronSyntaxError,
    cron_times,
    first_instant_at_or_after,
    parse_cron,
)

TYPES = ("once", "interval", "daily", "weekly", "monthly", "cron")
MISFIRE_POLICIES = ("run_once", "skip", "run_all")
OVERLAP_POLICIES = ("allow", "skip", "cancel_previous")
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_FULL_DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# Bounds that keep every value meaningful and every datetime computation inside its range.
MAX_SECONDS = 3653 * 86400  # ten years: the longest `every` and `delay`
MAX_JITTER = 7 * 86400
MAX_RUNS = 1_000_000_000
MIN_YEAR, MAX_YEAR = 1900, 9000
MAX_EXPRESSION_LENGTH = 200
_SECONDS_RANGE = f"Must be between {{}} and {MAX_SECONDS} seconds (ten years)."
_TYPE_FIELDS: dict[str, tuple[str, ...]] = {
    "once": ("run_at", "delay", "timezone"),
    "interval": ("every",),
    "daily": ("at",),
    "weekly": ("days", "at"),
    "monthly": ("day", "at"),
    "cron": ("expression",),
}
_COMMON_FIELDS: tuple[str, ...] = ("timezone", "start_at", "end_at", "max_runs", "jitter")
_COMMON_FIELDS += ("misfire", "overlap", "anchor")  # anchor: normalize writes it, for round trips
_AT = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_TICK = timedelta(microseconds=1)
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


class ScheduleError(ValueError):
    """An invalid schedule; `errors` maps field names inside the schedule to messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{key}: {' '.join(msgs)}" for key, msgs in errors.items()))


def normalize(raw: dict | str | None, *, now: datetime) -> dict:
    """Validate a schedule as API.md writes it and return its canonical, JSON-ready dict."""
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
    errors: dict[str, list[str]] = {
        str(key): [f"Unknown field for a {kind} schedule."] for key in raw if key not in allowed
    }
    v = _Validator(raw, errors)
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
        raise ScheduleError({"end_at": ["The schedule has no fire time left: end_at has passed."]})
    return out


def _normalize_once(v: _Validator, zone: ZoneInfo, now: datetime) -> dict:
    run_at = v.instant("run_at", zone)
    delay = v.number("delay", minimum=0, maximum=MAX_SECONDS, message=_SECONDS_RANGE.format(0))
    if "run_at" in v.raw and "delay" in v.raw:
        v.error("delay", "Give either run_at or delay, not both.")
    if delay is not None:
        run_at = now + timedelta(seconds=delay)
    return {"type": "once", "run_at": _iso(run_at or now)}


def _normalize_recurring(v: _Validator, zone: ZoneInfo, now: datetime) -> dict:
    kind = v.raw["type"].strip().lower()
    out: dict[str, Any] = {"type": kind}
    if kind == "interval":
        message = _SECONDS_RANGE.format(1)
        out["every"] = v.number(
            "every", minimum=1, maximum=MAX_SECONDS, integer=True, need=True, message=message
        )
    if kind == "weekly":
        out["days"] = v.days()
    if kind == "monthly":
        out["day"] = v.month_day()
    if kind in ("daily", "weekly", "monthly"):
        out["at"] = v.time_of_day()
    if kind == "cron":
        out["expression"] = v.expression()
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
        "overlap": v.choice("overlap", OVERLAP_POLICIES),
        # Without start_at the schedule begins after the moment it was defined.
        "anchor": None if start else _iso(anchor),
    }
    return out


class _Validator:
    """Reads one field at a time from the raw dict, recording errors instead of raising."""

    def __init__(self, raw: dict, errors: dict[str, list[str]]) -> None:
        self.raw, self.errors = raw, errors

    def error(self, field: str, message: str) -> None:
        self.errors.setdefault(field, []).append(message)

    def zone(self) -> ZoneInfo:
        value = self.raw.get("timezone")
        if value is None:
            return ZoneInfo("UTC")
        name = _zone_names().get(value.strip().lower()) if isinstance(value, str) else None
        if name is None:
            self.error("timezone", "Unknown time zone; use an IANA name such as Europe/Berlin.")
            return ZoneInfo("UTC")
        return ZoneInfo(name)

    def instant(self, field: str, zone: ZoneInfo) -> datetime | None:
        value = self.raw.get(field)
        if value is None:
            return None
        try:
            if not isinstance(value, str) or len(value) > 64:
                raise ValueError
            parsed = datetime.fromisoformat(value.strip())
            # A time without an offset is local time in the schedule's zone.
            result = first_instant_at_or_after(parsed, zone) if parsed.tzinfo is None else parsed
            result = result.astimezone(UTC)
        except (ValueError, OverflowError):
            self.error(field, "Must be an ISO 8601 date-time, e.g. 2025-01-31T09:00:00Z.")
            return None
        if not MIN_YEAR <= result.year <= MAX_YEAR:
            self.error(field, f"Must lie between the years {MIN_YEAR} and {MAX_YEAR}.")
            return None
        return result

    def number(
        self,
        field: str,
        *,
        minimum: float,
        maximum: float,
        integer: bool = False,
        need: bool = False,
        message: str | None = None,
    ) -> Any:
        value = self.raw.get(field)
        if value is None:
            if need:
                self.error(field, "This field is required.")
            return None
        if isinstance(value, str) and _NUMBER.match(value.strip()):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.error(field, "Must be a number.")
            return None
        if isinstance(value, float):
            if not math.isfinite(value):
                self.error(field, "Must be a finite number.")
                return None
            if value.is_integer():
                value = int(value)
            elif integer:
                self.error(field, "Must be a whole number.")
                return None
        if not minimum <= value <= maximum:
            self.error(field, message or f"Must be between {minimum} and {maximum}.")
            return None
        return value

    def choice(self, field: str, choices: tuple[str, ...]) -> str:
        value = self.raw.get(field, choices[0])
        if isinstance(value, str) and value.strip().lower() in choices:
            return value.strip().lower()
        self.error(field, f"Must be one of {', '.join(choices)}.")
        return choices[0]

    def time_of_day(self) -> str | None:
        value = self.raw.get("at")
        match = _AT.match(value.strip()) if isinstance(value, str) and len(value) < 16 else None
        if value is None:
            self.error("at", "This field is required.")
        else:
            h, m, s = (int(part or 0) for part in match.groups()) if match else (99, 0, 0)
            if h < 24 and m < 60 and s < 60:
                return f"{h:02d}:{m:02d}:{s:02d}"
            self.error("at", "Must be a time of day as HH:MM or HH:MM:SS (24-hour clock).")
        return None

    def days(self) -> list[str] | None:
        value = self.raw.get("days")
        if isinstance(value, str):
            value = value.split(",")
        if not isinstance(value, list) or not value:
            self.error("days", 'Must be a non-empty list of days, e.g. ["mon", "fri"].')
            return None
        found: set[int] = set()
        for item in value:
            name = item.strip().lower() if isinstance(item, str) else None
            if name in WEEKDAYS or name in _FULL_DAY_NAMES:
                found.add((WEEKDAYS if name in WEEKDAYS else _FULL_DAY_NAMES).index(name))
            else:
                self.error("days", f"Unknown day {str(item)[:20]!r}; use mon, tue, ... sun.")
                return None
        return [WEEKDAYS[i] for i in sorted(found)]

    def month_day(self) -> int | None:
        message = "Must be 1..31, or -1 for the last day of the month."
        day = self.number("day", minimum=-1, maximum=31, integer=True, need=True, message=message)
        if day == 0:
            self.error("day", message)
            return None
        return day

    def expression(self) -> str | None:
        value = self.raw.get("expression")
        if not isinstance(value, str) or not value.strip():
            self.error("expression", 'Must be a cron expression string, e.g. "*/15 * * * *".')
            return None
        if len(value) > MAX_EXPRESSION_LENGTH:
            self.error("expression", f"Must be at most {MAX_EXPRESSION_LENGTH} characters.")
            return None
        text = " ".join(value.split())
        try:
            spec = parse_cron(text)
        except CronSyntaxError as exc:
            self.error("expression", str(exc))
            return None
        if not spec.can_fire():
            self.error("expression", "This expression never fires: no month has that day.")
            return None
        return text


def fire_times(schedule: dict, *, after: datetime | None) -> Iterator[datetime]:
    """Nominal UTC fire times strictly after `after`, strictly increasing, within the bounds.

    The schedule begins at start_at (inclusive) or, without it, just after its anchor. Neither
    max_runs nor jitter is applied here: the caller counts runs and adds jitter_offset.
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
    yield from cron_times(_spec(schedule), zone, after=lower, until=end)


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


def preview(schedule: dict, *, now: datetime, count: int) -> list[datetime]:
    """The next `count` fire times after `now` (or from a future start_at); a once schedule
    shows its single run_at even when it is past, since that means it runs right away."""
    if count <= 0:
        return []
    if schedule["type"] == "once":
        return [t for t in [_parse(schedule["run_at"])] if t is not None]
    return list(islice(fire_times(schedule, after=now), count))


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


@cache
def _zone_names() -> dict[str, str]:
    # "localtime" and "posixrules" name the host's settings, not IANA zones.
    names = available_timezones() - {"localtime", "posixrules"}
    return {name.lower(): name for name in names | {"UTC"}}


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _parse(value: str | None) -> datetime | None:
    return _as_utc(datetime.fromisoformat(value)) if value else None


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
