"""GET /health: one entry per component, 503 when a critical one is down (API.md, Operations)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tasks.db import db_now
from tasks.models import Process

ROLES = ("scheduler", "worker", "reviewer")


def process_components() -> dict[str, dict]:
    now = db_now()
    alive_after = now - timedelta(seconds=settings.REVIEWERS_PROCESS_DEAD_AFTER_SECONDS)
    rows = Process.objects.filter(stopped_at__isnull=True, last_seen_at__gte=alive_after)
    components: dict[str, dict] = {}
    for role in ROLES:
        seen = [p for p in rows if p.role == role]
        components[role] = {
            "status": "ok" if seen else "down",
            "alive": len(seen),
            "processes": [{"name": p.name, "last_seen": p.last_seen_at} for p in seen],
        }
    return components


class HealthView(APIView):
    permission_classes = [AllowAny]
    authentication_classes: list = []

    @extend_schema(responses={200: OpenApiResponse(), 503: OpenApiResponse()})
    def get(self, request: Request) -> Response:
        components: dict[str, dict] = {}
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            components["database"] = {"status": "ok"}
            components.update(process_components())
        except DatabaseError as exc:
            components["database"] = {"status": "down", "error": type(exc).__name__}
        healthy = all(c["status"] == "ok" for c in components.values())
        return Response(
            {"status": "ok" if healthy else "down", "components": components},
            status=200 if healthy else 503,
        )


class LiveView(APIView):
    """A bare liveness probe: the process answers; nothing else is checked."""

    permission_classes = [AllowAny]
    authentication_classes: list = []

    @extend_schema(responses={200: OpenApiResponse()})
    def get(self, request: Request) -> Response:
        return Response({"status": "ok"})
