"""GET /api/schema/: drf-spectacular's view, generating one schema at a time."""

from __future__ import annotations

from typing import Any

from drf_spectacular.views import SpectacularAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from scheduler_project.schema import GENERATING


class SchemaView(SpectacularAPIView):
    """The served OpenAPI schema, generated under GENERATING (scheduler_project/schema.py says
    why)."""

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        with GENERATING:
            return super().get(request, *args, **kwargs)
