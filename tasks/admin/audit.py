"""The audit log in the admin: read-only for everyone (no add, change or delete, operators
included), scoped as every list is (tasks/admin/scope.py): a user sees the entries about their
own personal objects and their teams' entries, operators all.

The log grows with every change anyone makes, so the list is built as the run list is: no full
count (EstimatedCountPaginator), a date filter of links and a typed range instead of a date
hierarchy (whose drill-down reads SELECT DISTINCT over the table), and a search each of whose
branches an index serves: an object's id (audit_object_idx), an actor's name (audit_actor_idx)
or the start of an object's name (audit_object_name_idx).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from tasks.admin.lists import CountedToThePage, DateRangeFilter, QuickCheckbox, TeamFilter
from tasks.admin.scope import OwnedAdmin
from tasks.audit import ACTIONS, OBJECT_TYPES
from tasks.audit_log import AuditEntry, visible_entries


class FixedChoices(admin.SimpleListFilter):
    """The vocabulary's words as the choices: Django's default reads SELECT DISTINCT over the
    whole log for them."""

    words: tuple[str, ...] = ()
    field = ""

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [(word, word.replace("_", " ")) for word in self.words]

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        return queryset.filter(**{self.field: self.value()}) if self.value() else queryset


class ActionFilter(FixedChoices):
    title, parameter_name, field, words = "action", "action__exact", "action", ACTIONS


class ObjectTypeFilter(FixedChoices):
    title, parameter_name = "object type", "object_type__exact"
    field, words = "object_type", OBJECT_TYPES


@admin.register(AuditEntry)
class AuditEntryAdmin(CountedToThePage, QuickCheckbox, OwnedAdmin):
    owner_field = ""  # no form: nothing is edited
    list_display = [
        "at",
        "action",
        "object_type",
        "object_name",
        "team",
        "actor_name",
        "client_address",
    ]
    list_filter = [ActionFilter, ObjectTypeFilter, TeamFilter, ("at", DateRangeFilter)]
    search_fields = ["object_id", "actor_name", "object_name"]  # see get_search_results
    search_help_text = "An object's id, an actor's name, or the start of an object's name."
    ordering = ["-id"]
    show_full_result_count = False
    fields = readonly_fields = (
        "at",
        "action",
        "object_type",
        "object_id",
        "object_name",
        "owner",
        "team",
        "actor",
        "actor_name",
        "service_account",
        "token_id",
        "client_address",
        "user_agent",
        "changes",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The API's rule (api/audit.py): a personal object's entries, the user's teams'.
        return visible_entries(request.user).select_related("team")

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        # A range of time by audit_at_idx, read backwards; otherwise the id, newest first.
        return ("-at",) if {"at__gte", "at__lt"} & request.GET.keys() else ("-id",)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        # Each branch one index's; a substring of a name would read the whole log.
        by_object = Q(object_type__in=OBJECT_TYPES, object_id=term)
        found = by_object | Q(actor_name=term) | Q(object_name__istartswith=term)
        return queryset.filter(found), False

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
