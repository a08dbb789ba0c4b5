"""A schedule in words, for the preview and the task view: "At 17:00 on the last Friday of every
month (Europe/Berlin)". Pure; reads the canonical schedule (tasks/schedules.py). Cron
expressions are described by cron-descriptor, the other types here."""

from __future__ import annotations

import functools
from datetime import datetime
from zoneinfo import ZoneInfo

from cron_descriptor import ExpressionDescriptor, Options

from tasks.schedule_cron import MACROS

_DAY_NAMES = {
    "mon": "Monday",
    "tue": "Tuesday",
    "wed": "Wednesday",
    "thu": "Thursday",
    "fri": "Friday",
    "sat": "Saturday",
    "sun": "Sunday",
}
_RULE_DAYS = dict(zip(("MO", "TU", "WE", "TH", "FR", "SA", "SU"), _DAY_NAMES.values(), strict=True))
_MONTHS = (
    "January February March April May June July August September October November December"
).split()
_ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}
_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))
_FREQ_UNITS = {
    "YEARLY": "year",
    "MONTHLY": "month",
    "WEEKLY": "week",
    "DAILY": "day",
    "HOURLY": "hour",
    "MINUTELY": "minute",
    "SECONDLY": "second",
}


def describe(schedule: dict) -> str:
    """The words for a canonical schedule; a stored one this code cannot read gets none
    (a description is never worth a failed read)."""
    try:
        return _describe(schedule)
    except (KeyError, ValueError, TypeError, IndexError, AttributeError):
        return ""


def _describe(schedule: dict) -> str:
    kind = schedule["type"]
    if kind == "once":
        if not schedule.get("timezone"):
            return f"Once, at {schedule['run_at']}"
        zone = ZoneInfo(schedule["timezone"])
        local = datetime.fromisoformat(schedule["run_at"].replace("Z", "+00:00")).astimezone(zone)
        return f"Once, at {local.strftime('%Y-%m-%d %H:%M:%S')} ({zone.key})"
    text = {
        "interval": _interval,
        "daily": _daily,
        "weekly": _weekly,
        "monthly": _monthly,
        "cron": _cron,
        "rrule": _rrule,
    }[kind](schedule)
    text += _bounds(schedule)
    if kind != "interval":
        text += f" ({schedule.get('timezone') or 'UTC'})"
    return text


def _listing(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _ordinal(n: int) -> str:
    """first, second, ..., 7th; -1 last, -2 second-to-last."""
    if n < 0:
        return "last" if n == -1 else f"{_ordinal(-n)}-to-last"
    if n in _ORDINALS:
        return _ORDINALS[n]
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _every(count: int, unit: str) -> str:
    return f"every {unit}" if count == 1 else f"every {count} {unit}s"


def _interval(schedule: dict) -> str:
    seconds = schedule["every"]
    for unit, size in _UNITS:
        if seconds % size == 0:
            return _every(seconds // size, unit).capitalize()
    return _every(seconds, "second").capitalize()


def _at(value: str) -> str:
    return value[:5] if value.endswith(":00") else value


def _daily(schedule: dict) -> str:
    days = " on business days" if schedule.get("business_days_only") else " every day"
    return f"At {_at(schedule['at'])}{days}"


def _weekly(schedule: dict) -> str:
    names = _listing([_DAY_NAMES[d] for d in schedule["days"]])
    only = ", business days only" if schedule.get("business_days_only") else ""
    return f"At {_at(schedule['at'])} on {names}{only}"


def _monthly(schedule: dict) -> str:
    at = _at(schedule["at"])
    if schedule.get("business_day") is not None:
        which = f"the {_ordinal(schedule['business_day'])} business day"
    elif schedule.get("weekday") is not None:
        which = f"the {_ordinal(schedule['week'])} {_DAY_NAMES[schedule['weekday']]}"
    elif schedule["day"] == -1:
        which = "the last day"
    else:
        which = f"day {schedule['day']}"
    text = f"At {at} on {which} of every month"
    if schedule.get("day") is not None and schedule["day"] > 28:
        text += " (or the month's last day)"
    return text


def _cron(schedule: dict) -> str:
    return _cron_words(schedule["expression"])


@functools.lru_cache(maxsize=1024)
def _cron_words(given: str) -> str:
    """Kept per expression: cron-descriptor reads its translations from disk on every call,
    which cost the task list a few milliseconds a row."""
    expression = MACROS.get(given.lower(), given)
    options = Options()
    options.use_24hour_time_format = True
    try:
        return ExpressionDescriptor(expression, options).get_description()
    except Exception:
        return f"Cron {given}"


def _rrule(schedule: dict) -> str:
    parts = dict(part.split("=", 1) for part in schedule["rule"].split(";"))
    freq, interval = parts["FREQ"], int(parts.get("INTERVAL", "1"))
    text = _rule_time(parts) + _rule_days(parts, freq, interval)
    if "COUNT" in parts:
        text += f", {parts['COUNT']} times"
    if "UNTIL" in parts:
        text += f", until {parts['UNTIL']}"
    if schedule.get("exdates"):
        text += f", except {len(schedule['exdates'])} excluded date(s)"
    return text


def _rule_time(parts: dict[str, str]) -> str:
    hours = parts.get("BYHOUR", "").split(",") if "BYHOUR" in parts else []
    minutes = parts.get("BYMINUTE", "0").split(",")
    if not hours:
        if "BYMINUTE" in parts:
            return f"At minute {_listing(minutes)}, "
        return ""
    if len(hours) * len(minutes) > 6:
        return f"At minute {_listing(minutes)} past hour {_listing(hours)}, "
    times = [f"{int(h):02d}:{int(m):02d}" for h in hours for m in minutes]
    return f"At {_listing(times)} "


def _rule_days(parts: dict[str, str], freq: str, interval: int) -> str:
    unit = _every(interval, _FREQ_UNITS[freq])
    days = parts.get("BYDAY", "").split(",") if "BYDAY" in parts else []
    setpos = parts.get("BYSETPOS", "").split(",") if "BYSETPOS" in parts else []
    named = []
    for day in days:
        number, name = day[:-2], _RULE_DAYS[day[-2:]]
        named.append(f"the {_ordinal(int(number))} {name}" if number else name)
    if setpos and len(setpos) == 1 and len(days) == 1 and not days[0][:-2]:
        named = [f"the {_ordinal(int(setpos[0]))} {named[0]}"]
        setpos = []
    pieces = []
    if named:
        pieces.append("on " + _listing(named))
    if "BYMONTHDAY" in parts:
        monthdays = [_ordinal(int(d)) if int(d) < 0 else d for d in parts["BYMONTHDAY"].split(",")]
        pieces.append("on day " + _listing(monthdays))
    if "BYMONTH" in parts:
        pieces.append("in " + _listing([_MONTHS[int(m) - 1] for m in parts["BYMONTH"].split(",")]))
    if setpos:
        pieces.append(f"(positions {_listing(setpos)} of each {_FREQ_UNITS[freq]})")
    period = ("of " if named and freq in ("MONTHLY", "YEARLY") else "") + unit
    text = " ".join([*pieces, period])
    return text[0].upper() + text[1:] if not _rule_time(parts) else text


def _bounds(schedule: dict) -> str:
    text = ""
    calendars = len(schedule.get("exclude") or ())
    windows = len(schedule.get("exclude_windows") or ())
    if calendars:
        text += f", except the days off of {calendars} calendar{'s' if calendars > 1 else ''}"
    if windows:
        text += f", outside {windows} freeze window{'s' if windows > 1 else ''}"
    return text
