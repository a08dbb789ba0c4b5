"""The task form's channel picker: a task's `notify` chosen from the owner's channels by name
(and the events to hear), instead of channel ids typed into JSON.

Channels are the notifications app's, which tasks must not import, so that app registers the
owner's choices here (`register_channel_choices`, from its admin module) as it registers the
`notify` validator in tasks.outbox. The picked channels become ordinary `notify` entries, added to
any typed in the JSON field, and pass the same validation as through the API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.http import HttpRequest

from tasks.events import EVENTS

ChannelChoices = Callable[[Any], list[tuple[str, str]]]
_channel_choices: ChannelChoices | None = None
DEFAULT_EVENTS = ["failed", "retries_exhausted"]


def register_channel_choices(choices: ChannelChoices) -> None:
    """`choices(owner)`: (channel id, label) of the channels a task of `owner` may notify."""
    global _channel_choices
    _channel_choices = choices


class NotifyPicker(admin.ModelAdmin):
    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = list(super().get_fieldsets(request, obj))
        if _channel_choices is None:
            return fieldsets
        return [*fieldsets, ("Notify", {"fields": ["notify_channels", "notify_events"]})]

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any):
        if _channel_choices is None:
            return super().get_form(request, obj, change, **kwargs)
        # The fieldsets name the picker's fields, but they are this form's, not the model's.
        fields = kwargs.get("fields") or flatten_fieldsets(self.get_fieldsets(request, obj))
        kwargs["fields"] = [f for f in fields if f not in ("notify_channels", "notify_events")]
        form = super().get_form(request, obj, change, **kwargs)
        owner = getattr(obj, "owner", None) or request.user
        choices = _channel_choices(owner)

        class PickedNotifyForm(form):  # type: ignore[valid-type,misc]
            notify_channels = forms.MultipleChoiceField(
                choices=choices,
                required=False,
                widget=forms.CheckboxSelectMultiple,
                label="notify channels",
                help_text="Your channels, by name: each gets the events below.",
            )
            notify_events = forms.MultipleChoiceField(
                choices=[(e, e) for e in EVENTS],
                initial=DEFAULT_EVENTS,
                required=False,
                widget=forms.CheckboxSelectMultiple,
                label="events",
            )

            def body(self) -> dict[str, Any]:
                body = super().body()
                typed = {
                    entry.get("channel") for entry in body["notify"] if isinstance(entry, dict)
                }
                events = self.cleaned_data.get("notify_events") or DEFAULT_EVENTS
                picked = [
                    {"channel": channel, "events": list(events)}
                    for channel in self.cleaned_data.get("notify_channels") or []
                    if channel not in typed
                ]
                return {**body, "notify": [*body["notify"], *picked]}

        return PickedNotifyForm
