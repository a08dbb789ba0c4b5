"""System checks for the notification settings (ids notifications.E00x / W00x)."""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.core import checks

from notifications.crypto import parse_keys


@checks.register()
def check_notification_settings(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    messages: list[checks.CheckMessage] = []
    try:
        keys = parse_keys(settings.SCHEDULER_ENCRYPTION_KEY or "")
    except ValueError:
        keys = []
        messages.append(
            checks.Error(
                "SCHEDULER_ENCRYPTION_KEY must be comma-separated Fernet keys "
                "(32 url-safe base64-encoded bytes each).",
                hint="Generate one with: python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'",
                id="notifications.E001",
            )
        )
    else:
        if not keys:
            # A warning, not an error: roles that never touch channel secrets still start.
            messages.append(
                checks.Warning(
                    "SCHEDULER_ENCRYPTION_KEY is not set: channels with a secret (webhook "
                    "signing secret, Slack URL or token) can be neither created nor delivered.",
                    id="notifications.W001",
                )
            )
    batch = settings.NOTIFICATIONS_BATCH_SIZE
    concurrency = settings.NOTIFICATIONS_DELIVERY_CONCURRENCY
    if batch < 1 or concurrency < 1:
        messages.append(
            checks.Error(
                "NOTIFICATIONS_BATCH_SIZE and NOTIFICATIONS_DELIVERY_CONCURRENCY must be at "
                "least 1.",
                id="notifications.E003",
            )
        )
        return messages
    # A batch sends in ceil(batch / concurrency) rounds, each bounded by about two timeouts
    # (connect + response); the lease must outlast it, or a slow batch could be claimed twice.
    rounds = math.ceil(batch / concurrency)
    if (
        settings.NOTIFICATIONS_LEASE_SECONDS
        <= rounds * 2 * settings.SCHEDULER_OUTBOUND_TIMEOUT_SECONDS
    ):
        messages.append(
            checks.Error(
                "NOTIFICATIONS_LEASE_SECONDS must exceed ceil(NOTIFICATIONS_BATCH_SIZE / "
                "NOTIFICATIONS_DELIVERY_CONCURRENCY) * 2 * SCHEDULER_OUTBOUND_TIMEOUT_SECONDS.",
                id="notifications.E002",
            )
        )
    return messages
