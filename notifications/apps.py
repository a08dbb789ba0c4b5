from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.apps import AppConfig

if TYPE_CHECKING:
    from tasks.worker.companions import Companion


class NotificationsConfig(AppConfig):
    name = "notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from notifications import checks  # noqa: F401  (registers the system checks)
        from tasks import outbox
        from tasks.worker import companions

        # The tasks app reaches this app only through the outbox and these registrations.
        outbox.register_notify_validator(validate_notify_channels)
        companions.register(start_delivery_thread)


# Both import their modules when first called: a process that never validates a task's
# `notify` or runs a worker does not load the API's serializers or the transports.
def validate_notify_channels(entries: list[dict], *, owner: Any, team: Any = None) -> list[dict]:
    """A task's `notify` entries, each naming one of `owner`'s channels, or of the task's
    `team` (the API's check)."""
    from notifications.api import serializers

    return serializers.validate_notify_channels(entries, owner=owner, team=team)


def start_delivery_thread() -> Companion | None:
    """The worker's delivery thread, when NOTIFICATIONS_DELIVER_IN_WORKER."""
    from notifications import delivery_thread

    return delivery_thread.start_delivery_thread()
