from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerView

from accounts.preferences import zone_view
from scheduler_project.web.health import HealthView, LiveView
from scheduler_project.web.metrics import metrics_view
from scheduler_project.web.schema import schema_view
from tasks.admin.dashboard import dashboard_view
from tasks.api import seed

# The API docs pages fetch from this host only, whatever their bundles reference (ReDoc's
# sidebar always shows a logo from its CDN): the browser blocks anything else before it asks.
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' blob:; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self' data:; "
    "worker-src 'self' blob:; connect-src 'self'"
)


def same_origin_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        response["Content-Security-Policy"] = DOCS_CSP
        return response

    return wrapped


urlpatterns = [
    # The address `make run` prints: a browser lands on the admin (its login when signed out).
    path("", RedirectView.as_view(url="/admin/", permanent=False), name="root"),
    # Operations: the admin dashboard (staff only) sits before the admin's catch-all.
    path("admin/dashboard/", admin.site.admin_view(dashboard_view), name="admin-dashboard"),
    path("admin/zone/", admin.site.admin_view(zone_view), name="admin-zone"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("tasks.api.urls")),
    path("api/v1/", include("notifications.api.urls")),
    path("api/v1/", include("accounts.api.urls")),
    path("api/schema/", schema_view(), name="schema"),
    path(
        "api/docs/",
        same_origin_only(SpectacularSwaggerView.as_view(url_name="schema")),
        name="docs",
    ),
    path(
        "api/redoc/",
        same_origin_only(
            SpectacularRedocView.as_view(url_name="schema", template_name="api/redoc.html")
        ),
        name="redoc",
    ),
    path("health", HealthView.as_view(), name="health"),
    path("health/live", LiveView.as_view(), name="health-live"),
    path("metrics", metrics_view, name="metrics"),
    # The seed routes (docs/api.md, Endpoints).
    path("task", seed.SeedTaskView.as_view(), name="seed-task"),
    path("task/status", seed.SeedTaskStatusView.as_view(), name="seed-task-status"),
    path("task/<uuid:pk>", seed.SeedTaskDetailView.as_view(), name="seed-task-detail"),
    path("tasks", seed.SeedTaskListView.as_view(), name="seed-task-list"),
]

if settings.OIDC_RP_CLIENT_ID:
    # /oidc/authenticate/ (to the provider), /oidc/callback/ (back), /oidc/logout/.
    urlpatterns.append(path("oidc/", include("accounts.urls")))
    admin.site.login_template = "accounts/login.html"

# JSON instead of Django's HTML pages for an unknown URL, a refused request or a crash.
handler400 = "scheduler_project.web.errors.bad_request"
handler404 = "scheduler_project.web.errors.not_found"
handler500 = "scheduler_project.web.errors.server_error"
