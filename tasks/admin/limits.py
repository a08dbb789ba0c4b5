"""The admin's limit keys, both kinds on one admin (`LimitKeyAdmin`): each key with what it
counts, as the API lists them; limits set here are declared, through the API's service."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from tasks.admin.scope import AuditedDeletes
from tasks.admin.timeline import timeline_url
from tasks.models import ConcurrencyKey, RateKey
from tasks.transitions import limits


def counted(count: str, description: str, *, sortable: bool = True) -> Any:
    """A column of a count `limits.with_counts` puts on each key ("-" for none)."""

    @admin.display(description=description, ordering=count if sortable else None)
    def column(self: Any, key: Any) -> Any:
        value = getattr(key, count)
        return "-" if value is None else value

    return column


class LimitKeyAdmin(AuditedDeletes):
    """A kind's admin gives `kind` (its limits and counts are columns), `claimed` (what claims
    keep on the key: shown, never saved) and `timeline_param` (the timeline's, for its keys)."""

    kind: limits.Kind
    claimed: list[str]
    timeline_param: str
    list_filter = ["declared", ("owner", admin.EmptyFieldListFilter)]
    search_fields = ["name"]
    ordering = ["name", "id"]
    list_select_related = ["owner"]  # the owner column: one join, not a query per key
    running = counted("running", "running")
    used = counted("used", "starts in the window")
    next_start_at = counted("next_start_at", "next start at", sortable=False)
    waiting = counted("waiting", "waiting (due)")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        columns = [*cls.kind.limits.values(), *cls.kind.counts(), "waiting", "declared"]
        cls.list_display = ["name", "owner", *columns, "updated_at", "timeline"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = ["owner", "name", *self.kind.limits.values(), "declared", *self.claimed]
        return [*fields, "timeline"] if obj else fields

    def audit_type(self) -> str:
        return self.kind.key_field

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return limits.with_counts(self.kind, super().get_queryset(request))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # A key's owner and name are what tasks point at; only its limits change.
        fixed = ["declared", *self.claimed]
        return ["owner", "name", *fixed, "timeline"] if obj else fixed

    @admin.display(description="runs")
    def timeline(self, key: Any) -> SafeString:  # the key's runs across the tasks that use it
        return format_html('<a href="{}">Timeline</a>', timeline_url(self.timeline_param, key.pk))

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change:  # the limits only, never what claims keep on the key
            given = {name: getattr(obj, column) for name, column in self.kind.limits.items()}
            return limits.set_limits(self.kind, obj, given)
        obj.declared = True
        super().save_model(request, obj, form, change)
        limits.record_created(self.kind, obj)  # in the admin's transaction


@admin.register(ConcurrencyKey)
class ConcurrencyKeyAdmin(LimitKeyAdmin):
    kind, claimed, timeline_param = limits.CONCURRENCY, ["admitted"], "key"


@admin.register(RateKey)
class RateKeyAdmin(LimitKeyAdmin):
    kind, claimed, timeline_param = limits.RATE, ["held_until"], "rate_key"
