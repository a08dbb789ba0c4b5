"""One exception handler: service errors become 4xx in DRF's `detail` + `code` shape."""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from tasks.exceptions import TasksError


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, TasksError):
        return Response({"detail": exc.detail, "code": exc.code}, status=exc.status_code)
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(response.data, dict) and "detail" in response.data:
        detail = response.data["detail"]
        response.data["code"] = getattr(detail, "code", None) or response.data.get("code", "error")
    return response
