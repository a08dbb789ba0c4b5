"""The audit log's row: who changed which object, when, from where, and what changed.

The rows are written by `tasks.audit` alone and are append-only: a database trigger
(tasks/sql/audit.sql) refuses every UPDATE and every DELETE but the reviewer's retention
pruning. Nothing points at the row and it points at nothing by a constraint: the actor, the
object's owner and the object's team are kept by id (and the actor by name too), so deleting a
user, a team or an object neither cascades into the log nor is refused by it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.postgres.indexes import OpClass
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import QuerySet
from django.db.models.functions import Now, Upper

from accounts.access import is_operator, visible


class AuditEntry(models.Model):
    id = models.BigAutoField(primary_key=True)
    # When the change was recorded, inside its transaction (Now() is statement_timestamp()).
    at = models.DateTimeField(db_default=Now())
    # Who: a person (`actor`, kept by name too), or a service account and the token it used.
    # No constraint: the entry outlives the user.
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,
    )
    actor_name = models.CharField(max_length=150, blank=True, default="")
    service_account = models.CharField(max_length=150, blank=True, default="")
    token_id = models.CharField(max_length=64, blank=True, default="")
    # From where: the request's client address and user agent (none outside a request).
    client_address = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.TextField(blank=True, default="")
    action = models.CharField(max_length=32)  # tasks.audit.ACTIONS
    object_type = models.CharField(max_length=32)  # tasks.audit.OBJECT_TYPES
    object_id = models.CharField(max_length=64, blank=True, default="")
    object_name = models.TextField(blank=True, default="")
    # Whose object it is: who sees the entry besides operators.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,  # audit_owner_idx
    )
    # The object's team when it changed (a run's and a notification's: its task's), None for a
    # personal object and for a bulk action: the team's members read the entry
    # (accounts/access.py, as for the object itself).
    team = models.ForeignKey(
        "accounts.Team",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,  # audit_team_idx
    )
    # An update's {field: [before, after]}; a bulk action's {"filter": ..., "count": n}.
    changes = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)

    class Meta:
        verbose_name_plural = "audit entries"
        indexes = [
            # The reviewer's pruning and time-range reads.
            models.Index(fields=["at"], name="audit_at_idx"),
            # A user's own log, newest first (GET /api/v1/audit for non-operators).
            models.Index(fields=["owner", "-id"], name="audit_owner_idx"),
            # A team's log, newest first (its members' GET /api/v1/audit).
            models.Index(fields=["team", "-id"], name="audit_team_idx"),
            # One actor's entries (the `actor` filter: by name, which outlives the user).
            models.Index(fields=["actor_name", "-id"], name="audit_actor_idx"),
            # One object's history.
            models.Index(fields=["object_type", "object_id"], name="audit_object_idx"),
            # The admin's search by the start of an object's name (migration 0040).
            models.Index(
                OpClass(Upper("object_name"), name="text_pattern_ops"),
                name="audit_object_name_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.object_type} {self.object_id}"


def visible_entries(user: Any) -> QuerySet[AuditEntry]:
    """The entries `user` may read: all for an operator, else those of their own personal
    objects (and their own bulk actions) and every entry of their teams, by the rule of the
    objects themselves (accounts/access.py). The API's list and the admin's page both read
    through this."""
    if is_operator(user):
        return AuditEntry.objects.all()
    return visible(AuditEntry.objects.all(), user)
