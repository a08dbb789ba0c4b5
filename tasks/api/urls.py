from __future__ import annotations

from django.urls import path
from rest_framework_simplejwt.views import TokenObtainPairView, TokenRefreshView

from tasks.api import calendar_feed, calendars, views, workflows
from tasks.api.audit import AuditListView
from tasks.api.backfill import TaskBackfillView
from tasks.api.batch import TaskBatchCreateView
from tasks.api.limit_views import CONCURRENCY_KEYS, RATE_LIMITS, key_urls
from tasks.api.taskset_schema import TaskSetSchemaView
from tasks.api.tasksets import TaskSetDriftView, TaskSetView
from tasks.api.tokens import TokenObtainPairSerializer, TokenRefreshSerializer

urlpatterns = [
    path(
        "auth/token",
        TokenObtainPairView.as_view(serializer_class=TokenObtainPairSerializer),
        name="token",
    ),
    path(
        "auth/token/refresh",
        TokenRefreshView.as_view(serializer_class=TokenRefreshSerializer),
        name="token-refresh",
    ),
    path("tasks", views.TaskListCreateView.as_view(), name="task-list"),
    path("tasks/batch", TaskBatchCreateView.as_view(), name="task-batch"),
    path("tasks/upload", views.TaskUploadView.as_view(), name="task-upload"),
    path("tasks/<uuid:pk>", views.TaskDetailView.as_view(), name="task-detail"),
    path("tasks/<uuid:pk>/runs", views.TaskRunListView.as_view(), name="task-runs"),
    path("tasks/<uuid:pk>/backfill", TaskBackfillView.as_view(), name="task-backfill"),
    path(
        "tasks/<uuid:pk>/calendar.ics",
        calendar_feed.TaskCalendarView.as_view(),
        name="task-calendar",
    ),
    path("calendar.ics", calendar_feed.UserCalendarView.as_view(), name="calendar-ics"),
    path("calendar-feed", calendar_feed.CalendarFeedView.as_view(), name="calendar-feed"),
    path(
        "calendar-feed/rotate",
        calendar_feed.CalendarFeedRotateView.as_view(),
        name="calendar-feed-rotate",
    ),
    path("runs", views.RunListView.as_view(), name="run-list"),
    path("runs/<uuid:pk>", views.RunDetailView.as_view(), name="run-detail"),
    *key_urls("concurrency-keys", "concurrency-key", CONCURRENCY_KEYS),
    *key_urls("rate-limits", "rate-limit", RATE_LIMITS),
    path("tasksets/schema", TaskSetSchemaView.as_view(), name="taskset-schema"),
    path("tasksets/<str:name>", TaskSetView.as_view(), name="taskset"),
    path("tasksets/<str:name>/drift", TaskSetDriftView.as_view(), name="taskset-drift"),
    path("schedules/preview", views.SchedulePreviewView.as_view(), name="schedule-preview"),
    path("calendars", calendars.CalendarListCreateView.as_view(), name="calendar-list"),
    path("calendars/<uuid:pk>", calendars.CalendarDetailView.as_view(), name="calendar-detail"),
    path("audit", AuditListView.as_view(), name="audit-list"),
    path("workflows", workflows.WorkflowListCreateView.as_view(), name="workflow-list"),
    path("workflows/<uuid:pk>", workflows.WorkflowDetailView.as_view(), name="workflow-detail"),
    path("workflows/<uuid:pk>/run", workflows.WorkflowRunStartView.as_view(), name="workflow-run"),
    path("workflows/<uuid:pk>/runs", workflows.WorkflowRunListView.as_view(), name="workflow-runs"),
    path(
        "workflow-runs/<uuid:pk>",
        workflows.WorkflowRunDetailView.as_view(),
        name="workflow-run-detail",
    ),
    path(
        "workflow-runs/<uuid:pk>/cancel",
        workflows.WorkflowRunCancelView.as_view(),
        name="workflow-run-cancel",
    ),
    path(
        "workflow-runs/<uuid:pk>/retry",
        workflows.WorkflowRunRetryView.as_view(),
        name="workflow-run-retry",
    ),
]
TASK_ACTIONS = {
    "pause": views.TaskActionView,
    "resume": views.TaskActionView,
    "run-now": views.TaskRunActionView,
    "skip-next": views.TaskRunActionView,
}
for action, view in TASK_ACTIONS.items():
    urlpatterns.append(
        path(f"tasks/<uuid:pk>/{action}", views.action_view(view, action), name=f"task-{action}")
    )
for action in ("cancel", "retry"):
    urlpatterns.append(
        path(
            f"runs/<uuid:pk>/{action}",
            views.action_view(views.RunActionView, action),
            name=f"run-{action}",
        )
    )
