"""The URLs of the API server that `bench api` starts: the product's own, plus the floor.

The floor (`GET /bench/floor`) is a trivial authenticated endpoint: the JWT checked (its user
read through the same cache), `{}` returned, through the same gunicorn, middleware and DRF
stack as every API view. What an endpoint costs beyond it is its own work, so ratios to it mean
the same in a slow hour and a fast one. Served only by the bench's server (settings
bench.floor_settings); the image holds no `bench/`.
"""

from __future__ import annotations

from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduler_project.urls import handler400, handler404, handler500  # noqa: F401
from scheduler_project.urls import urlpatterns as product_urls


class FloorView(APIView):
    """Authentication, permission, throttle and content negotiation as any API view."""

    def get(self, request: Request) -> Response:
        return Response({})


urlpatterns = [path("bench/floor", FloorView.as_view(), name="bench-floor"), *product_urls]
