from __future__ import annotations

from django.urls import path

from notifications.api import views

urlpatterns = [
    path("channels", views.ChannelListCreateView.as_view(), name="channel-list"),
    path("channels/<uuid:pk>", views.ChannelDetailView.as_view(), name="channel-detail"),
    path("notifications", views.NotificationListView.as_view(), name="notification-list"),
    path(
        "notifications/<uuid:pk>",
        views.NotificationDetailView.as_view(),
        name="notification-detail",
    ),
]
