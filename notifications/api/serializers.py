"""Input validation and output shapes of the channel and notification API (docs/api.md)."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from notifications.models import Channel, Notification
from notifications.transports.webhook import WHSEC_PREFIX, generate_secret, secret_key
from scheduler_project import outbound_http as http
from tasks.api.strict import ChoiceField, StrictSerializer
from tasks.events import EVENTS

# Per kind: the fields a client may send (secrets marked), as docs/api.md lists them.
KIND_FIELDS = {
    "email": {"address"},
    "webhook": {"url", "secret"},
    "slack": {"webhook_url", "token", "channel"},
}
CONFIG_FIELDS = {"address", "url", "secret", "webhook_url", "token", "channel"}


def _usable(owner: Any, team: Any) -> Any:
    if team is None:
        return Channel.objects.filter(owner=owner, team__isnull=True)
    return Channel.objects.filter(team=team)


def validate_notify_channels(entries: list[dict], *, owner: Any, team: Any = None) -> list[dict]:
    """Each `notify` entry must name one of `owner`'s channels (a task of no team), or one of
    the channels of `team` (a team's task: another team's channel, or a member's own, is
    refused the same way); ids come back canonical.

    Errors are keyed by the entry's index, as DRF reports nested lists. Without an
    owner (no request in the serializer's context) only the id's form is checked; the outbox
    still joins channels on the task's owner, so another user's channel never receives anything.
    """
    ids: list[str | None] = []
    for entry in entries:
        try:
            ids.append(str(uuid.UUID(str(entry["channel"]))))
        except ValueError:
            ids.append(None)
    owned: set[str] = set()
    checked = owner is not None or team is not None
    if checked:
        wanted = [i for i in ids if i]
        owned = {
            str(pk)
            for pk in _usable(owner, team).filter(id__in=wanted).values_list("id", flat=True)
        }
    whose = "yours" if team is None else "the task's team's"
    errors = {
        str(index): {"channel": [f"No channel with this id among {whose}."]}
        for index, channel_id in enumerate(ids)
        if channel_id is None or (checked and channel_id not in owned)
    }
    if errors:
        raise serializers.ValidationError(errors)
    return [
        {"channel": channel_id, "events": list(dict.fromkeys(entry["events"]))}
        for entry, channel_id in zip(entries, ids, strict=True)
    ]


class ChannelInputSerializer(StrictSerializer):
    """POST (all fields of the kind) and PATCH (partial; kind fixed at creation)."""

    kind = ChoiceField(choices=Channel.Kind.choices)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    address = serializers.EmailField(max_length=254, required=False)
    url = serializers.URLField(max_length=2000, required=False)
    secret = serializers.CharField(
        max_length=512, required=False, allow_null=True, allow_blank=True, write_only=True
    )
    webhook_url = serializers.URLField(max_length=2000, required=False, write_only=True)
    token = serializers.CharField(max_length=512, required=False, write_only=True)
    channel = serializers.CharField(max_length=200, required=False)
    all_tasks_events = serializers.ListField(
        child=ChoiceField(choices=EVENTS), required=False, max_length=len(EVENTS)
    )
    team = serializers.SlugField(max_length=100, required=False, allow_null=True)

    def validate_secret(self, value: str | None) -> str | None:
        if value and value.startswith(WHSEC_PREFIX):
            try:
                secret_key(value)
            except ValueError as exc:
                raise serializers.ValidationError(str(exc)) from None
        return value

    def validate(self, attrs: dict) -> dict:
        instance: Channel | None = self.instance
        kind = instance.kind if instance else attrs["kind"]
        if instance is None and kind == "webhook" and "secret" not in attrs:
            # Standard Webhooks: a signing secret the server makes, returned once (the view).
            attrs["secret"] = attrs["generated_secret"] = generate_secret()
        if instance and attrs.get("kind", kind) != kind:
            raise serializers.ValidationError(
                {"kind": ["A channel's kind cannot change; create another channel."]}
            )
        if kind == "slack" and "webhook_url" in attrs and ("token" in attrs or "channel" in attrs):
            raise serializers.ValidationError(
                {"webhook_url": ["Give webhook_url, or token and channel: not both."]}
            )
        unused = [f for f in CONFIG_FIELDS - KIND_FIELDS[kind] if f in attrs]
        if unused:
            raise serializers.ValidationError(
                {f: [f"Not used by {kind} channels."] for f in sorted(unused)}
            )
        if instance is None or any(f in attrs for f in CONFIG_FIELDS):
            # Secrets are decrypted only when the configuration actually changes.
            current = instance.transport_config() if instance else {}
            config = merge_config(kind, current, attrs)
            check_complete(kind, config)
            for field in ("url", "webhook_url"):
                if field in attrs:
                    check_outbound(field, attrs[field])
            attrs["config"] = config
        if "all_tasks_events" in attrs:
            attrs["all_tasks_events"] = list(dict.fromkeys(attrs["all_tasks_events"]))
        return attrs


def merge_config(kind: str, current: dict[str, Any], attrs: dict) -> dict[str, Any]:
    """The channel's full configuration (public and secret) after applying `attrs`."""
    config = dict(current)
    config.pop("webhook_host", None)
    if kind == "slack" and "webhook_url" in attrs:
        config = {"webhook_url": attrs["webhook_url"]}  # switching mode drops the other one
    elif kind == "slack" and ("token" in attrs or "channel" in attrs):
        config.pop("webhook_url", None)
    for field in KIND_FIELDS[kind]:
        if field in attrs:
            config[field] = attrs[field]
    return {k: v for k, v in config.items() if v not in (None, "")}


def check_complete(kind: str, config: dict[str, Any]) -> None:
    if kind == "email" and "address" not in config:
        raise serializers.ValidationError({"address": ["Email channels need an address."]})
    if kind == "webhook" and "url" not in config:
        raise serializers.ValidationError({"url": ["Webhook channels need a url."]})
    if kind == "slack" and "webhook_url" not in config:
        missing = [f for f in ("token", "channel") if f not in config]
        if missing:
            raise serializers.ValidationError(
                {f: ["Slack channels need webhook_url, or token and channel."] for f in missing}
            )


def check_outbound(field: str, url: str) -> None:
    """The SSRF guard, at creation already: a URL the deliverer would refuse is a 400 now."""
    try:
        http.validate_url(url, allow=settings.SCHEDULER_OUTBOUND_ALLOW)
    except http.OutboundError as exc:
        raise serializers.ValidationError({field: [exc.message]}) from None


class ChannelOutputSerializer(serializers.ModelSerializer):
    """A channel as returned: public configuration only, never a secret."""

    address = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()
    webhook_host = serializers.SerializerMethodField()
    channel = serializers.SerializerMethodField()
    has_secret = serializers.SerializerMethodField()
    team: serializers.Field = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )

    class Meta:
        model = Channel
        fields = [
            "id",
            "kind",
            "name",
            "address",
            "url",
            "webhook_host",
            "channel",
            "has_secret",
            "all_tasks_events",
            "team",
            "created_at",
            "updated_at",
        ]

    @extend_schema_field({"type": "string", "nullable": True})
    def get_address(self, channel: Channel) -> str | None:
        return channel.config.get("address")

    @extend_schema_field({"type": "string", "nullable": True})
    def get_url(self, channel: Channel) -> str | None:
        return channel.config.get("url")

    @extend_schema_field({"type": "string", "nullable": True})
    def get_webhook_host(self, channel: Channel) -> str | None:
        return channel.config.get("webhook_host")

    @extend_schema_field({"type": "string", "nullable": True})
    def get_channel(self, channel: Channel) -> str | None:
        return channel.config.get("channel")

    @extend_schema_field({"type": "boolean"})
    def get_has_secret(self, channel: Channel) -> bool:
        """True when a signing secret, Slack URL or token is stored (its value never shows)."""
        return bool(channel.secret_config)


class ChannelCreatedSerializer(ChannelOutputSerializer):
    """The 201 of a create: the channel plus, once, a signing secret the server generated."""

    secret = serializers.SerializerMethodField()

    class Meta(ChannelOutputSerializer.Meta):
        fields = [*ChannelOutputSerializer.Meta.fields, "secret"]

    @extend_schema_field(
        {
            "type": "string",
            "nullable": True,
            "description": "The generated whsec_ secret of a webhook channel created without "
            "one; shown only in this response. null when the client gave the secret.",
        }
    )
    def get_secret(self, channel: Channel) -> str | None:
        return self.context.get("generated_secret")


class NotificationSerializer(serializers.ModelSerializer):
    channel = serializers.UUIDField(source="channel_id", read_only=True)
    run = serializers.UUIDField(source="run_id", read_only=True)
    task = serializers.UUIDField(source="task_id", read_only=True, allow_null=True)
    workflow_run = serializers.UUIDField(
        source="workflow_run_id",
        read_only=True,
        allow_null=True,
        help_text="The workflow run a `workflow_*` event is about (its `run` and `task` null).",
    )
    workflow = serializers.UUIDField(
        source="workflow_id",
        read_only=True,
        allow_null=True,
        help_text="The workflow `workflow_overdue` is about (its `run`, `task` and "
        "`workflow_run` null).",
    )

    class Meta:
        model = Notification
        fields = [
            "id",
            "channel",
            "event",
            "run",
            "task",
            "workflow_run",
            "workflow",
            "attempt",
            "status",
            "attempts",
            "last_error",
            "next_attempt_at",
            "created_at",
            "sent_at",
        ]
