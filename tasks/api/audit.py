"""GET /api/v1/audit: the audit log (docs/api.md, "Audit log"), read-only.

A user reads the entries about their own personal objects (the entry's `owner`, who owned the
object when it changed) and the admin actions they did on many rows, and every entry of the
teams they are a member of (the entry's `team`, the object's team when it changed), by the rule
of the objects themselves (accounts/access.py); operators (staff) read all.
"""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import generics, serializers

from scheduler_project.auth import request_owner
from tasks.api.filtering import UtcIsoDateTimeFilter
from tasks.api.views import ERRORS
from tasks.audit import ACTIONS, OBJECT_TYPES
from tasks.audit_log import AuditEntry, visible_entries


class AuditEntrySerializer(serializers.ModelSerializer):
    actor = serializers.SerializerMethodField(
        help_text="Who acted: a user (`id` null for a command line), a service account and its "
        "token; null outside any request or command."
    )
    object = serializers.SerializerMethodField(help_text="What was acted on.")
    team: serializers.SlugRelatedField = serializers.SlugRelatedField(
        slug_field="slug",
        read_only=True,
        allow_null=True,
        help_text="The object's team when it changed (its slug); null for a personal object.",
    )
    changes = serializers.JSONField(
        help_text="An update's {field: [before, after]}; a bulk action's filter and count; "
        "an action's details."
    )

    class Meta:
        model = AuditEntry
        fields = [
            "id",
            "at",
            "action",
            "actor",
            "client_address",
            "user_agent",
            "object",
            "team",
            "changes",
        ]

    def get_actor(self, entry: AuditEntry) -> dict | None:
        if entry.actor_id is None and not entry.actor_name and not entry.service_account:
            return None
        return {
            "id": entry.actor_id,
            "username": entry.actor_name,
            "service_account": entry.service_account or None,
            "token_id": entry.token_id or None,
        }

    def get_object(self, entry: AuditEntry) -> dict:
        return {"type": entry.object_type, "id": entry.object_id, "name": entry.object_name}


class AuditFilter(django_filters.FilterSet):
    action = django_filters.MultipleChoiceFilter(
        choices=[(a, a) for a in ACTIONS], help_text="One or more actions (repeat the parameter)."
    )
    object_type = django_filters.ChoiceFilter(choices=[(t, t) for t in OBJECT_TYPES])
    object_id = django_filters.CharFilter(help_text="One object's entries (with object_type).")
    actor = django_filters.CharFilter(field_name="actor_name", help_text="The actor's username.")
    service_account = django_filters.CharFilter()
    team = django_filters.CharFilter(field_name="team__slug", help_text="One team's (its slug).")
    after = UtcIsoDateTimeFilter(field_name="at", lookup_expr="gte", help_text="at or after")
    before = UtcIsoDateTimeFilter(field_name="at", lookup_expr="lt", help_text="before")

    class Meta:
        model = AuditEntry
        fields = [
            "action",
            "object_type",
            "object_id",
            "actor",
            "service_account",
            "team",
            "after",
            "before",
        ]


@extend_schema_view(
    get=extend_schema(
        summary="The audit log: who changed what, when, from where",
        description="Newest first; paginated as every list.",
        responses={200: AuditEntrySerializer(many=True), 400: ERRORS[400], 401: ERRORS[401]},
    )
)
class AuditListView(generics.ListAPIView):
    serializer_class = AuditEntrySerializer
    filterset_class = AuditFilter
    ordering_fields = ["at", "id"]
    ordering = ["-id"]

    def get_queryset(self) -> QuerySet[AuditEntry]:
        if getattr(self, "swagger_fake_view", False):
            return AuditEntry.objects.none()
        return visible_entries(request_owner(self.request)).select_related("team")
