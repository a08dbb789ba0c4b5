"""Errors of the notifications app; the API maps them onto status codes like TasksError."""

from __future__ import annotations

from tasks.exceptions import TasksError


class NotificationsError(TasksError):
    """Base of every notifications error (400 unless a subclass says otherwise)."""


class EncryptionKeyMissing(NotificationsError):
    """A channel secret must be stored or read but SCHEDULER_ENCRYPTION_KEY is not set."""

    status_code = 503
    code = "encryption_key_missing"


class SecretUnreadable(NotificationsError):
    """A stored secret does not decrypt with any configured key (wrong or rotated-out key)."""

    status_code = 503
    code = "secret_unreadable"
