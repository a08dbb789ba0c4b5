"""System checks for the reviewer's settings (ids reviewers.E00x)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks


@checks.register()
def check_retention(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    for status, days in settings.REVIEWERS_RETENTION_DAYS_BY_STATUS.items():
        if days < 1:
            errors.append(
                checks.Error(
                    f"REVIEWERS_RETENTION_DAYS_{status.upper()} must be at least 1, not {days}.",
                    id="reviewers.E001",
                )
            )
    if settings.REVIEWERS_AUDIT_RETENTION_DAYS < 0:
        errors.append(
            checks.Error(
                "REVIEWERS_AUDIT_RETENTION_DAYS must be 0 (keep forever) or more.",
                id="reviewers.E003",
            )
        )
    if settings.REVIEWERS_PRUNE_BATCH_SIZE < 1:
        errors.append(
            checks.Error("REVIEWERS_PRUNE_BATCH_SIZE must be at least 1.", id="reviewers.E002")
        )
    return errors
