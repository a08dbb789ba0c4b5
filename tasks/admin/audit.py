"""The audit log in the admin: read-only for everyone (no add, change or delete, operators
included), scoped as every list is (tasks/admin/scope.py): a user sees the entries about their
own personal objects and their teams' entries, operators all."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from tasks.admin.lists import TeamFilter
from tasks.admin.scope import OwnedAdmin
from tasks.audit_log import AuditEntry, visible_entries


@admin.register(AuditEntry)
class AuditEntryAdmin(OwnedAdmin):
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
    list_filter = ["action", "object_type", TeamFilter]
    search_fields = ["object_id", "object_name", "actor_name", "service_account"]
    date_hierarchy = "at"
    ordering = ["-id"]
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

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
