"""System checks that validate settings at start-up (ids tasks.E00x)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks


@checks.register()
def check_timing(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    if settings.REVIEWERS_RESCUE_AFTER_SECONDS <= 2 * settings.TASKS_HEARTBEAT_SECONDS:
        errors.append(
            checks.Error(
                "REVIEWERS_RESCUE_AFTER_SECONDS must exceed twice TASKS_HEARTBEAT_SECONDS, or "
                "live runs would be rescued while their worker is still heart-beating.",
                id="tasks.E001",
            )
        )
    if settings.TASKS_PREFETCH_SECONDS >= settings.REVIEWERS_RESCUE_AFTER_SECONDS:
        errors.append(
            checks.Error(
                "TASKS_PREFETCH_SECONDS must be shorter than REVIEWERS_RESCUE_AFTER_SECONDS.",
                id="tasks.E002",
            )
        )
    return errors


@checks.register()
def check_task_defaults(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    """The defaults of new tasks must be values the API itself would accept."""
    errors: list[checks.CheckMessage] = []
    if not 1 <= settings.TASKS_DEFAULT_MAX_ATTEMPTS <= 100:
        errors.append(checks.Error("TASKS_DEFAULT_MAX_ATTEMPTS must be 1 to 100.", id="tasks.E003"))
    base = settings.TASKS_DEFAULT_BACKOFF_BASE_SECONDS
    cap = settings.TASKS_DEFAULT_BACKOFF_CAP_SECONDS
    if not (0 <= base <= 86400 and base <= cap <= 7 * 86400):
        errors.append(
            checks.Error(
                "TASKS_DEFAULT_BACKOFF_BASE_SECONDS must be 0 to 86400 and "
                "TASKS_DEFAULT_BACKOFF_CAP_SECONDS at least that and at most 604800.",
                id="tasks.E004",
            )
        )
    return errors
