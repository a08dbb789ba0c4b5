"""The OIDC sign-in's routes (mounted at /oidc/ only when OIDC_RP_CLIENT_ID is set)."""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [path("", include("mozilla_django_oidc.urls"))]
