from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest

from notifications import services
from notifications.admin_add import ChannelAdd
from notifications.models import Channel, Notification
from tasks import audit
from tasks.admin.notify import register_channel_choices
from tasks.admin.scope import OwnedAdmin
from tasks.db import db_now


@admin.register(Channel)
class ChannelAdmin(ChannelAdd, OwnedAdmin):
    """Secrets are not editable fields and never rendered; the API changes them. Adding goes
    through the API's validation (notifications/admin_add.py)."""

    list_display = ["__str__", "owner", "kind", "all_tasks_events", "created_at"]
    list_filter = ["kind"]
    search_fields = ["id", "name", "owner__username"]
    raw_id_fields = ["owner"]
    fields = ["id", "owner", "kind", "name", "config", "has_secret", "all_tasks_events"]
    readonly_fields = ["id", "kind", "config", "has_secret"]

    @admin.display(boolean=True, description="secret stored")
    def has_secret(self, channel: Channel) -> bool:
        return bool(channel.secret_config)

    def save_model(self, request: HttpRequest, obj: Channel, form: Any, change: bool) -> None:
        # A change (adding is add_view's), recorded in the admin's transaction.
        was = services.shown(Channel.objects.get(pk=obj.pk))
        super().save_model(request, obj, form, change)
        services.record_change(obj, was)

    def delete_model(self, request: HttpRequest, obj: Channel) -> None:
        services.delete_channel(channel=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Channel]) -> None:
        for channel in queryset.order_by("pk"):
            services.delete_channel(channel=channel)


@admin.register(Notification)
class NotificationAdmin(OwnedAdmin):
    list_display = ["id", "event", "channel", "run", "attempt", "status", "attempts", "created_at"]
    list_filter = ["status", "event"]
    search_fields = ["id", "run__id", "task__id", "workflow_run__id", "workflow__id", "channel__id"]
    readonly_fields = [f.name for f in Notification._meta.fields]
    date_hierarchy = "created_at"
    show_full_result_count = False
    actions = ["resend"]
    owner_path = "channel__owner"
    owner_field = ""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Resend the selected notifications now")
    def resend(self, request: HttpRequest, queryset: QuerySet[Notification]) -> None:
        ids = list(queryset.values_list("id", flat=True))
        with transaction.atomic():
            count = services.resend(ids=ids, now=db_now())
            selected = {"selected": [str(pk) for pk in ids]}
            audit.record(
                audit.bulk_entry(
                    "resend",
                    "notification",
                    user=request.user,
                    filter=selected,
                    count=count,
                    refused=len(ids) - count,
                )
            )
        self.message_user(request, f"{count} notification(s) queued again.", messages.SUCCESS)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Notification]:
        return super().get_queryset(request).select_related("channel", "run")


def channel_choices(owner: Any) -> list[tuple[str, str]]:
    """The task form's channel picker: the owner's channels by name (tasks/admin/notify.py)."""
    channels = Channel.objects.filter(owner=owner).order_by("name", "id")
    return [(str(c.pk), f"{c.name or c.get_kind_display()} ({c.kind})") for c in channels]


register_channel_choices(channel_choices)
