"""Who a user is at the company's identity provider.

The provider's `sub` (with its issuer) is the stable key of a person: usernames and emails change
and are reused, `sub` is not. A username is only ever taken from the claims for display and for
the API's `owner`; a local account of the same name is never linked by it.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
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


class Team(models.Model):
    """A group of people (and service accounts) that owns objects together: tasks, channels,
    calendars, limit keys and task sets carry a nullable `team`; accounts/access.py decides
    who may see and change them by the member's role."""

    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    class Role(models.TextChoices):
        VIEWER = "viewer"  # reads
        EDITOR = "editor"  # creates, changes, runs, cancels, retries, backfills, applies sets
        ADMIN = "admin"  # members and service accounts' tokens too

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="accounts_membership_unique"),
            models.CheckConstraint(
                condition=models.Q(role__in=["viewer", "editor", "admin"]),
                name="accounts_membership_role_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.team_id} as {self.role}"


class ServiceAccount(models.Model):
    """A machine identity of one team: a user of its own (no password, never staff) whose
    membership gives its role, so every check that works for a person works for it; it signs
    in only with its tokens (ApiToken)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="service_account"
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="service_accounts")
    name = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="accounts_service_account_name")
        ]

    def __str__(self) -> str:
        return f"{self.name} of {self.team_id}"


class ApiToken(models.Model):
    """A service account's bearer token. Only the SHA-256 of its text is stored (`digest`):
    the text is shown once, when it is made (accounts/tokens.py)."""

    account = models.ForeignKey(ServiceAccount, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True)
    scopes = ArrayField(models.CharField(max_length=32))
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.pk})"
