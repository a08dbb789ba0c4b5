"""Calendar endpoints: a user's holidays, dates and freeze windows that schedules exclude.
Owner-scoped like tasks: another user's calendar answers 404, like an unknown one."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import access
from scheduler_project.auth import request_owner
from tasks.api.serializers import CalendarOutputSerializer, CalendarSerializer
from tasks.db import db_now
from tasks.models import Calendar
from tasks.transitions import calendars

ERRORS = {
    400: OpenApiResponse(description="Invalid input; the body names the field."),
    401: OpenApiResponse(description="Missing or invalid token."),
    404: OpenApiResponse(description="No such object among the caller's own."),
}
IN_USE = {409: OpenApiResponse(description="Tasks use the calendar; `detail` names them.")}


def owned_calendars(request: Request) -> QuerySet[Calendar]:
    """The calendars the caller may see (accounts/access.py)."""
    return access.visible(Calendar.objects.select_related("team"), request_owner(request))


class CalendarListCreateView(generics.ListAPIView):
    serializer_class = CalendarOutputSerializer
    ordering = ["name", "id"]

    def get_queryset(self) -> QuerySet[Calendar]:
        if getattr(self, "swagger_fake_view", False):
            return Calendar.objects.none()
        return owned_calendars(self.request).order_by("name", "id")

    @extend_schema(request=CalendarSerializer, responses={201: CalendarOutputSerializer, **ERRORS})
    def post(self, request: Request) -> Response:
        serializer = CalendarSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        owner = request_owner(request)
        calendar = calendars.create_calendar(
            owner=owner, data=access.place(owner, None, serializer.validated_data)
        )
        return Response(CalendarOutputSerializer(calendar).data, status=status.HTTP_201_CREATED)


class CalendarDetailView(APIView):
    def get_object(self, request: Request, pk: Any) -> Calendar:
        calendar = get_object_or_404(owned_calendars(request), pk=pk)
        if request.method not in ("GET", "HEAD"):
            access.require(request_owner(request), calendar, access.EDITOR)
        return calendar

    @extend_schema(responses={200: CalendarOutputSerializer, **ERRORS})
    def get(self, request: Request, pk: Any) -> Response:
        return Response(CalendarOutputSerializer(self.get_object(request, pk)).data)

    @extend_schema(request=CalendarSerializer, responses={200: CalendarOutputSerializer, **ERRORS})
    def patch(self, request: Request, pk: Any) -> Response:
        return self._update(request, pk, partial=True)

    @extend_schema(request=CalendarSerializer, responses={200: CalendarOutputSerializer, **ERRORS})
    def put(self, request: Request, pk: Any) -> Response:
        return self._update(request, pk, partial=False)

    def _update(self, request: Request, pk: Any, *, partial: bool) -> Response:
        calendar = self.get_object(request, pk)
        serializer = CalendarSerializer(calendar, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        data = access.place(request_owner(request), calendar, serializer.validated_data)
        calendar = calendars.update_calendar(calendar=calendar, data=data, now=db_now())
        return Response(CalendarOutputSerializer(calendar).data)

    @extend_schema(responses={204: None, **ERRORS, **IN_USE})
    def delete(self, request: Request, pk: Any) -> Response:
        calendars.delete_calendar(calendar=self.get_object(request, pk))
        return Response(status=status.HTTP_204_NO_CONTENT)
