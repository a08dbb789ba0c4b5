"""RFC 5545 recurrence rules: each part validated on its own, then expanded by python-dateutil.

Pure. dateutil's `rrule` does the recurrence maths on naive wall-clock readings in the task's
zone; this module only checks the rule text part by part (so a 400 names the part) and maps
each wall reading to one instant under the project's fixed-time DST contract: a reading in a
spring-forward gap is the first instant after the gap, one in a fold the first of its two.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from dateutil import rrule as du

from tasks.schedule_cron import first_instant_at_or_after

FREQS = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY")
DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
# The order parts are written in the canonical rule.
PARTS = (
    "FREQ",
    "INTERVAL",
    "COUNT",
    "UNTIL",
    "WKST",
    "BYMONTH",
    "BYWEEKNO",
    "BYYEARDAY",
    "BYMONTHDAY",
    "BYDAY",
    "BYHOUR",
    "BYMINUTE",
    "BYSECOND",
    "BYSETPOS",
)
MAX_RULE_LENGTH = 500
# COUNT is counted from the rule's start, so a rule with COUNT is expanded from there each time.
MAX_COUNT = 10_000
MAX_INTERVAL = 10_000
_STEP = {
    "DAILY": timedelta(days=1),
    "WEEKLY": timedelta(weeks=1),
    "HOURLY": timedelta(hours=1),
    "MINUTELY": timedelta(minutes=1),
    "SECONDLY": timedelta(seconds=1),
}
_BYDAY = re.compile(r"^([+-]?\d{1,2})?(MO|TU|WE|TH|FR|SA|SU)$")
_UNTIL = re.compile(r"^(\d{4})(\d{2})(\d{2})(?:T(\d{2})(\d{2})(\d{2})(Z?))?$")
_INT = re.compile(r"^[+-]?\d{1,4}$")
# Ranges of each numeric list part: (lowest, highest, whether negatives count from the end).
_RANGES = {
    "BYMONTH": (1, 12, False),
    "BYWEEKNO": (1, 53, True),
    "BYYEARDAY": (1, 366, True),
    "BYMONTHDAY": (1, 31, True),
    "BYHOUR": (0, 23, False),
    "BYMINUTE": (0, 59, False),
    "BYSECOND": (0, 59, False),
    "BYSETPOS": (1, 366, True),
}


class RuleError(ValueError):
    """An invalid rule; `errors` maps `rule.PART` (or `rule`) to messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))


@dataclass(frozen=True)
class Rule:
    """A validated rule: its canonical text and what dateutil needs."""

    text: str
    freq: str
    kwargs: tuple[tuple[str, object], ...]  # dateutil keyword arguments (no dtstart/until)
    until: str | None  # the UNTIL value as written (resolved against the zone when expanded)
    count: int | None


def fires_every_second(rule: Rule) -> bool:
    """Whether the rule fires on consecutive seconds, as a cron `* ...` seconds field does:
    FREQ=SECONDLY at INTERVAL 1, or a BYSECOND listing all 60 seconds, unrestricted by the
    other."""
    kwargs = dict(rule.kwargs)
    seconds = kwargs.get("bysecond")
    listed = isinstance(seconds, tuple)
    every = not isinstance(seconds, tuple) or len(set(seconds)) == 60
    if rule.freq == "SECONDLY":
        return kwargs.get("interval", 1) == 1 and every
    return listed and every


def parse(value: object) -> Rule:
    """Validate rule text (`FREQ=...;BY...=...`, an `RRULE:` prefix allowed) part by part."""
    if not isinstance(value, str) or not value.strip():
        raise RuleError({"rule": ['Must be an RFC 5545 rule, e.g. "FREQ=WEEKLY;BYDAY=MO".']})
    if len(value) > MAX_RULE_LENGTH:
        raise RuleError({"rule": [f"Must be at most {MAX_RULE_LENGTH} characters."]})
    text = value.strip()
    if text.upper().startswith("RRULE:"):
        text = text[6:]
    errors: dict[str, list[str]] = {}
    parts: dict[str, str] = {}
    for piece in text.split(";"):
        name, sep, raw = piece.strip().partition("=")
        name = name.strip().upper()
        if not sep or not name:
            errors.setdefault("rule", []).append(f"{piece.strip()[:30]!r} is not NAME=VALUE.")
        elif name not in PARTS:
            known = ", ".join(PARTS)
            errors.setdefault(f"rule.{name[:20]}", []).append(f"Unknown rule part; use {known}.")
        elif name in parts:
            errors.setdefault(f"rule.{name}", []).append("Given more than once.")
        else:
            parts[name] = raw.strip().upper()
    if errors:
        raise RuleError(errors)
    return _check(parts)


def _check(parts: dict[str, str]) -> Rule:
    errors: dict[str, list[str]] = {}

    def error(part: str, message: str) -> None:
        errors.setdefault(f"rule.{part}", []).append(message)

    freq = parts.get("FREQ")
    if freq is None:
        error("FREQ", "This part is required.")
    elif freq not in FREQS:
        error("FREQ", f"Must be one of {', '.join(FREQS)}.")
    kwargs: dict[str, object] = {}
    canonical: dict[str, str] = {}
    for part in ("INTERVAL", "COUNT"):
        if part in parts:
            top = MAX_INTERVAL if part == "INTERVAL" else MAX_COUNT
            raw = parts[part]
            number = int(raw) if raw.isdigit() else 0
            if not 1 <= number <= top:
                error(part, f"Must be a whole number from 1 to {top}.")
            else:
                kwargs[part.lower()] = number
                canonical[part] = str(number)
    if "UNTIL" in parts:
        if "COUNT" in parts:
            error("UNTIL", "Give either COUNT or UNTIL, not both (RFC 5545).")
        elif _until_wall(parts["UNTIL"]) is None:
            error("UNTIL", "Must be a date (20271231) or date-time (20271231T170000, Z for UTC).")
        else:
            canonical["UNTIL"] = parts["UNTIL"]
    if "WKST" in parts:
        if parts["WKST"] not in DAYS:
            error("WKST", f"Must be one of {', '.join(DAYS)}.")
        else:
            kwargs["wkst"] = DAYS.index(parts["WKST"])
            canonical["WKST"] = parts["WKST"]
    for part, (lo, hi, negative) in _RANGES.items():
        if part not in parts:
            continue
        values = _int_list(parts[part])
        span = f"-{hi}..-{lo} or {lo}..{hi}" if negative else f"{lo}..{hi}"
        if values is None or any(
            not (lo <= abs(v) <= hi) or (v < 0 and not negative) for v in values
        ):
            error(part, f"Must be a comma-separated list of whole numbers in {span}.")
            continue
        kwargs[part.lower()] = tuple(values)
        canonical[part] = ",".join(str(v) for v in values)
    if "BYDAY" in parts:
        days = _byday(parts["BYDAY"], freq, "BYWEEKNO" in parts)
        if isinstance(days, str):
            error("BYDAY", days)
        else:
            kwargs["byweekday"] = tuple(
                du.weekday(DAYS.index(day), n) if n else du.weekday(DAYS.index(day))
                for n, day in days
            )
            canonical["BYDAY"] = ",".join(f"{n or ''}{day}" for n, day in days)
    if freq in FREQS:
        _check_combinations(freq, parts, kwargs, error)
    if errors:
        raise RuleError(errors)
    assert freq is not None
    text = ";".join(
        f"{part}={canonical.get(part, parts[part] if part == 'FREQ' else '')}"
        for part in PARTS
        if part in parts
    )
    count = kwargs.get("count")
    return Rule(
        text=text,
        freq=freq,
        kwargs=tuple(sorted(kwargs.items())),
        until=canonical.get("UNTIL"),
        count=count if isinstance(count, int) else None,
    )


def _check_combinations(freq: str, parts: dict[str, str], kwargs: dict, error) -> None:
    """The RFC 5545 restrictions between parts, and the rules that could never fire."""
    if "BYWEEKNO" in parts and freq != "YEARLY":
        error("BYWEEKNO", "Only allowed with FREQ=YEARLY.")
    if "BYYEARDAY" in parts and freq in ("DAILY", "WEEKLY", "MONTHLY"):
        error("BYYEARDAY", f"Not allowed with FREQ={freq}.")
    if "BYMONTHDAY" in parts and freq == "WEEKLY":
        error("BYMONTHDAY", "Not allowed with FREQ=WEEKLY.")
    if "BYSETPOS" in parts:
        if not any(part.startswith("BY") and part != "BYSETPOS" for part in parts):
            error("BYSETPOS", "Needs another BY part to pick from (e.g. BYDAY).")
        elif max(abs(v) for v in kwargs.get("bysetpos", (0,))) > _set_size(freq, kwargs):
            error("BYSETPOS", "Larger than the number of instances in one period: never fires.")
    months = kwargs.get("bymonth") or tuple(range(1, 13))
    monthdays = kwargs.get("bymonthday")
    if monthdays and not any(
        abs(d) <= (29 if m == 2 else calendar.monthrange(2001, m)[1])
        for m in months
        for d in monthdays
    ):
        error("BYMONTHDAY", "No month of the rule has that day: the rule never fires.")
    yeardays = kwargs.get("byyearday")
    if (
        yeardays
        and "bymonth" in kwargs
        and not any(_yearday_in_months(d, months, leap) for d in yeardays for leap in (False, True))
    ):
        error("BYYEARDAY", "No day of the rule's months has that number: the rule never fires.")


def _set_size(freq: str, kwargs: dict) -> int:
    """At most how many instances one period of the rule holds (what BYSETPOS indexes): its
    days, bounded by each day part, times the time parts finer than the period."""
    days = {"YEARLY": 366, "MONTHLY": 31, "WEEKLY": 7}.get(freq, 1)
    months = len(kwargs.get("bymonth") or ()) or 12
    if freq == "YEARLY" and "bymonth" in kwargs:
        days = 31 * months
    if "bymonthday" in kwargs and freq in ("YEARLY", "MONTHLY"):
        days = min(days, len(kwargs["bymonthday"]) * (months if freq == "YEARLY" else 1))
    if "byyearday" in kwargs:
        days = min(days, len(kwargs["byyearday"]))
    if "byweekday" in kwargs and freq in ("YEARLY", "MONTHLY", "WEEKLY"):
        plain = 1 if freq == "WEEKLY" else 5 if freq == "MONTHLY" else 53
        days = min(days, sum(1 if day.n else plain for day in kwargs["byweekday"]))
    finer = {"HOURLY": ("byminute", "bysecond"), "MINUTELY": ("bysecond",), "SECONDLY": ()}
    for part in finer.get(freq, ("byhour", "byminute", "bysecond")):
        days *= len(kwargs.get(part) or (0,))
    return days


def _yearday_in_months(day: int, months: tuple, leap: bool) -> bool:
    length = 366 if leap else 365
    number = day if day > 0 else length + day + 1
    if not 1 <= number <= length:
        return False
    month = (date(2024 if leap else 2025, 1, 1) + timedelta(days=number - 1)).month
    return month in months


def _int_list(raw: str) -> list[int] | None:
    items = raw.split(",")
    if not all(_INT.match(item.strip()) for item in items):
        return None
    values = sorted({int(item) for item in items})
    return values or None


def _byday(raw: str, freq: str | None, weekno: bool) -> list[tuple[int, str]] | str:
    found: list[tuple[int, str]] = []
    for item in raw.split(","):
        match = _BYDAY.match(item.strip())
        if match is None:
            return f"{item.strip()[:20]!r} is not a weekday (MO..SU, optionally -1FR, 3MO)."
        n = int(match.group(1) or 0)
        if match.group(1) and n == 0:
            return "A weekday's number must not be 0."
        if n and (freq not in ("MONTHLY", "YEARLY") or (freq == "YEARLY" and weekno)):
            return (
                "Numbered weekdays (3MO, -1FR) need FREQ=MONTHLY, or FREQ=YEARLY without BYWEEKNO."
            )
        top = 5 if freq == "MONTHLY" else 53
        if abs(n) > top:
            return f"A weekday's number must lie in -{top}..-1 or 1..{top} with FREQ={freq}."
        if (n, match.group(2)) not in found:
            found.append((n, match.group(2)))
    return found


def _until_wall(raw: str) -> tuple[datetime, bool] | None:
    """UNTIL as (naive reading, is UTC); a date means through the end of that day."""
    match = _UNTIL.match(raw)
    if match is None:
        return None
    y, mo, d, h, mi, s, z = match.groups()
    try:
        if h is None:
            return datetime(int(y), int(mo), int(d), 23, 59, 59), False
        return datetime(int(y), int(mo), int(d), int(h), int(mi), int(s)), z == "Z"
    except ValueError:
        return None


def until_instant(rule: Rule, zone: ZoneInfo) -> datetime | None:
    """The last instant the rule may fire at: UNTIL in UTC, or read in the schedule's zone."""
    if rule.until is None:
        return None
    parsed = _until_wall(rule.until)
    assert parsed is not None  # checked by parse()
    wall, utc = parsed
    return wall.replace(tzinfo=UTC) if utc else first_instant_at_or_after(wall, zone)


@lru_cache(maxsize=1024)
def compiled(text: str) -> Rule:
    return parse(text)


def rule_times(
    rule: Rule,
    zone: ZoneInfo,
    *,
    dtstart: datetime,
    after: datetime,
    until: datetime | None,
) -> Iterator[datetime]:
    """UTC instants strictly after `after` and not past `until`, increasing, one per instant.

    `dtstart` is the rule's start as a naive wall reading in `zone` (it supplies the parts the
    rule leaves out, as in RFC 5545). Without COUNT the start is moved forward by whole periods
    to just before `after`, which changes no occurrence and keeps the expansion short.
    """
    wall_after = after.astimezone(zone).replace(tzinfo=None)
    start = dtstart
    step = _STEP.get(rule.freq)
    if rule.count is None and step is not None:
        period = step * int(dict(rule.kwargs).get("interval", 1))  # type: ignore[call-overload]
        lag = (wall_after - timedelta(days=1)) - start
        if lag > period:
            start += (lag // period) * period
    bound = until_instant(rule, zone)
    if bound is not None and (until is None or bound < until):
        until = bound
    recurrence = du.rrule(getattr(du, rule.freq), dtstart=start, **dict(rule.kwargs))
    last = after
    try:
        for wall in recurrence.xafter(wall_after - timedelta(days=1), inc=True):
            instant = first_instant_at_or_after(wall, zone)
            if until is not None and instant > until:
                return
            # Several readings inside one gap all mean its end: that instant fires once.
            if instant > last:
                last = instant
                yield instant
    except (OverflowError, ValueError):  # past datetime's range
        return
