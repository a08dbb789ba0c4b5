from __future__ import annotations

from django.apps import AppConfig


class ReviewersConfig(AppConfig):
    name = "reviewers"

    def ready(self) -> None:
        from reviewers import checks  # noqa: F401  (registers the system checks)
