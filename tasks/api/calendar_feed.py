"""Calendar feeds: a task's upcoming fire times, or all of a user's, as iCalendar for calendar
apps to subscribe to (docs/api.md, "Calendar feeds"); and the feed's URL and its rotation.

Calendar apps send no Authorization header, so the `.ics` routes take the owner's feed token as
`?token=` instead of a JWT (tasks/feed_tokens.py). A missing or wrong token answers 404, the
same as an unknown task or another user's: the answer tells nothing about which tasks exist.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import Http404, HttpResponse
from django.urls import reverse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import access
from scheduler_project.auth import request_owner
from scheduler_project.web.renderers import ORJSONRenderer
from tasks import feed_tokens, occurrences
from tasks.api.ical import calendar_ics
from tasks.models import Task

FEED_DAYS = 30  # the horizon: fire times within the next 30 days
EVENTS_PER_TASK = 100  # at most this many of one task's fire times
FEED_EVENTS = 1000  # at most this many events in the user-wide feed, the earliest kept

NOT_FOUND = "No calendar feed matches the given query."


class ICalendarRenderer(BaseRenderer):
    """What the `.ics` routes offer, so a calendar app's `Accept: text/calendar` is met: the
    views answer iCalendar bytes themselves, and errors in JSON."""

    media_type = "text/calendar"
    format = "ics"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        return data if isinstance(data, bytes) else b""


def feed_url(token: str, task_id: UUID | None = None) -> str:
    """The absolute URL of a feed (a task's, or the user-wide one for None), token included.
    On SCHEDULER_PUBLIC_URL, as notifications' links are: a calendar app fetches it from
    wherever it runs, so it must be the service's public address, not the one a request came
    in on."""
    path = reverse("calendar-ics") if task_id is None else reverse("task-calendar", args=[task_id])
    return f"{settings.SCHEDULER_PUBLIC_URL.rstrip('/')}{path}?token={token}"


_ANY_TASK = UUID(int=0)


def task_feed_url(token: str) -> Callable[[UUID], str]:
    """feed_url(token, task_id) for many tasks: the route reversed once (a task list page)."""
    before, after = feed_url(token, _ANY_TASK).split(str(_ANY_TASK))
    return lambda task_id: f"{before}{task_id}{after}"


TOKEN = OpenApiParameter(
    "token",
    str,
    required=True,
    description="The owner's calendar feed token, as in `calendar_url` or `GET /calendar-feed`.",
)
# DRF's `?format=` picks no body here (the views write iCalendar): not a parameter of theirs.
NO_FORMAT = OpenApiParameter("format", exclude=True)
ICS_RESPONSES = {
    (200, "text/calendar"): OpenApiResponse(
        OpenApiTypes.STR,
        description=f"iCalendar: a VEVENT per fire time within {FEED_DAYS} days.",
    ),
    (404, "application/json"): OpenApiResponse(
        description="No such feed: a missing or wrong token, or no such task of its owner."
    ),
}
FEED_URL = inline_serializer(
    "CalendarFeedUrl",
    {"url": serializers.URLField(help_text="The user-wide feed's URL, its token included.")},
)


class _FeedView(APIView):
    """An `.ics` route: its token is its authentication; JSON only for errors."""

    authentication_classes = ()
    permission_classes = (AllowAny,)
    renderer_classes = (ICalendarRenderer, ORJSONRenderer)

    def owner_id(self, request: Request) -> int:
        owner = feed_tokens.owner_of(request.query_params.get("token", ""))
        if owner is None:
            raise Http404(NOT_FOUND)
        return owner

    def handle_exception(self, exc: Exception) -> Response:
        response = super().handle_exception(exc)
        self.request.accepted_renderer = ORJSONRenderer()  # errors in the API's own shape
        self.request.accepted_media_type = "application/json"
        return response

    def ics(self, title: str, tasks: list[Task], *, limit: int) -> HttpResponse:
        now = timezone.now()
        until = now + timedelta(days=FEED_DAYS)
        times = occurrences.feed_times(tasks, now=now, until=until, count=EVENTS_PER_TASK)
        entries: list[tuple[Task, datetime]] = sorted(
            ((task, at) for task in tasks for at in times[task.pk]),
            key=lambda entry: (entry[1], str(entry[0].pk)),
        )
        response = HttpResponse(
            calendar_ics(title, entries[:limit], now=now),
            content_type="text/calendar; charset=utf-8",
        )
        # Its URL is a credential: no shared cache keeps a copy.
        response["Cache-Control"] = "private"
        return response


FEED_FIELDS = ("id", "name", "status", "schedule", "next_unplanned_at", "runs_planned")


class TaskCalendarView(_FeedView):
    @extend_schema(
        summary="A task's upcoming fire times as an iCalendar feed",
        description=f"For calendar apps to subscribe to (its URL is the task's `calendar_url`): "
        f"a VEVENT per fire time within the next {FEED_DAYS} days, at most {EVENTS_PER_TASK}, "
        "its UID the run's idempotency key. Excluded occurrences are not listed; a task that "
        "is not active lists none. Authenticated by the owner's feed token in `?token=`, not "
        "a JWT; a wrong or missing token answers 404 as an unknown task does.",
        operation_id="tasks_calendar_ics",
        parameters=[TOKEN, NO_FORMAT],
        responses=ICS_RESPONSES,
    )
    def get(self, request: Request, pk: UUID) -> HttpResponse:
        # Any task the token's user sees: their teams' show the same `calendar_url` as theirs.
        user = get_user_model()(pk=self.owner_id(request))
        task = access.visible(Task.objects.filter(pk=pk), user).only(*FEED_FIELDS).first()
        if task is None:
            raise Http404(NOT_FOUND)
        return self.ics(task.name or str(task.pk), [task], limit=EVENTS_PER_TASK)


class UserCalendarView(_FeedView):
    @extend_schema(
        summary="All of a user's upcoming fire times as an iCalendar feed",
        description=f"The feed of every active task of the token's owner: per task as "
        f"`/tasks/{{id}}/calendar.ics` lists it, at most {FEED_EVENTS} events in all (the "
        "earliest). Its URL is `GET /calendar-feed`'s; a wrong or missing token answers 404.",
        operation_id="calendar_feed_ics",
        tags=["calendar-feed"],
        parameters=[TOKEN, NO_FORMAT],
        responses=ICS_RESPONSES,
    )
    def get(self, request: Request) -> HttpResponse:
        owner = self.owner_id(request)
        active = Task.objects.filter(owner_id=owner, status=Task.Status.ACTIVE)
        tasks = list(active.only(*FEED_FIELDS).order_by("id"))
        return self.ics("Scheduled tasks", tasks, limit=FEED_EVENTS)


ERRORS = {401: OpenApiResponse(description="Missing or invalid token.")}


class CalendarFeedView(APIView):
    @extend_schema(
        summary="The URL of the caller's user-wide calendar feed (its token made on first use)",
        description="The `url` of `/calendar.ics` with the caller's feed token. The token is "
        "made on the caller's first use (this, or a task read) and stays until rotated.",
        operation_id="calendar_feed_retrieve",
        request=None,
        responses={200: FEED_URL, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        return Response({"url": feed_url(feed_tokens.token_for(request_owner(request).pk))})


class CalendarFeedRotateView(APIView):
    @extend_schema(
        summary="Replace the caller's calendar feed token: every feed URL given before stops",
        description="The new `url`. The user-wide feed and every task's "
        "`calendar_url` carry it from now on; URLs with the old token answer 404.",
        operation_id="calendar_feed_rotate",
        request=None,
        responses={200: FEED_URL, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        return Response({"url": feed_url(feed_tokens.rotate(request_owner(request).pk))})
