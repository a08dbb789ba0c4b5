"""Reading the fields of a schedule as a client sent it, one at a time, collecting errors
(tasks/schedules.py `normalize` assembles the canonical schedule from them). Pure."""

from __future__ import annotations

import math
import re
import uuid
from datetime import UTC, date, datetime
from functools import cache
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

from tasks import schedule_rrule
from tasks.schedule_cron import CronSyntaxError, first_instant_at_or_after, parse_cron

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_FULL_DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MIN_YEAR, MAX_YEAR = 1900, 9000
MAX_EXPRESSION_LENGTH = 200
MAX_EXDATES = 1000
MAX_BUSINESS_DAY = 23  # the most weekdays a month has
MAX_CALENDARS = 20
MAX_WINDOWS = 100
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_AT = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


class FieldReader:
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

    def month_days(self) -> dict[str, Any]:
        """A monthly schedule's day: `day`, or `weekday` with `week` (the n-th, or -n-th from
        the end, such weekday), or `business_day` (the n-th business day, -1 the last)."""
        given = [key for key in ("day", "weekday", "business_day") if key in self.raw]
        if len(given) > 1:
            for key in given[1:]:
                self.error(
                    key,
                    f"Give one of day, weekday (with week) or business_day, not {given[0]} too.",
                )
            return {}
        if given == ["business_day"]:
            message = f"Must be 1..{MAX_BUSINESS_DAY}, or -1..-{MAX_BUSINESS_DAY} from the end."
            n = self.number(
                "business_day",
                minimum=-MAX_BUSINESS_DAY,
                maximum=MAX_BUSINESS_DAY,
                integer=True,
                message=message,
            )
            if n == 0:
                self.error("business_day", message)
            return {"business_day": n or None}
        if given == ["weekday"] or "week" in self.raw:
            value = self.raw.get("weekday")
            name = value.strip().lower() if isinstance(value, str) else None
            day = name[:3] if name in WEEKDAYS or name in _FULL_DAY_NAMES else None
            if day is None:
                self.error("weekday", "Must be a weekday, mon..sun (with week).")
            message = "Must be 1..5 (the n-th such weekday) or -1..-5 (from the month's end)."
            week = self.number(
                "week", minimum=-5, maximum=5, integer=True, need=True, message=message
            )
            if week == 0:
                self.error("week", message)
            return {"weekday": day, "week": week or None}
        return {"day": self.month_day()}

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
        # Six stars typed for five make a task that fires 86,400 times a day.
        why = 'with 6 fields the first is seconds, and it is "*"'
        if spec.every_second() and not self.every_second_allowed("expression", why):
            return None
        return text

    def every_second_allowed(self, field: str, why: str) -> bool:
        """A schedule that fires every second must say so (`allow_every_second`), whatever its
        type: else an error on `field` and False."""
        if self.raw.get("allow_every_second") is True:
            return True
        self.error(
            field,
            f"This schedule fires every second ({why}); if that is meant, add "
            '"allow_every_second": true to the schedule.',
        )
        return False

    def rule(self) -> str | None:
        """An RFC 5545 rule, canonical; errors name the part (`rule.BYSETPOS`)."""
        try:
            rule = schedule_rrule.parse(self.raw.get("rule"))
        except schedule_rrule.RuleError as exc:
            for field, messages in exc.errors.items():
                for message in messages:
                    self.error(field, message)
            return None
        why = "FREQ=SECONDLY at INTERVAL 1, or a BYSECOND of all 60 seconds"
        if schedule_rrule.fires_every_second(rule) and not self.every_second_allowed("rule", why):
            return None
        return rule.text

    def exdates(self, zone: ZoneInfo) -> list[str]:
        """Excluded dates (`2026-12-24`: every occurrence that local day) and date-times (that
        occurrence; without an offset, local), stored sorted as dates and UTC instants."""
        value = self.raw.get("exdates")
        if value is None:
            return []
        if not isinstance(value, list) or len(value) > MAX_EXDATES:
            self.error("exdates", f"Must be a list of at most {MAX_EXDATES} dates or date-times.")
            return []
        found: set[str] = set()
        for index, item in enumerate(value):
            text = item.strip() if isinstance(item, str) else ""
            if _DATE.match(text):
                try:
                    found.add(date.fromisoformat(text).isoformat())
                except ValueError:
                    self.error(f"exdates[{index}]", "Not a calendar date.")
                continue
            problems: dict[str, list[str]] = {}
            instant = FieldReader({"at": item}, problems).instant("at", zone)
            if instant is None:
                self.errors[f"exdates[{index}]"] = problems.get("at", ["Must be a date."])
                continue
            found.add(instant.isoformat().replace("+00:00", "Z"))
        return sorted(found)

    def calendar_ids(self) -> list[str]:
        """`exclude`: calendar ids (that they are the owner's is the API's check)."""
        value = self.raw.get("exclude")
        if value is None:
            return []
        if not isinstance(value, list) or len(value) > MAX_CALENDARS:
            self.error("exclude", f"Must be a list of at most {MAX_CALENDARS} calendar ids.")
            return []
        found: list[str] = []
        for index, item in enumerate(value):
            try:
                text = str(uuid.UUID(item)) if isinstance(item, str) else None
            except ValueError:
                text = None
            if text is None:
                self.error(f"exclude[{index}]", "Must be a calendar id.")
            elif text not in found:
                found.append(text)
        return found

    def windows(self, zone: ZoneInfo) -> list[dict[str, str]]:
        """`exclude_windows`: [{"start", "end"}], date-times (without an offset, local)."""
        value = self.raw.get("exclude_windows")
        if value is None:
            return []
        if not isinstance(value, list) or len(value) > MAX_WINDOWS:
            self.error("exclude_windows", f"Must be a list of at most {MAX_WINDOWS} windows.")
            return []
        found = []
        for index, item in enumerate(value):
            field = f"exclude_windows[{index}]"
            if not isinstance(item, dict) or set(item) != {"start", "end"}:
                self.error(field, 'Must be {"start": date-time, "end": date-time}.')
                continue
            problems: dict[str, list[str]] = {}
            reader = FieldReader(item, problems)
            start, end = reader.instant("start", zone), reader.instant("end", zone)
            for key, messages in problems.items():
                self.errors.setdefault(f"{field}.{key}", []).extend(messages)
            if start is not None and end is not None:
                if end <= start:
                    self.error(f"{field}.end", "Must be later than start.")
                else:
                    found.append({"start": _utc_iso(start), "end": _utc_iso(end)})
        return sorted(found, key=lambda w: (w["start"], w["end"]))

    def flag(self, field: str) -> bool | None:
        """A true/false field; None when absent."""
        value = self.raw.get(field)
        if value is not None and not isinstance(value, bool):
            self.error(field, "Must be true or false.")
            return None
        return value


def _utc_iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


@cache
def _zone_names() -> dict[str, str]:
    # "localtime" and "posixrules" name the host's settings, not IANA zones.
    names = available_timezones() - {"localtime", "posixrules"}
    return {name.lower(): name for name in names | {"UTC"}}
