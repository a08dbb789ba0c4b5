from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from tasks.admin_dashboard import dashboard_view
from tasks.api import seed
from tasks.api.health import HealthView, LiveView
from tasks.api.metrics import metrics_view

urlpatterns = [
    # Operations (issue 6): the admin dashboard (staff only) sits before the admin's catch-all.
    path("admin/dashboard/", admin.site.admin_view(dashboard_view), name="admin-dashboard"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("tasks.api.urls")),
    path("api/v1/", include("notifications.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("health", HealthView.as_view(), name="health"),
    path("health/live", LiveView.as_view(), name="health-live"),
    path("metrics", metrics_view, name="metrics"),
    # The seed documents' routes (API.md, "Seed routes").
    path("task", seed.SeedTaskView.as_view(), name="seed-task"),
    path("task/status", seed.SeedTaskStatusView.as_view(), name="seed-task-status"),
    path("task/<uuid:pk>", seed.SeedTaskDetailView.as_view(), name="seed-task-detail"),
    path("tasks", seed.SeedTaskListView.as_view(), name="seed-task-list"),
]

# Issue 8: JSON instead of Django's HTML pages for an unknown URL, a refused request or a crash.
handler400 = "tasks.api.errors.bad_request"
handler404 = "tasks.api.errors.not_found"
handler500 = "tasks.api.errors.server_error"
