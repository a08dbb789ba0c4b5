"""Limit keys, both kinds through one view (`KeyViewSet`): list a user's keys (and the global
ones) with what each counts, declare one, change its limits (the next claim applies them). A
kind's routes (`KeyRoutes`) differ only in the bodies, built from its `limits.Kind`."""

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
from tasks.api.serializers import key_fields
from tasks.api.strict import StrictSerializer
from tasks.transitions import limits

ERRORS = {
    400: OpenApiResponse(description="Invalid input; the body names the field."),
    401: OpenApiResponse(description="Missing or invalid token."),
    403: OpenApiResponse(description="A global key: operators (staff users) only."),
    404: OpenApiResponse(description="No such key among the caller's own and the global ones."),
}
# What the listed keys count (limits.with_counts), as the output shows them; "per" is a limit.
PER_HELP = "Seconds."
COUNTS: dict[str, serializers.Field] = {
    "running": serializers.IntegerField(read_only=True, help_text="Its runs running now."),
    "used": serializers.IntegerField(
        read_only=True, help_text="Runs started in the last `per` seconds (at most `limit`)."
    ),
    "next_start_at": serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="While the window is full: when the next run may start; else null.",
    ),
    "waiting": serializers.IntegerField(
        read_only=True, help_text="Its runs due and not yet claimed (held by the key or queued)."
    ),
}


@dataclass(frozen=True)
class KeyRoutes:
    """What a kind's routes read (POST; PATCH: limits not given keep their value) and answer."""

    kind: limits.Kind
    declare: type[serializers.Serializer]
    change: type[serializers.Serializer]
    output: type[serializers.Serializer]


# A listed key's `scope`; typed, and with no docstring: the schema reads its type (and would
# read a docstring as the field's description) from here.
def _scope(serializer: Any, key: Any) -> str:
    return "global" if key.owner_id is None else "owner"


def key_routes(kind: limits.Kind, name: str, change: str, declared: str) -> KeyRoutes:
    """`kind`'s bodies, named `{name}InputSerializer`, `{change}Serializer` and
    `{name}OutputSerializer`."""
    declare = key_fields(kind)
    declare["team"] = serializers.SlugField(max_length=100, required=False, allow_null=True)
    changed = {n: f for n, f in key_fields(kind, required=False).items() if n in kind.limits}
    shown: dict[str, Any] = {"key": serializers.CharField(source="name", read_only=True)}
    shown["team"] = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    shown["scope"] = serializers.SerializerMethodField()
    shown["declared"] = serializers.BooleanField(read_only=True, help_text=declared)
    for limit, column in kind.limits.items():
        help_text = PER_HELP if limit == "per" else None
        shown[limit] = serializers.IntegerField(source=column, read_only=True, help_text=help_text)
    shown.update({count: COUNTS[count] for count in [*kind.counts(), "waiting"]})
    fields = ["id", "key", "scope", *kind.limits, "declared", *kind.counts(), "waiting"]
    meta = {"model": kind.model, "fields": [*fields, "updated_at", "team"]}
    shown["Meta"] = type("Meta", (), meta)
    shown["get_scope"] = _scope
    return KeyRoutes(
        kind,
        type(f"{name}InputSerializer", (StrictSerializer,), declare),
        type(f"{change}Serializer", (StrictSerializer,), changed),
        type(f"{name}OutputSerializer", (serializers.ModelSerializer,), shown),
    )


CONCURRENCY_KEYS = key_routes(
    limits.CONCURRENCY,
    "Key",
    "KeyLimit",
    "Set on the key itself: its limit wins over the tasks'. Until then the latest task naming "
    "the key set it.",
)
RATE_LIMITS = key_routes(
    limits.RATE,
    "RateKey",
    "RateKeyChange",
    "Set on the key itself: its limit and window win over the tasks'. Until then the latest "
    "task naming the key set them.",
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
        kind, scope, owner = self.routes.kind, data.get("scope", "owner"), request_owner(request)
        self._may_change(None if scope == limits.GLOBAL else owner)
        team = access.place(owner, None, {"team": data["team"]} if "team" in data else {})
        key, created = limits.declare(
            kind=kind,
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
