"""Limit keys, both kinds through one view (`KeyViewSet`): list a user's keys (and the global
ones) with what each counts, declare one, change its limits (the next claim applies them).
`/concurrency-keys` and `/rate-limits` differ only in their `KeyRoutes`: the kind and the
bodies it reads and answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path
from drf_spectacular.utils import OpenApiResponse
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from accounts import access
from scheduler_project.auth import request_owner
from scheduler_project.schema import AutoSchema
from tasks.api.serializers import KEY_NAME, key_limit, key_scope, rate_per
from tasks.api.strict import StrictSerializer
from tasks.models import ConcurrencyKey, RateKey
from tasks.transitions import limits

ERRORS = {
    400: OpenApiResponse(description="Invalid input; the body names the field."),
    401: OpenApiResponse(description="Missing or invalid token."),
    403: OpenApiResponse(description="A global key: operators (staff users) only."),
    404: OpenApiResponse(description="No such key among the caller's own and the global ones."),
}


class KeyInputSerializer(StrictSerializer):
    key = serializers.RegexField(KEY_NAME, max_length=200)
    limit = key_limit()
    scope = key_scope()
    team = serializers.SlugField(max_length=100, required=False, allow_null=True)


class RateKeyInputSerializer(StrictSerializer):
    key = serializers.RegexField(KEY_NAME, max_length=200)
    limit = key_limit()
    per = rate_per()
    scope = key_scope()
    team = serializers.SlugField(max_length=100, required=False, allow_null=True)


class KeyLimitSerializer(StrictSerializer):
    limit = key_limit()


class RateKeyChangeSerializer(StrictSerializer):
    limit = key_limit(required=False)
    per = rate_per(required=False)


# A concurrency key as listed; the base of a rate key's.
class KeyOutputSerializer(serializers.ModelSerializer):
    key = serializers.CharField(source="name", read_only=True)
    team: serializers.Field = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )
    scope = serializers.SerializerMethodField()
    limit = serializers.IntegerField(source="max_running", read_only=True)
    declared = serializers.BooleanField(
        read_only=True,
        help_text="Set on the key itself: its limit wins over the tasks'. Until then the "
        "latest task naming the key set it.",
    )
    running = serializers.IntegerField(read_only=True, help_text="Its runs running now.")
    waiting = serializers.IntegerField(
        read_only=True, help_text="Its runs due and not yet claimed (held by the key or queued)."
    )

    class Meta:
        model = ConcurrencyKey
        fields = ["id", "key", "scope", "limit", "declared", "running", "waiting", "updated_at"]
        fields += ["team"]

    def get_scope(self, key: Any) -> str:
        return "global" if key.owner_id is None else "owner"


class RateKeyOutputSerializer(KeyOutputSerializer):
    limit = serializers.IntegerField(source="rate_limit", read_only=True)
    per = serializers.IntegerField(source="per_seconds", read_only=True, help_text="Seconds.")
    declared = serializers.BooleanField(
        read_only=True,
        help_text="Set on the key itself: its limit and window win over the tasks'. Until "
        "then the latest task naming the key set them.",
    )
    used = serializers.IntegerField(
        read_only=True, help_text="Runs started in the last `per` seconds (at most `limit`)."
    )
    next_start_at = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="While the window is full: when the next run may start; else null.",
    )

    class Meta:
        model = RateKey
        fields = ["id", "key", "scope", "limit", "per", "declared", "used", "next_start_at"]
        fields += ["waiting", "updated_at", "team"]


@dataclass(frozen=True)
class KeyRoutes:
    """What a kind's routes read and answer."""

    kind: limits.Kind
    declare: type[serializers.Serializer]  # POST
    change: type[serializers.Serializer]  # PATCH: limits not given keep their value
    output: type[serializers.Serializer]


CONCURRENCY_KEYS = KeyRoutes(
    limits.CONCURRENCY, KeyInputSerializer, KeyLimitSerializer, KeyOutputSerializer
)
RATE_LIMITS = KeyRoutes(
    limits.RATE, RateKeyInputSerializer, RateKeyChangeSerializer, RateKeyOutputSerializer
)


class KeySchema(AutoSchema):
    """The bodies of the view's kind, which decorators (fixed per class) cannot name."""

    def get_request_serializer(self) -> Any:
        view = cast(KeyViewSet, self.view)
        return {"create": view.routes.declare, "partial_update": view.routes.change}.get(
            view.action
        )

    def get_response_serializers(self) -> Any:
        view = cast(KeyViewSet, self.view)
        if view.action == "list":
            return super().get_response_serializers()
        output = view.routes.output
        answers = {201: output, 200: output} if view.action == "create" else {200: output}
        return {**answers, **ERRORS}


class KeyViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    schema = KeySchema()
    routes = CONCURRENCY_KEYS  # each route gives its own (urls below)

    def get_queryset(self) -> QuerySet[Any]:
        if getattr(self, "swagger_fake_view", False):
            return self.routes.kind.model.objects.none()
        return limits.visible_keys(self.routes.kind, request_owner(self.request))

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return self.routes.output

    def retrieve(self, request: Request, pk: int) -> Response:
        return Response(self.routes.output(get_object_or_404(self.get_queryset(), pk=pk)).data)

    def create(self, request: Request) -> Response:
        serializer = self.routes.declare(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        scope = data.get("scope", "owner")
        owner = request_owner(request)
        self._may_change(None if scope == limits.GLOBAL else owner)
        team = access.place(owner, None, {"team": data["team"]} if "team" in data else {})
        key, created = limits.declare(
            kind=self.routes.kind,
            owner=owner,
            name=data["key"],
            limits=data,
            scope=scope,
            team=team.get("team"),
        )
        body = self.routes.output(self.get_queryset().get(pk=key.pk)).data
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    def partial_update(self, request: Request, pk: int) -> Response:
        key = get_object_or_404(self.get_queryset(), pk=pk)
        self._may_change(key.owner_id)
        if key.owner_id is not None:
            access.require(request_owner(request), key, access.EDITOR)
        serializer = self.routes.change(data=request.data)
        serializer.is_valid(raise_exception=True)
        limits.set_limits(self.routes.kind, key, serializer.validated_data)
        return Response(self.routes.output(self.get_queryset().get(pk=pk)).data)

    def _may_change(self, key_owner: Any) -> None:
        if key_owner is None and not request_owner(self.request).is_staff:
            raise PermissionDenied("Only operators (staff users) change global keys.")


def key_urls(prefix: str, name: str, routes: KeyRoutes) -> list[URLPattern]:
    """The list (GET, POST) and detail (GET, PATCH) routes of one kind of key."""
    listed = KeyViewSet.as_view({"get": "list", "post": "create"}, routes=routes)
    detail = KeyViewSet.as_view({"get": "retrieve", "patch": "partial_update"}, routes=routes)
    return [path(prefix, listed, name=f"{name}s"), path(f"{prefix}/<int:pk>", detail, name=name)]
