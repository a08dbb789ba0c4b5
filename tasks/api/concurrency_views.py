"""Concurrency keys: list a user's keys (and the global ones) with what runs and waits under
each, declare one, change its limit (the next claim applies it)."""

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
from tasks.api.serializers import KEY_NAME, MAX_KEY_LIMIT
from tasks.api.strict import ChoiceField, StrictSerializer
from tasks.models import ConcurrencyKey
from tasks.transitions import concurrency

ERRORS = {
    400: OpenApiResponse(description="Invalid input; the body names the field."),
    401: OpenApiResponse(description="Missing or invalid token."),
    403: OpenApiResponse(description="A global key: operators (staff users) only."),
    404: OpenApiResponse(description="No such key among the caller's own and the global ones."),
}


class KeyInputSerializer(StrictSerializer):
    key = serializers.RegexField(KEY_NAME, max_length=200)
    limit = serializers.IntegerField(min_value=1, max_value=MAX_KEY_LIMIT)
    scope = ChoiceField(choices=["owner", "global"], required=False)


class KeyLimitSerializer(StrictSerializer):
    limit = serializers.IntegerField(min_value=1, max_value=MAX_KEY_LIMIT)


class KeyOutputSerializer(serializers.ModelSerializer):
    key = serializers.CharField(source="name", read_only=True)
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

    def get_scope(self, key: ConcurrencyKey) -> str:
        return "global" if key.owner_id is None else "owner"


def _keys(request: Request) -> QuerySet[ConcurrencyKey]:
    return concurrency.visible_keys(request_owner(request))


def _may_change(request: Request, key_owner: Any) -> None:
    if key_owner is None and not request_owner(request).is_staff:
        raise PermissionDenied("Only operators (staff users) change global keys.")


class ConcurrencyKeyListCreateView(generics.ListAPIView):
    serializer_class = KeyOutputSerializer

    def get_queryset(self) -> QuerySet[ConcurrencyKey]:
        if getattr(self, "swagger_fake_view", False):
            return ConcurrencyKey.objects.none()
        return _keys(self.request)

    @extend_schema(
        request=KeyInputSerializer,
        responses={201: KeyOutputSerializer, 200: KeyOutputSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        serializer = KeyInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        scope = data.get("scope", "owner")
        owner = request_owner(request)
        _may_change(request, None if scope == concurrency.GLOBAL else owner)
        key, created = concurrency.declare(
            owner=owner, name=data["key"], limit=data["limit"], scope=scope
        )
        body = KeyOutputSerializer(_keys(request).get(pk=key.pk)).data
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class ConcurrencyKeyDetailView(APIView):
    @extend_schema(responses={200: KeyOutputSerializer, **ERRORS})
    def get(self, request: Request, pk: int) -> Response:
        return Response(KeyOutputSerializer(get_object_or_404(_keys(request), pk=pk)).data)

    @extend_schema(request=KeyLimitSerializer, responses={200: KeyOutputSerializer, **ERRORS})
    def patch(self, request: Request, pk: int) -> Response:
        key = get_object_or_404(_keys(request), pk=pk)
        _may_change(request, key.owner_id)
        serializer = KeyLimitSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        concurrency.set_limit(key, serializer.validated_data["limit"])
        return Response(KeyOutputSerializer(_keys(request).get(pk=pk)).data)
