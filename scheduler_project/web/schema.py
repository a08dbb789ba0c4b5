"""GET /api/schema/: drf-spectacular's view, generating one schema at a time."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from drf_spectacular.views import SpectacularAPIView

from scheduler_project.schema import GENERATING


def schema_view() -> Callable[..., HttpResponse]:
    """SpectacularAPIView's view, called under GENERATING (scheduler_project/schema.py says
    why); wrapped with the view's attributes, so the schema documents /api/schema/ as before."""
    view = SpectacularAPIView.as_view()

    @functools.wraps(view)
    def locked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        with GENERATING:
            return view(request, *args, **kwargs)

    return locked
