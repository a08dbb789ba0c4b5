"""One exception handler: service errors become 4xx in DRF's `detail` + `code` shape; a
database that is down or failing over becomes 503 with Retry-After, never 500.

Also the JSON answers Django gives outside DRF views (an unknown URL, a refused request, an
unexpected error): `urls.py` names them as handler400/404/500, so an API client never gets an
HTML page. The admin keeps Django's HTML pages.
"""

from __future__ import annotations

import sys
from typing import Any, TypeVar

from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from scheduler_project.middleware import BodyTooLarge
from tasks.db import is_unavailable
from tasks.exceptions import TasksError
from tasks.outages import DATABASE

AnyResponse = TypeVar("AnyResponse", bound=HttpResponse)

# A failover (stop, promote, reconnect) takes seconds; clients wait this long before retrying.
RETRY_AFTER_SECONDS = 2
UNAVAILABLE = {
    "detail": "The database is unavailable (restarting or failing over); retry shortly.",
    "code": "database_unavailable",
}


def _drop_connections() -> None:
    """Close this thread's connections, so the next request connects afresh: libpq then finds
    the new primary (a connection to a server turned read-only would otherwise be reused)."""
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close()


def unavailable(exc: BaseException) -> dict[str, str]:
    # Logged once per outage (tasks/outages.py), not once per refused request.
    DATABASE.failed(exc, what="API request")
    _drop_connections()
    return {"Retry-After": str(RETRY_AFTER_SECONDS)}


def unlogged(response: AnyResponse) -> AnyResponse:
    """Kept out of Django's request log (`django.request`: an ERROR line for every 5xx, with the
    traceback when it comes from an exception): the answer is expected, and said elsewhere once
    (the outage log) or counted (/metrics)."""
    response._has_been_logged = True  # type: ignore[attr-defined]  # Django's own marker
    return response


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, TasksError):
        return Response({"detail": exc.detail, "code": exc.code}, status=exc.status_code)
    if isinstance(exc, RequestDataTooBig):
        # Django's own answer would be an HTML 400; the middleware refuses most of these earlier.
        detail = str(exc) if isinstance(exc, BodyTooLarge) else "The request body is too large."
        return Response({"detail": detail, "code": "request_too_large"}, status=413)
    if isinstance(exc, (TooManyFieldsSent, TooManyFilesSent)):
        return Response({"detail": str(exc), "code": "too_many_fields"}, status=400)
    if is_unavailable(exc):
        return unlogged(Response(UNAVAILABLE, status=503, headers=unavailable(exc)))
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(response.data, dict) and "detail" in response.data:
        detail = response.data["detail"]
        response.data["code"] = getattr(detail, "code", None) or response.data.get("code", "error")
    return response


def _is_admin(request: HttpRequest) -> bool:
    return request.path.startswith("/admin/")


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_admin(request):
        return defaults.bad_request(request, exception)
    return JsonResponse({"detail": "Bad request.", "code": "bad_request"}, status=400)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_admin(request):
        return defaults.page_not_found(request, exception)
    return JsonResponse({"detail": "Not found.", "code": "not_found"}, status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    # Django calls this while handling the exception (outside DRF views: middleware, admin).
    exc = sys.exc_info()[1]
    if exc is not None and is_unavailable(exc):
        response = JsonResponse(UNAVAILABLE, status=503)
        for name, value in unavailable(exc).items():
            response[name] = value
        return unlogged(response)
    if _is_admin(request):
        return defaults.server_error(request)
    return JsonResponse({"detail": "Server error.", "code": "server_error"}, status=500)
