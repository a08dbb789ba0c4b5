"""Rate keys: list a user's keys (and the global ones) with each window's use, declare one,
change its limit or window (the next claim applies them)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduler_project.auth import request_owner
from tasks.api.serializers import KEY_NAME, MAX_KEY_LIMIT, MAX_RATE_PER_SECONDS
from tasks.api.strict import ChoiceField, StrictSerializer
from tasks.models import RateKey
from tasks.transitions import rate_limits

ERRORS = {
    400: OpenApiResponse(description="Invalid input; the body names the field."),
    401: OpenApiResponse(description="Missing or invalid token."),
    403: OpenApiResponse(description="A global key: operators (staff users) only."),
    404: OpenApiResponse(description="No such key among the caller's own and the global ones."),
}


def _limit(*, required: bool = True) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=1, max_value=MAX_KEY_LIMIT, required=required)


def _per(*, required: bool = True) -> serializers.IntegerField:
    return serializers.IntegerField(
        min_value=1,
        max_value=MAX_RATE_PER_SECONDS,
        required=required,
        help_text="The window, in seconds.",
    )


class RateKeyInputSerializer(StrictSerializer):
    key = serializers.RegexField(KEY_NAME, max_length=200)
    limit = _limit()
    per = _per()
    scope = ChoiceField(choices=["owner", "global"], required=False)


class RateKeyChangeSerializer(StrictSerializer):
    limit = _limit(required=False)
    per = _per(required=False)


class RateKeyOutputSerializer(serializers.ModelSerializer):
    key = serializers.CharField(source="name", read_only=True)
    scope = serializers.SerializerMethodField()
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
    waiting = serializers.IntegerField(
        read_only=True, help_text="Its runs due and not yet claimed (held by the key or queued)."
    )

    class Meta:
        model = RateKey
        fields = [
            "id",
            "key",
            "scope",
            "limit",
            "per",
            "declared",
            "used",
            "next_start_at",
            "waiting",
            "updated_at",
        ]

    def get_scope(self, key: RateKey) -> str:
        return "global" if key.owner_id is None else "owner"


def _keys(request: Request) -> QuerySet[RateKey]:
    return rate_limits.visible_keys(request_owner(request))


def _may_change(request: Request, key_owner: Any) -> None:
    if key_owner is None and not request_owner(request).is_staff:
        raise PermissionDenied("Only operators (staff users) change global keys.")


class RateKeyListCreateView(generics.ListAPIView):
    serializer_class = RateKeyOutputSerializer

    def get_queryset(self) -> QuerySet[RateKey]:
        if getattr(self, "swagger_fake_view", False):
            return RateKey.objects.none()
        return _keys(self.request)

    @extend_schema(
        request=RateKeyInputSerializer,
        responses={201: RateKeyOutputSerializer, 200: RateKeyOutputSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        serializer = RateKeyInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        scope = data.get("scope", "owner")
        owner = request_owner(request)
        _may_change(request, None if scope == rate_limits.GLOBAL else owner)
        key, created = rate_limits.declare(
            owner=owner, name=data["key"], limit=data["limit"], per=data["per"], scope=scope
        )
        body = RateKeyOutputSerializer(_keys(request).get(pk=key.pk)).data
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class RateKeyDetailView(APIView):
    @extend_schema(responses={200: RateKeyOutputSerializer, **ERRORS})
    def get(self, request: Request, pk: int) -> Response:
        return Response(RateKeyOutputSerializer(get_object_or_404(_keys(request), pk=pk)).data)

    @extend_schema(
        request=RateKeyChangeSerializer, responses={200: RateKeyOutputSerializer, **ERRORS}
    )
    def patch(self, request: Request, pk: int) -> Response:
        key = get_object_or_404(_keys(request), pk=pk)
        _may_change(request, key.owner_id)
        serializer = RateKeyChangeSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        rate_limits.set_rate(
            key, data.get("limit", key.rate_limit), data.get("per", key.per_seconds)
        )
        return Response(RateKeyOutputSerializer(_keys(request).get(pk=pk)).data)
