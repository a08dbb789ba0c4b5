"""The admin's rate limits: each key with its window's use and the runs it holds back, as
`/api/v1/rate-limits` lists them. A limit or window changed here is declared (it wins over the
tasks') and goes through the same service as the API's PATCH, which recomputes when the window
frees; the next claim applies it."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from tasks.models import RateKey
from tasks.transitions import rate_limits


@admin.register(RateKey)
class RateKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "rate_limit", "per_seconds", "used", "waiting"]
    list_display += ["next_start_at", "declared", "updated_at"]
    list_filter = ["declared", ("owner", admin.EmptyFieldListFilter)]
    search_fields = ["name"]
    ordering = ["name", "id"]
    fields = ["owner", "name", "rate_limit", "per_seconds", "declared", "held_until"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[RateKey]:
        return rate_limits.with_counts(super().get_queryset(request))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # A key's owner and name are what tasks point at; only the limit and window change.
        fixed = ["declared", "held_until"]
        return ["owner", "name", *fixed] if obj else fixed

    @admin.display(description="starts in the window", ordering="used")
    def used(self, key: Any) -> int:
        return key.used

    @admin.display(description="waiting (due)", ordering="waiting")
    def waiting(self, key: Any) -> int:
        return key.waiting

    @admin.display(description="next start at")
    def next_start_at(self, key: Any) -> Any:
        return key.next_start_at or "-"

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change:
            rate_limits.set_rate(obj, obj.rate_limit, obj.per_seconds)
            return
        obj.declared = True
        super().save_model(request, obj, form, change)
