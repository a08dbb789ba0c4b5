from __future__ import annotations

from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "tasks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from tasks import checks, handlers  # noqa: F401  (registers checks and built-in handlers)

        handlers.load_handler_modules()
