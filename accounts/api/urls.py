from __future__ import annotations

from django.urls import path

from accounts.api import views

ACCOUNT = "teams/<str:slug>/service-accounts/<str:name>"

urlpatterns = [
    path("teams", views.TeamListCreateView.as_view(), name="team-list"),
    path("teams/<str:slug>", views.TeamDetailView.as_view(), name="team-detail"),
    path("teams/<str:slug>/members", views.MemberListView.as_view(), name="team-members"),
    path(
        "teams/<str:slug>/members/<str:username>",
        views.MemberDetailView.as_view(),
        name="team-member",
    ),
    path(
        "teams/<str:slug>/service-accounts",
        views.ServiceAccountListView.as_view(),
        name="team-service-accounts",
    ),
    path(f"{ACCOUNT}/tokens", views.TokenListView.as_view(), name="team-tokens"),
    path(f"{ACCOUNT}/tokens/<int:pk>", views.TokenDetailView.as_view(), name="team-token"),
]
