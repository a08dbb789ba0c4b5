"""Channel (where a user's notifications go) and Notification (the outbox and delivery log)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.utils import timezone

from notifications import crypto
from tasks.events import EVENTS
from tasks.ids import uuid7
from tasks.models import Run, Task, Workflow, WorkflowRun

NOTIFICATION_STATUSES = ("pending", "sent", "failed")
# The outbox's vocabulary as a model field's choices, labelled as TextChoices would label them.
EVENT_CHOICES = [(event, event.replace("_", " ").title()) for event in EVENTS]


class Channel(models.Model):
    """A destination owned by one user. `config` is public (shown by the API); secrets live only
    in `secret_config`, a Fernet token, and are never returned."""

    class Kind(models.TextChoices):
        EMAIL = "email"
        WEBHOOK = "webhook"
        SLACK = "slack"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    team = models.ForeignKey(
        "accounts.Team", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    name = models.CharField(max_length=200, blank=True, default="")
    # email {"address"}; webhook {"url"}; slack {"webhook_host"} or {"channel"}.
    config = models.JSONField(default=dict, blank=True)
    # webhook {"secret"?}; slack {"webhook_url"} (its path is the credential) or {"token"}.
    secret_config = models.TextField(blank=True, default="", editable=False)
    # Events this channel receives for every task of its owner, without per-task `notify`.
    all_tasks_events = ArrayField(
        models.CharField(max_length=32, choices=[(e, e) for e in EVENTS]), default=list, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["email", "webhook", "slack"]), name="channel_kind_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["owner", "-created_at"], name="channel_owner_created_idx"),
            # The outbox join for owners' all-task channels: only channels that subscribe.
            models.Index(
                fields=["owner"], condition=~Q(all_tasks_events=[]), name="channel_all_tasks_idx"
            ),
        ]

    def __str__(self) -> str:
        return self.name or f"{self.kind} {self.id}"

    @property
    def secrets(self) -> dict[str, Any]:
        return crypto.decrypt(self.secret_config)

    def set_secrets(self, values: dict[str, Any]) -> None:
        self.secret_config = crypto.encrypt({k: v for k, v in values.items() if v})

    def transport_config(self) -> dict[str, Any]:
        """What the transport needs: the public config merged with the decrypted secrets."""
        return {**self.config, **self.secrets}


class Notification(models.Model):
    """One (run, attempt, event, channel): inserted in the transaction that records the run's
    outcome (tasks.outbox), then delivered at least once by notifications.services."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        FAILED = "failed"

    # Also X-Scheduler-Delivery: stable across retries, the receiver's idempotency key.
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="notifications")
    # The unique key below starts with run_id and serves the foreign key's lookups. NULL: an
    # alert about the task alone (`overdue` before it has any run), raised once by the
    # reviewer's compare-and-swap on the task's health row.
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="+", db_index=False, null=True, blank=True
    )
    # NULL for a workflow run's event (`workflow_succeeded`, `workflow_failed`), which names
    # the workflow run instead and no run or task.
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, related_name="+", null=True, blank=True
    )
    workflow_run = models.ForeignKey(
        WorkflowRun,
        on_delete=models.CASCADE,
        related_name="+",
        db_index=False,
        null=True,
        blank=True,
    )
    # NULL but for a workflow's own event (`workflow_overdue`), which names the workflow alone.
    workflow = models.ForeignKey(
        Workflow,
        on_delete=models.CASCADE,
        related_name="+",
        db_index=False,
        null=True,
        blank=True,
    )
    attempt = models.PositiveIntegerField()
    event = models.CharField(max_length=24, choices=EVENT_CHOICES)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    # Transient failures are retried until then (created_at + NOTIFICATIONS_RETRY_WINDOW_SECONDS).
    # NULL: that same instant, read by the deliverer (a row the database queues itself, at a
    # workflow run's end, has no setting to read).
    retry_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # Exactly-once enqueue: a replayed outcome or a second enqueue inserts nothing.
            models.UniqueConstraint(
                fields=["run", "attempt", "event", "channel"],
                name="notification_unique_run_attempt_event_channel",
            ),
            models.CheckConstraint(
                condition=Q(status__in=NOTIFICATION_STATUSES), name="notification_status_valid"
            ),
            models.CheckConstraint(condition=Q(event__in=EVENTS), name="notification_event_valid"),
            # About a task (and maybe its run), a workflow run or a workflow: exactly one.
            models.CheckConstraint(
                condition=Q(task__isnull=False, workflow_run__isnull=True, workflow__isnull=True)
                | Q(task__isnull=True, run__isnull=True, workflow_run__isnull=False)
                & Q(workflow__isnull=True)
                | Q(task__isnull=True, run__isnull=True, workflow_run__isnull=True)
                & Q(workflow__isnull=False),
                name="notification_task_workflow_run_or_workflow",
            ),
            models.CheckConstraint(
                condition=~Q(status="sent") | Q(sent_at__isnull=False),
                name="notification_sent_has_sent_at",
            ),
        ]
        indexes = [
            # The delivery claim: pending rows ordered by when they may next be tried.
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status="pending"),
                name="notification_pending_idx",
            ),
            # The delivery log per channel, newest first (GET /api/v1/notifications?channel=).
            models.Index(fields=["channel", "-created_at"], name="notification_channel_idx"),
            # A workflow run's notifications (its deletion's cascade, the API's filter).
            models.Index(
                fields=["workflow_run"],
                condition=Q(workflow_run__isnull=False),
                name="notification_workflow_run_idx",
            ),
            # A workflow's own notifications (its deletion's cascade).
            models.Index(
                fields=["workflow"],
                condition=Q(workflow__isnull=False),
                name="notification_workflow_idx",
            ),
        ]

    def __str__(self) -> str:
        if self.workflow_run_id is not None:
            return f"{self.event} workflow_run={self.workflow_run_id} -> {self.channel_id}"
        if self.workflow_id is not None:
            return f"{self.event} workflow={self.workflow_id} -> {self.channel_id}"
        return f"{self.event} run={self.run_id}#{self.attempt} -> {self.channel_id}"
