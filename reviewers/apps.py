from __future__ import annotations

from django.apps import AppConfig


class ReviewersConfig(AppConfig):
    name = "reviewers"
