"""Channel and notification endpoints: validate, call one service, serialize."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import access
from notifications import services
from notifications.api.serializers import (
    ChannelCreatedSerializer,
    ChannelInputSerializer,
    ChannelOutputSerializer,
    NotificationSerializer,
)
from notifications.models import EVENT_CHOICES, Channel, Notification
from scheduler_project.auth import request_owner

ERRORS = {
    400: OpenApiResponse(description="Invalid input; the body names the field."),
    401: OpenApiResponse(description="Missing or invalid token."),
    404: OpenApiResponse(description="No such object among the caller's own."),
}


def owned_channels(request: Request) -> QuerySet[Channel]:
    """The channels the caller may see (accounts/access.py)."""
    return access.visible(Channel.objects.select_related("team"), request_owner(request))


class ChannelListCreateView(generics.ListAPIView):
    serializer_class = ChannelOutputSerializer
    ordering_fields = ["created_at", "name", "kind"]
    ordering = ["-created_at"]

    def get_queryset(self) -> QuerySet[Channel]:
        if getattr(self, "swagger_fake_view", False):
            return Channel.objects.none()
        return owned_channels(self.request)

    @extend_schema(
        request=ChannelInputSerializer, responses={201: ChannelCreatedSerializer, **ERRORS}
    )
    def post(self, request: Request) -> Response:
        serializer = ChannelInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        owner = request_owner(request)
        channel = services.create_channel(
            owner=owner, data=access.place(owner, None, serializer.validated_data)
        )
        generated = serializer.validated_data.get("generated_secret")
        body = ChannelCreatedSerializer(channel, context={"generated_secret": generated}).data
        return Response(body, status=status.HTTP_201_CREATED)


class ChannelDetailView(APIView):
    def get_object(self, request: Request, pk: Any) -> Channel:
        channel = get_object_or_404(owned_channels(request), pk=pk)
        if request.method not in ("GET", "HEAD"):
            access.require(request_owner(request), channel, access.EDITOR)
        return channel

    @extend_schema(responses={200: ChannelOutputSerializer, **ERRORS})
    def get(self, request: Request, pk: Any) -> Response:
        return Response(ChannelOutputSerializer(self.get_object(request, pk)).data)

    @extend_schema(
        request=ChannelInputSerializer, responses={200: ChannelOutputSerializer, **ERRORS}
    )
    def patch(self, request: Request, pk: Any) -> Response:
        channel = self.get_object(request, pk)
        serializer = ChannelInputSerializer(channel, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        data = access.place(request_owner(request), channel, serializer.validated_data)
        channel = services.update_channel(channel=channel, data=data)
        return Response(ChannelOutputSerializer(channel).data)

    @extend_schema(responses={204: None, **ERRORS})
    def delete(self, request: Request, pk: Any) -> Response:
        services.delete_channel(channel=self.get_object(request, pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class NotificationFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Notification.Status.choices)
    event = django_filters.ChoiceFilter(choices=EVENT_CHOICES)
    task = django_filters.UUIDFilter(field_name="task_id")
    channel = django_filters.UUIDFilter(field_name="channel_id")
    run = django_filters.UUIDFilter(field_name="run_id")
    workflow_run = django_filters.UUIDFilter(field_name="workflow_run_id")
    workflow = django_filters.UUIDFilter(field_name="workflow_id")

    class Meta:
        model = Notification
        fields = ["status", "event", "task", "channel", "run", "workflow_run", "workflow"]


def owned_notifications(request: Request) -> QuerySet[Notification]:
    return access.visible(
        Notification.objects.all(),
        request_owner(request),
        owner="channel__owner",
        team="channel__team",
    )


class NotificationListView(generics.ListAPIView):
    """The delivery log, newest first."""

    serializer_class = NotificationSerializer
    filterset_class = NotificationFilter
    ordering_fields = ["created_at", "sent_at"]
    ordering = ["-created_at"]

    def get_queryset(self) -> QuerySet[Notification]:
        if getattr(self, "swagger_fake_view", False):
            return Notification.objects.none()
        return owned_notifications(self.request)


class NotificationDetailView(generics.RetrieveAPIView):
    serializer_class = NotificationSerializer

    def get_queryset(self) -> QuerySet[Notification]:
        if getattr(self, "swagger_fake_view", False):
            return Notification.objects.none()
        return owned_notifications(self.request)
