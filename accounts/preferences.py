"""The zone the console shows a user's times in: their `Preference`, UTC until they pick one.

`ViewerZoneMiddleware` activates it for each signed-in request, so every time the admin renders
(lists, pages, the timeline) is in it; `zone_view` is the page that sets it.
"""

from __future__ import annotations

import functools
import zoneinfo
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme

from accounts.models import Preference

DEFAULT_ZONE = "UTC"


@functools.cache
def zone_names() -> frozenset[str]:
    """The IANA zones this machine knows, read once: `available_timezones()` walks the tz
    database's folder on every call, which cost every signed-in request 5 to 40 ms."""
    return frozenset(zoneinfo.available_timezones())


def zone_name_of(user: Any) -> str:
    """The user's chosen zone's name (DEFAULT_ZONE when none, or anonymous)."""
    if not getattr(user, "is_authenticated", False):
        return DEFAULT_ZONE
    chosen = Preference.objects.filter(user=user).values_list("timezone", flat=True).first()
    return chosen if chosen in zone_names() else DEFAULT_ZONE


def set_zone(*, user: Any, zone: str) -> None:
    """Keep `zone` (a valid IANA name) as the user's; one row per user, last write wins."""
    Preference.objects.update_or_create(user=user, defaults={"timezone": zone})


class ViewerZoneMiddleware:
    """Times rendered for a signed-in user are in their zone (after AuthenticationMiddleware)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return self.get_response(request)
        timezone.activate(zoneinfo.ZoneInfo(zone_name_of(user)))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


def zone_view(request: HttpRequest) -> HttpResponse:
    """GET: the form; POST `timezone`: kept, then back to `next` (400 naming the field when
    it is not a zone)."""
    back = request.POST.get("next") or request.GET.get("next") or ""
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = ""
    status = 200
    error = ""
    if request.method == "POST":
        zone = request.POST.get("timezone", "").strip()
        if zone in zone_names():
            set_zone(user=request.user, zone=zone)
            messages.success(request, f"Times are shown in {zone}.")
            return HttpResponseRedirect(back or request.path)
        status, error = 400, f"timezone: {zone!r} is not a time zone (e.g. Europe/Berlin)."
    context = {
        **admin.site.each_context(request),
        "title": "Time zone",
        "zones": sorted(zoneinfo.available_timezones()),
        "current": zone_name_of(request.user),
        "next": back,
        "error": error,
    }
    return TemplateResponse(request, "accounts/zone.html", context, status=status)
