"""The admin for everyone: a signed-in user sees and acts on their own objects and their teams'
(accounts/access.py decides, as for the API), operators on everyone's.

Every list, change page, history page, search, filter, action and autocomplete of a model admin
reads `get_queryset`, so scoping it scopes them all; an object outside it is a 404 (not the
admin's "does not exist" redirect, which would tell a guessed id from a wrong one only by
wording). Operators are staff (`is_staff`; with OIDC, members of `OIDC_OPERATOR_GROUP`), and keep
Django's own permissions; everyone else gets view, add and change on what they own, never
delete, and never an owner field or filter that would list other users.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import Http404, HttpRequest
from rest_framework.exceptions import PermissionDenied

from accounts import access
from accounts.access import is_operator
from tasks import audit


class AuditedDeletes(admin.ModelAdmin):
    """An operator's deletes, recorded in the audit log in the admin's transaction (an admin
    whose delete goes through a transition overrides `delete_model` and records there)."""

    def audit_type(self) -> str:
        return self.model._meta.model_name or ""

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        audit.record(audit.entry("delete", self.audit_type(), obj))
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        kind = self.audit_type()
        audit.record_all(audit.entry("delete", kind, obj) for obj in queryset.order_by("pk"))
        super().delete_queryset(request, queryset)


class OwnedAdmin(AuditedDeletes):
    """A model admin whose rows belong to `owner_path` (a user, through a lookup path)."""

    owner_path = "owner"
    team_path = ""  # the lookup path of the rows' team; "" derives it from owner_path
    owner_field = "owner"  # the form field that picks the owner (operators only), if any

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request)
        if is_operator(request.user):
            return queryset
        # What the API shows the user (accounts/access.py): their own rows, their teams'.
        team = self._team_path()
        return access.visible(queryset, request.user, owner=self.owner_path, team=team)

    def _team_path(self) -> str:
        return self.team_path or self.owner_path.replace("owner", "team")

    def changeable_rows(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        """The rows of `queryset` the user may change: a team's viewer sees its rows, but an
        action (selected or bulk) leaves them alone."""
        if is_operator(request.user):
            return queryset
        return access.changeable(
            queryset, request.user, owner=self.owner_path, team=self._team_path()
        )

    def response_action(
        self, request: HttpRequest, queryset: QuerySet, *args: Any, **kwargs: Any
    ) -> Any:
        narrowed = self.changeable_rows(request, queryset)
        return super().response_action(request, narrowed, *args, **kwargs)

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None) -> Any:
        found = super().get_object(request, object_id, from_field)
        if found is None:
            raise Http404("No such object.")
        return found

    def get_list_filter(self, request: HttpRequest) -> Any:
        filters = list(super().get_list_filter(request))
        if is_operator(request.user):
            return filters
        return [f for f in filters if getattr(f, "parameter_name", None) != "owner"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(super().get_readonly_fields(request, obj))
        if self.owner_field and not is_operator(request.user) and self.owner_field not in fields:
            fields.append(self.owner_field)
        return fields

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any):
        form = super().get_form(request, obj, change, **kwargs)
        if is_operator(request.user) or not self.owner_field:
            return form
        owner, field = request.user, self.owner_field

        class OwnForm(form):  # type: ignore[valid-type,misc]
            """A new object is the signed-in user's: its validation sees its owner already."""

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                if self.instance.pk is None:
                    setattr(self.instance, field, owner)

        return OwnForm

    def has_module_permission(self, request: HttpRequest) -> bool:
        if is_operator(request.user):
            return super().has_module_permission(request)
        return bool(request.user.is_active)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if is_operator(request.user):
            return super().has_view_permission(request, obj)
        return bool(request.user.is_active)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if is_operator(request.user):
            return super().has_change_permission(request, obj)
        if not request.user.is_active:
            return False
        # A team's viewer gets the page as anyone does (the task form has fields only a form
        # shows, no read-only rendering), and a 403 for saving it.
        return obj is None or request.method != "POST" or self._may_change(request, obj)

    def _may_change(self, request: HttpRequest, obj: Any) -> bool:
        """Whether the user may change `obj`: not as a team's viewer (accounts/access.py)."""
        *path, last = self._team_path().split("__")
        holder = obj
        for step in path:
            holder = getattr(holder, step)
        team_id = getattr(holder, f"{last}_id")
        if team_id is None:
            return True  # the user's own (the queryset holds no one else's)
        try:
            access.require(request.user, obj, access.EDITOR, team_id=team_id)
        except (Http404, PermissionDenied):
            return False
        return True

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        if is_operator(request.user):
            return super().has_add_permission(request, *args)
        return bool(request.user.is_active)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_operator(request.user) and super().has_delete_permission(request, obj)


class OwnedInline:
    """An inline on an owned admin's page: shown to whoever may see the page (the parent's
    queryset already decided that)."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_active)
