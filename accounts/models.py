"""Who a user is at the company's identity provider.

The provider's `sub` (with its issuer) is the stable key of a person: usernames and emails change
and are reused, `sub` is not. A username is only ever taken from the claims for display and for
the API's `owner`; a local account of the same name is never linked by it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Identity(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="identity"
    )
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "identities"
        constraints = [
            models.UniqueConstraint(
                fields=["issuer", "subject"], name="accounts_identity_issuer_subject"
            )
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class Preference(models.Model):
    """A user's console settings: the time zone the admin shows times in (UTC until set)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="preference",
    )
    timezone = models.CharField(max_length=64, default="UTC", db_default="UTC")

    def __str__(self) -> str:
        return f"{self.user_id}: {self.timezone}"
