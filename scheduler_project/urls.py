from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from tasks.api import seed
from tasks.api.health import HealthView, LiveView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("tasks.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("health", HealthView.as_view(), name="health"),
    path("health/live", LiveView.as_view(), name="health-live"),
    # The seed documents' routes (API.md, "Seed routes").
    path("task", seed.SeedTaskView.as_view(), name="seed-task"),
    path("task/status", seed.SeedTaskStatusView.as_view(), name="seed-task-status"),
    path("task/<uuid:pk>", seed.SeedTaskDetailView.as_view(), name="seed-task-detail"),
    path("tasks", seed.SeedTaskListView.as_view(), name="seed-task-list"),
]
