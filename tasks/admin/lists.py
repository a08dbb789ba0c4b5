"""Changelist helpers that stay fast on tables with millions of rows: no full counts, static
filters (no SELECT DISTINCT over the table), uuid search through the primary key."""

from __future__ import annotations

import uuid
from datetime import datetime, time
from typing import Any

from django.contrib import admin
from django.contrib.admin import helpers
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from accounts.models import Team
from tasks import expectations, history, schedules
from tasks.admin.scope import is_operator
from tasks.models import HEALTHS

# A filtered list is counted exactly up to this many rows, then shown as "10000+".
COUNT_CAP = 10_000
# ... and on its first pages up to this many: enough for the pages the paginator links from
# there, a tenth of the reads (a user's failed runs, scattered over the table, took 0.1-0.3 s
# to count to 10,000 on a loaded machine). Each page further counts one page more.
COUNT_FIRST = 1_000


def estimated_rows(table: str) -> int:
    """The planner's row estimate (kept by autovacuum/ANALYZE): free, and close enough for paging.
    -1 when the table was never analysed."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass", [table])
        row = cursor.fetchone()
    return int(row[0]) if row else -1


class AtLeast(int):
    """A count that stopped at its cap: pages as the number, reads "1000+" on the page."""

    def __str__(self) -> str:
        return f"{int(self)}+"


class EstimatedCountPaginator(Paginator):
    """Never counts a big table. Unfiltered: the planner's estimate. Filtered: an exact count
    that stops at COUNT_CAP (`SELECT count(*) FROM (... LIMIT cap)`), so it costs at most as much
    as reading COUNT_CAP index entries."""

    cap: int | None = None  # COUNT_CAP unless the admin sets one (CountedToThePage)

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        if isinstance(queryset, QuerySet) and not queryset.query.where:
            estimate = estimated_rows(queryset.model._meta.db_table)
            if estimate >= COUNT_CAP:
                return estimate
        if isinstance(queryset, QuerySet):
            # The rows only: the list's annotations (a task's next and last run, two index
            # probes each) are for the rows shown, not for the up to COUNT_CAP rows counted.
            cap = self.cap or COUNT_CAP
            counted = queryset.order_by().values("pk")[:cap].count()
            return AtLeast(counted) if counted >= cap else counted
        return len(queryset)


class CountedToThePage(admin.ModelAdmin):
    """A filtered list counted as far as the page asked for needs: COUNT_FIRST rows from the
    first pages, ten pages beyond the page asked for deeper in, at most COUNT_CAP."""

    paginator = EstimatedCountPaginator

    def get_paginator(self, request: Any, queryset: Any, per_page: int, *args: Any) -> Any:
        paginator = super().get_paginator(request, queryset, per_page, *args)
        if isinstance(paginator, EstimatedCountPaginator):
            page = request.GET.get("p", "")
            number = int(page) if page.isdigit() else 1
            paginator.cap = min(COUNT_CAP, max(COUNT_FIRST, (number + 10) * per_page))
        return paginator


class QuickCheckbox(admin.ModelAdmin):
    """The list's action checkbox written out, as Django's widget renders it (class, name,
    value, aria-label): rendering a form widget through the template engine for each of a page's
    hundred rows took about a third of the list's time."""

    def action_checkbox(self, obj: Any) -> SafeString:
        label = format_html(_("Select this object for an action - {}"), str(obj))
        return format_html(
            '<input type="checkbox" name="{}" value="{}" class="action-select" aria-label="{}">',
            helpers.ACTION_CHECKBOX_NAME,
            str(obj.pk),
            label,
        )


def parse_uuid(term: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(term.strip())
    except ValueError:
        return None


class PriorityFilter(admin.SimpleListFilter):
    """Static 0-9 choices: Django's default would SELECT DISTINCT priority over the table."""

    title = "priority"
    parameter_name = "priority"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        names = {1: "1 (low)", 5: "5 (medium)", 9: "9 (high)"}
        return [(str(p), names.get(p, str(p))) for p in range(9, -1, -1)]

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if value is not None and value.isdigit():
            return queryset.filter(priority=int(value))
        return queryset


class HealthFilter(admin.SimpleListFilter):
    """A task's health against its expectations (`up` includes tasks that expect nothing)."""

    title = "health"
    parameter_name = "health"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [(h, h) for h in HEALTHS]

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        value = self.value()
        return expectations.with_health(queryset, value) if value in HEALTHS else queryset


class LastRunFilter(admin.SimpleListFilter):
    """Tasks by their last run's status (tasks/history.py last_run): one probe of the (task,
    scheduled_at) index per task of one owner; for "failed", per task of theirs with a failed run
    (history.last_run_failed: few tasks have one, where a page of tasks whose last run
    succeeded is found in the first tasks read). Offered on one owner's tasks only (a user's own,
    or an operator's list filtered by owner): across every owner it would probe every task."""

    title = "last run"
    parameter_name = "last_run"
    STATUSES = ("failed", "succeeded", "running")

    def _one_owner(self, request: Any) -> bool:
        return not is_operator(request.user) or bool(request.GET.get("owner"))

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [(s, s) for s in self.STATUSES] if self._one_owner(request) else []

    def has_output(self) -> bool:
        # Applied when given, so that a link without an owner is refused, not ignored.
        return super().has_output() or self.value() is not None

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if value is None:
            return queryset
        if value not in self.STATUSES or not self._one_owner(request):
            raise IncorrectLookupParameters(f"last_run={value!r} (one owner's tasks only)")
        if value == "failed":
            return queryset.alias(last_run_is=history.last_run_failed()).filter(last_run_is=value)
        return queryset.alias(last_run_is=history.last_run("status")).filter(last_run_is=value)


class ScheduleTypeFilter(admin.SimpleListFilter):
    title = "schedule"
    parameter_name = "schedule_type"
    TYPES = schedules.TYPES

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [(t, t) for t in self.TYPES]

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        return queryset.filter(schedule_type=self.value()) if self.value() else queryset


class OwnerFilter(admin.SimpleListFilter):
    """The first 30 users by name, plus whatever `?owner=<id>` a link carries: listing owners
    from the tasks table would scan it."""

    title = "owner"
    parameter_name = "owner"
    SHOWN = 30

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        users = get_user_model().objects.order_by("username").values_list("pk", "username")
        choices = [(str(pk), name) for pk, name in users[: self.SHOWN]]
        value = self.value()
        if value and value not in {pk for pk, _ in choices}:
            choices.append((value, f"user {value}"))
        return choices

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if value and value.isdigit():
            return queryset.filter(owner_id=int(value))
        return queryset


class TeamFilter(admin.SimpleListFilter):
    """The user's teams by slug (an operator's: the first 30 teams, plus whatever `?team=<slug>`
    a link carries). Filters the rows of one team; a list is already scoped to what the user
    may see, so another team's slug shows nothing."""

    title = "team"
    parameter_name = "team"
    SHOWN = 30

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        teams = Team.objects.order_by("slug")
        if not is_operator(request.user):
            teams = teams.filter(memberships__user_id=request.user.pk)
        choices = [(slug, slug) for slug in teams.values_list("slug", flat=True)[: self.SHOWN]]
        value = self.value()
        if value and value not in {slug for slug, _ in choices}:
            choices.append((value, value))
        return choices

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        value = self.value()
        return queryset.filter(team__slug=value) if value else queryset


def parse_instant(text: str) -> datetime | None:
    """`2026-12-01`, `2026-12-01 08:30[:00]` or ISO 8601 with a zone; without one, the admin's
    time zone (the one it shows times in). None when it is none of these."""
    text = text.strip()
    try:
        at = parse_datetime(text)
        if at is None:
            day = parse_date(text)
            at = datetime.combine(day, time()) if day else None
    except ValueError:  # well formed, but no such date or time
        return None
    if at is not None and timezone.is_naive(at):
        at = timezone.make_aware(at)
    return at


class DateRangeFilter(admin.DateFieldListFilter):
    """The date links (today, past 7 days, ...) and a range typed in: from (inclusive) and
    before (exclusive), the same two parameters, so one index range scan serves both."""

    template = "admin/tasks/date_range_filter.html"

    def __init__(self, field: Any, request: Any, params: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(field, request, params, *args, **kwargs)
        ours = {self.lookup_kwarg_since, self.lookup_kwarg_until, "p"}
        # The form sends the list's other filters and search along with the range.
        self.kept = [(k, v) for k, values in request.GET.lists() if k not in ours for v in values]
        self.since = request.GET.get(self.lookup_kwarg_since, "")
        self.until = request.GET.get(self.lookup_kwarg_until, "")

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        bounds = {}
        for key in (self.lookup_kwarg_since, self.lookup_kwarg_until):
            values = self.used_parameters.get(key) or []
            text = str(values[-1]) if isinstance(values, list) and values else str(values or "")
            if not text.strip():
                continue  # the form's other field left empty
            at = parse_instant(text)
            if at is None:
                raise IncorrectLookupParameters(f"{key}: not a date or time: {text!r}")
            bounds[key] = at
        return queryset.filter(**bounds)


class CancelledFilter(admin.SimpleListFilter):
    """Cancelled tasks are out of the list unless asked for (`?cancelled=shown`), or unless the
    status filter asks for them by name."""

    title = "cancelled tasks"
    parameter_name = "cancelled"
    SHOWN = "shown"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [(self.SHOWN, "shown")]

    def choices(self, changelist: Any) -> Any:
        for choice in super().choices(changelist):
            if choice["query_string"] == changelist.get_query_string(remove=[self.parameter_name]):
                choice["display"] = "hidden"
            yield choice

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        if self.value() == self.SHOWN or request.GET.get("status__exact") == "cancelled":
            return queryset
        return queryset.exclude(status="cancelled")
