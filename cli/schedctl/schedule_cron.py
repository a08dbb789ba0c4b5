"""Cron expressions parsed into value sets, and their expansion into UTC fire times.

Pure and dependency-free: a cron spec is a set of allowed values per field, expanded day by
day in local time. Each local day is cut into pieces of constant UTC offset, so daylight
saving transitions are handled explicitly instead of being guessed from wall-clock arithmetic
(croniter fires twice in folds and mishandles gaps, which is why it is not used here).
"""

from __future__ import annotations

import calendar
import re
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from itertools import pairwise
from zoneinfo import ZoneInfo

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_CRON_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
# (label, lowest, highest, names mapped to numbers)
_Field = tuple[str, int, int, dict[str, int]]
_SECOND: _Field = ("second", 0, 59, {})
_MINUTE: _Field = ("minute", 0, 59, {})
_HOUR: _Field = ("hour", 0, 23, {})
_DOM: _Field = ("day-of-month", 1, 31, {})
_MONTH: _Field = ("month", 1, 12, {name: i + 1 for i, name in enumerate(_MONTHS)})
_DOW: _Field = ("day-of-week", 0, 7, {name: i for i, name in enumerate(_CRON_DAYS)})
_TERM = re.compile(r"^(?:(\*|\?)|([a-z0-9]+)(?:-([a-z0-9]+))?)(?:/(\d+))?$")
# Longest a day in any month can be (February counts 29: it does occur).
_MAX_MONTH_DAYS = {m: 29 if m == 2 else calendar.monthrange(2001, m)[1] for m in range(1, 13)}
# Offsets lie within UTC-12..UTC+14, so the instants of one local day lie within this margin.
_MARGIN = timedelta(hours=15)
# Keep the margin arithmetic inside datetime's range.
_FIRST_DATE, _LAST_DATE = date(1, 1, 3), date(9999, 12, 28)


class CronSyntaxError(ValueError):
    """An expression that is not valid cron; the message says which field and why."""


@dataclass(frozen=True)
class CronSpec:
    """Allowed values per field. `weekdays` uses Python numbering (Monday = 0)."""

    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    last_day: bool = False  # "L" in day-of-month, or monthly day -1
    clamp_day: bool = False  # monthly: a day past the month's end means its last day
    day_or: bool = False  # Vixie: both day fields restricted -> either one matches
    fixed_time: bool = True  # False when the hour field covers every hour

    def day_matches(self, d: date) -> bool:
        if d.month not in self.months:
            return False
        length = calendar.monthrange(d.year, d.month)[1]
        dom = d.day in self.days or (
            d.day == length
            and (self.last_day or (self.clamp_day and max(self.days, default=0) > length))
        )
        dow = d.weekday() in self.weekdays
        return (dom or dow) if self.day_or else (dom and dow)

    def every_second(self) -> bool:
        """Whether the seconds field allows every second (`*`, `*/1`, `0-59`)."""
        return len(self.seconds) == _SECOND[2] - _SECOND[1] + 1

    def can_fire(self) -> bool:
        """Whether some date ever matches (every month/day pair recurs on every weekday)."""
        if self.day_or or self.last_day or self.clamp_day:
            return True
        return any(day <= _MAX_MONTH_DAYS[m] for m in self.months for day in self.days)


def parse_cron(expression: str) -> CronSpec:
    """Parse 5 fields, 6 with seconds first, or a macro; raise CronSyntaxError."""
    text = " ".join(expression.lower().split())
    if text.startswith("@"):
        if text not in MACROS:
            raise CronSyntaxError(f"Unknown macro {text!r}; use one of {', '.join(MACROS)}.")
        text = MACROS[text]
    fields = text.split(" ")
    if len(fields) == 5:
        fields.insert(0, "0")
    elif len(fields) != 6:
        raise CronSyntaxError(
            f"Expected 5 fields (minute hour day month weekday) or 6 with seconds first, "
            f"got {len(fields)}."
        )
    sec, minute, hour, dom, month, dow = fields
    seconds, _ = _parse_field(sec, _SECOND)
    minutes, _ = _parse_field(minute, _MINUTE)
    hours, all_hours = _parse_field(hour, _HOUR)
    days, dom_star = _parse_field(dom, _DOM, allow_last=True)
    months, _ = _parse_field(month, _MONTH)
    cron_days, dow_star = _parse_field(dow, _DOW)
    return CronSpec(
        seconds=tuple(sorted(seconds)),
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=frozenset(days - {0}),
        months=frozenset(months),
        weekdays=frozenset((d + 6) % 7 for d in cron_days),
        last_day=0 in days,
        day_or=not dom_star and not dow_star,
        fixed_time=not all_hours,
    )


def _parse_field(text: str, field: _Field, *, allow_last: bool = False) -> tuple[set[int], bool]:
    """Return (values, star): `star` is Vixie's "field starts with *" for day matching, and
    for the hour field it means "one term stepping over the full range"; day "L" is 0."""
    label, lo, hi, _ = field
    values: set[int] = set()
    terms = text.split(",")
    spans_all = False
    for term in terms:
        if allow_last and term == "l":
            values.add(0)
            continue
        match = _TERM.match(term)
        if match is None:
            raise CronSyntaxError(f"{label} field: cannot parse {term!r}.")
        star, first, last, step_text = match.groups()
        if star == "?" and label not in ("day-of-month", "day-of-week"):
            raise CronSyntaxError(f"{label} field: '?' is only allowed in the day fields.")
        start = lo if star else _value(first, field)
        end = hi if star or (step_text and last is None) else _value(last or first, field)
        if start > end:
            raise CronSyntaxError(f"{label} field: range {term!r} runs backwards.")
        step = int(step_text) if step_text else 1
        if not 1 <= step <= hi - lo + 1:
            raise CronSyntaxError(f"{label} field: step {step} is out of range 1-{hi - lo + 1}.")
        values.update(range(start, end + 1, step))
        spans_all = len(terms) == 1 and (start, end) == (lo, hi)
    if label == "hour":
        return values, spans_all
    return values, text.startswith(("*", "?"))


def _value(token: str, field: tuple[str, int, int, dict[str, int]]) -> int:
    label, lo, hi, names = field
    if token in names:
        return names[token]
    if not token.isdigit():
        raise CronSyntaxError(f"{label} field: {token!r} is not a number or a known name.")
    value = int(token)
    if not lo <= value <= hi:
        raise CronSyntaxError(f"{label} field: {value} is out of range {lo}-{hi}.")
    return value


def cron_times(
    spec: CronSpec, zone: ZoneInfo, *, after: datetime, until: datetime | None
) -> Iterator[datetime]:
    """UTC instants strictly after `after` (and not past `until`) whose local time matches.

    Fixed-time specs map each matching wall time to one instant: the first one in a fold, the
    end of the gap in a spring-forward gap. Other specs match real instants: a wall time in a
    fold fires twice (two real instants), one inside a gap never exists.
    """
    last = after
    day = max((after - _MARGIN).date(), _FIRST_DATE)
    while day <= _LAST_DATE:
        if day.month not in spec.months:
            if day.year == _LAST_DATE.year and day.month == 12:
                return
            day = date(day.year + day.month // 12, day.month % 12 + 1, 1)
            continue
        if until is not None and datetime.combine(day, time(), UTC) - _MARGIN > until:
            return
        if spec.day_matches(day):
            for instant in _day_times(spec, zone, day, after):
                if until is not None and instant > until:
                    return
                if instant > last:
                    last = instant
                    yield instant
        day += timedelta(days=1)


def _day_times(spec: CronSpec, zone: ZoneInfo, day: date, after: datetime) -> Iterator[datetime]:
    for wall_start, wall_end, offset, gap_end in _day_pieces(zone, day, spec.fixed_time):
        if gap_end is not None:
            # Fixed-time walls inside a spring-forward gap all run at the gap's end.
            if gap_end > after and next(_walls(spec, wall_start, wall_end), None) is not None:
                yield gap_end
            continue
        start = max(wall_start, after.replace(tzinfo=None) + offset)
        for wall in _walls(spec, start, wall_end):
            yield (wall - offset).replace(tzinfo=UTC)


def _walls(spec: CronSpec, start: datetime, end: datetime) -> Iterator[datetime]:
    """Matching wall times in [start, end), both on the same local day (end may be midnight)."""
    if start.microsecond:
        start = start.replace(microsecond=0) + timedelta(seconds=1)
    if start >= end:
        return
    day = start.date()
    h0, m0, s0 = start.hour, start.minute, start.second
    for h in spec.hours[bisect_left(spec.hours, h0) :]:
        minutes = spec.minutes[bisect_left(spec.minutes, m0) :] if h == h0 else spec.minutes
        for m in minutes:
            seconds = spec.seconds
            if h == h0 and m == m0:
                seconds = seconds[bisect_left(seconds, s0) :]
            for s in seconds:
                wall = datetime(day.year, day.month, day.day, h, m, s)
                if wall >= end:
                    return
                yield wall


@lru_cache(maxsize=4096)
def _day_pieces(
    zone: ZoneInfo, day: date, fixed: bool
) -> tuple[tuple[datetime, datetime, timedelta, datetime | None], ...]:
    """Cut a local day into (wall_start, wall_end, offset, gap_end) pieces in instant order.

    A piece with `gap_end` set covers non-existent wall times (fixed-time mode only). In
    fixed-time mode a wall time repeated by a fold belongs only to its first piece.
    """
    midnight = datetime.combine(day, time())
    next_midnight = midnight + timedelta(days=1)
    lo = (midnight - _MARGIN).replace(tzinfo=UTC)
    hi = (next_midnight + _MARGIN).replace(tzinfo=UTC)
    bounds = [lo, *_transitions(zone, lo, hi), hi]
    pieces: list[tuple[datetime, datetime, timedelta, datetime | None]] = []
    covered = midnight
    for begin, finish in pairwise(bounds):
        offset = _offset(zone, begin)
        wall_start = min(max(begin.replace(tzinfo=None) + offset, midnight), next_midnight)
        wall_end = max(min(finish.replace(tzinfo=None) + offset, next_midnight), midnight)
        if fixed:
            if wall_start > covered:
                pieces.append((covered, wall_start, offset, begin))
            wall_start = max(wall_start, covered)
        if wall_start < wall_end:
            pieces.append((wall_start, wall_end, offset, None))
            covered = max(covered, wall_end)
    return tuple(pieces)


def first_instant_at_or_after(wall: datetime, zone: ZoneInfo) -> datetime:
    """The instant a fixed-time wall reading means: the first one in a fold, the gap's end in
    a spring-forward gap (a naive `wall` in `zone`; the result is UTC)."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    # In a gap fold=0 applies the offset from before it, fold=1 the one after: the end of the
    # gap lies between the two readings.
    other = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    lo, hi = min(first, other), max(first, other)
    changes = _transitions(zone, lo - timedelta(seconds=1), hi)
    return changes[0] if changes else first


def _offset(zone: ZoneInfo, instant: datetime) -> timedelta:
    offset = instant.astimezone(zone).utcoffset()
    return offset if offset is not None else timedelta(0)


def _transitions(zone: ZoneInfo, lo: datetime, hi: datetime) -> list[datetime]:
    """Instants in (lo, hi] where the zone's offset changes, found by bisection on seconds.

    Assumes offsets that differ at the two ends changed at most a few times in between and
    that equal ends mean no change (no zone changes twice within the ~54 h window).
    """
    before, after = _offset(zone, lo), _offset(zone, hi)
    if before == after:
        return []
    a, b = int(lo.timestamp()), int(hi.timestamp())
    while b - a > 1:
        mid = (a + b) // 2
        if _offset(zone, datetime.fromtimestamp(mid, UTC)) == before:
            a = mid
        else:
            b = mid
    change = datetime.fromtimestamp(b, UTC)
    return [change, *_transitions(zone, change, hi)]
