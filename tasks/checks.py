"""System checks that validate settings at start-up (ids tasks.E00x)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks


@checks.register()
def check_timing(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    errors = []
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
