"""A calendar feed as iCalendar (RFC 5545) text, written by the `icalendar` package.

One VEVENT per upcoming fire time: SUMMARY the task's name, DTSTART in UTC (to the second, as
iCalendar writes times), no end (a point in time), transparent (a fire time does not make its
owner busy). Its UID is the run's idempotency key (the task and the nominal time), so a calendar
app that fetches the feed again updates each event in place and drops the ones that passed.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from icalendar import Calendar, Event, vDuration

from tasks.ids import idempotency_key
from tasks.models import Task
from tasks.schedule_describe import describe

PRODID = "-//scheduler//calendar feed//EN"
UID_DOMAIN = "scheduler"  # RFC 5545 asks for a UID unique beyond this service: key@domain
REFRESH = timedelta(hours=1)  # how often a calendar app is asked to fetch the feed again


def calendar_ics(title: str, entries: Iterable[tuple[Task, datetime]], *, now: datetime) -> bytes:
    """The feed named `title` with an event per (task, fire time) of `entries`."""
    calendar = Calendar()
    calendar.add("prodid", PRODID)
    calendar.add("version", "2.0")
    calendar.add("calscale", "GREGORIAN")
    calendar.add("method", "PUBLISH")
    calendar.add("x-wr-calname", title)
    calendar.add("refresh-interval", REFRESH, parameters={"VALUE": "DURATION"})
    # An X- property has no known type: given as a vDuration it is written as one (PT1H), not
    # as the timedelta's text (1:00:00), which calendar apps refuse.
    calendar.add("x-published-ttl", vDuration(REFRESH))
    stamp = now.astimezone(UTC).replace(microsecond=0)
    described: dict[str, str] = {}
    for task, at in entries:
        event = Event()
        event.add("uid", f"{idempotency_key(task.pk, at)}@{UID_DOMAIN}")
        event.add("dtstamp", stamp)
        event.add("dtstart", at.astimezone(UTC))
        event.add("summary", task.name or str(task.pk))
        key = str(task.pk)
        if key not in described:
            described[key] = describe(task.schedule)
        event.add("description", described[key])
        event.add("transp", "TRANSPARENT")
        calendar.add_component(event)
    return calendar.to_ical()
