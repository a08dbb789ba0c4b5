"""What keeps an occurrence from running: the calendars a schedule names in `exclude` (their
holidays, dates and freeze windows) and its own `exclude_windows`. Pure: calendars arrive as
`CalendarData` (tasks/occurrences.py loads them), holidays come from the `holidays` package,
which computes them offline.

An excluded occurrence is still an occurrence: it is recorded `skipped` with `reason(at)`, so
a task's history stays complete. Business days (tasks/schedules.py) are Monday to Friday minus
`days_off`: the same holidays and dates.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import cache, lru_cache
from zoneinfo import ZoneInfo

import holidays

REASON_PREFIX = "excluded: "
MAX_CALENDARS = 20
MAX_WINDOWS = 100
MAX_DATES = 1000


@cache
def supported() -> dict[str, frozenset[str]]:
    """Country codes the `holidays` package knows, each with its subdivision codes."""
    return {
        country: frozenset(subdivisions)
        for country, subdivisions in holidays.list_supported_countries().items()
    }


@lru_cache(maxsize=256)
def _holidays(country: str, subdivision: str | None, year: int) -> dict[date, str]:
    found = holidays.country_holidays(country, subdiv=subdivision, years=year)
    return dict(found.items())


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class CalendarData:
    """A calendar as exclusions read it (its row, without the ORM)."""

    id: str
    name: str
    timezone: str
    country: str | None
    subdivision: str | None
    dates: frozenset[date]
    windows: tuple[tuple[datetime, datetime], ...]

    def day_off(self, day: date) -> str | None:
        """Why `day` (a date in this calendar's zone) is off, or None."""
        if self.country:
            name = _holidays(self.country, self.subdivision, day.year).get(day)
            if name is not None:
                region = "-".join(p for p in (self.country, self.subdivision) if p)
                return f"holiday {name} ({region})"
        if day in self.dates:
            return f"{day.isoformat()} (calendar {self.name})"
        return None

    def reason(self, at: datetime) -> str | None:
        for start, end in self.windows:
            if start <= at < end:
                return f"freeze window {_iso(start)}..{_iso(end)} (calendar {self.name})"
        return self.day_off(at.astimezone(ZoneInfo(self.timezone)).date())


@dataclass(frozen=True)
class Exclusions:
    calendars: tuple[CalendarData, ...] = ()
    windows: tuple[tuple[datetime, datetime], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.calendars or self.windows)

    def reason(self, at: datetime) -> str | None:
        """`excluded: ...` when the occurrence at `at` must not run, else None."""
        for start, end in self.windows:
            if start <= at < end:
                return f"{REASON_PREFIX}freeze window {_iso(start)}..{_iso(end)}"
        for calendar in self.calendars:
            why = calendar.reason(at)
            if why is not None:
                return REASON_PREFIX + why
        return None

    def days_off(self, day: date) -> bool:
        """Whether `day` is a holiday or date of one of the calendars (not a business day)."""
        return any(calendar.day_off(day) is not None for calendar in self.calendars)


def for_schedule(schedule: dict, calendars: dict[str, CalendarData]) -> Exclusions:
    """The exclusions of a schedule, with its calendars looked up in `calendars` (by id)."""
    windows = tuple(
        (_parse(w["start"]), _parse(w["end"])) for w in schedule.get("exclude_windows") or ()
    )
    named = tuple(calendars[c] for c in schedule.get("exclude") or () if c in calendars)
    return Exclusions(calendars=named, windows=windows)


def calendar_ids(schedules: Iterable[dict]) -> set[str]:
    return {c for schedule in schedules for c in schedule.get("exclude") or ()}


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value).astimezone(UTC)
