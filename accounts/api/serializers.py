"""The bodies of the team routes (docs/api.md, Teams)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone
from rest_framework import serializers

from accounts.models import ApiToken, Membership, ServiceAccount, Team
from accounts.tokens import SCOPES
from tasks.api.strict import ChoiceField, StrictSerializer

MAX_TOKEN_DAYS = 366
DEFAULT_TOKEN_DAYS = 90
NAME = r"^[a-z0-9][a-z0-9_-]{0,99}$"
SERVICE_ROLES = ["viewer", "editor"]  # a machine never manages its team


class TeamInputSerializer(StrictSerializer):
    slug = serializers.RegexField(NAME, max_length=100)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")

    def validate_slug(self, value: str) -> str:
        if Team.objects.filter(slug=value).exists():
            raise serializers.ValidationError("A team with this slug exists.")
        return value


class TeamOutputSerializer(serializers.ModelSerializer):
    role = serializers.CharField(read_only=True, help_text="The caller's role in the team.")

    class Meta:
        model = Team
        fields = ["slug", "name", "role", "created_at"]


class MemberInputSerializer(StrictSerializer):
    user = serializers.CharField(max_length=150, help_text="The person's username.")
    role = ChoiceField(choices=Membership.Role.choices)


class RoleSerializer(StrictSerializer):
    role = ChoiceField(choices=Membership.Role.choices)


class MemberOutputSerializer(serializers.ModelSerializer):
    user = serializers.CharField(source="user.username", read_only=True)
    service_account = serializers.SerializerMethodField()

    class Meta:
        model = Membership
        fields = ["user", "role", "service_account", "created_at"]

    def get_service_account(self, membership: Membership) -> bool:
        return hasattr(membership.user, "service_account")


class ServiceAccountInputSerializer(StrictSerializer):
    name = serializers.RegexField(NAME, max_length=100)
    role = ChoiceField(choices=SERVICE_ROLES, default=Membership.Role.EDITOR)


class ServiceAccountOutputSerializer(serializers.ModelSerializer):
    user = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = ServiceAccount
        fields = ["name", "user", "created_at"]


class TokenInputSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100)
    scopes = serializers.ListField(child=ChoiceField(choices=SCOPES), min_length=1)
    expires_at = serializers.DateTimeField(
        required=False,
        help_text=f"At most {MAX_TOKEN_DAYS} days ahead; {DEFAULT_TOKEN_DAYS} days by default.",
    )

    def validate_expires_at(self, value: datetime) -> datetime:
        now = timezone.now()
        if value <= now:
            raise serializers.ValidationError("Must be in the future.")
        if value > now + timedelta(days=MAX_TOKEN_DAYS):
            raise serializers.ValidationError(f"At most {MAX_TOKEN_DAYS} days ahead.")
        return value

    def validate(self, attrs: dict) -> dict:
        attrs.setdefault("expires_at", timezone.now() + timedelta(days=DEFAULT_TOKEN_DAYS))
        return attrs


class TokenOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = ["id", "name", "scopes", "expires_at", "created_at", "last_used_at", "revoked_at"]


class TokenCreatedSerializer(TokenOutputSerializer):
    token = serializers.SerializerMethodField(help_text="The token's text: shown this once.")

    class Meta(TokenOutputSerializer.Meta):
        fields = [*TokenOutputSerializer.Meta.fields, "token"]

    def get_token(self, token: ApiToken) -> str:
        return str(self.context["text"])
